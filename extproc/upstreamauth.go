package extproc

import (
	"context"
	"log/slog"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/mcp"
)

// Upstream credentials: extproc/upstreamcred says what a call to a Tool
// Service or a federated MCP server carries by the config file's
// upstreamAuth; this file asks it on a request's behalf.

// The call outcome and details of a call whose upstreamAuth credential
// cannot be read: it is not sent.
const (
	callNoCredentials    = "no_credentials"
	detailsNoCredentials = "toolmesh_no_credentials"
)

// upstreamCredentials returns the headers (lower-case names) a call to the
// Tool Service named service carries by its upstreamAuth entry, and the
// OAuth token among them (nil for none), which the call's kind keeps for
// the upstream's 401 (upstream401.go). An error (an unreadable credential,
// no token) means the call must not be sent.
func (x *request) upstreamCredentials(service string) (map[string]string, *upstreamcred.Token, error) {
	return x.credentialsWith(x.ctx, service)
}

// credentialsWith is upstreamCredentials with a token request bounded by
// ctx.
func (x *request) credentialsWith(ctx context.Context, service string) (map[string]string, *upstreamcred.Token, error) {
	u := &x.rt.UpstreamAuth
	a, ok := u.Services[service]
	if !ok {
		return nil, nil, nil
	}
	clientAuth := ""
	if a.ForwardToken {
		clientAuth = procmsg.FirstHeader(x.headers, "authorization")
	}
	c, err := u.Headers(ctx, service, x.caller, clientAuth)
	if err != nil {
		return nil, nil, err
	}
	if x.caller != nil {
		for h, claim := range c.Unforwarded {
			x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "claim not forwarded", slog.String("request_id", x.requestID),
				slog.String("service", service), slog.String("header", h), slog.String("claim", claim))
		}
	}
	return c.Headers, c.Token, nil
}

// noCredentials answers a call whose upstreamAuth credential cannot be
// read: it is not sent without it.
func (x *request) noCredentials(call *mcp.Call, service string, err error) *extprocv3.ProcessingResponse {
	x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "tool call: no upstream credentials", slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey), slog.String("service", service), slog.String("error", err.Error()))
	x.callOutcome = callNoCredentials
	return x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call,
		"the Tool Service "+service+" is not available: "+upstreamcred.Reason(err))}, outcomeAnswered, detailsNoCredentials)
}

// claimHeaderNames are the headers of service's forwardClaims.
func (x *request) claimHeaderNames(service string) []string {
	return x.rt.UpstreamAuth.ClaimHeaders(service)
}

// unsetAuthHeaders are the headers of service's upstreamAuth entry that
// set does not fill, removed from the routed request (upstreamcred.Auth.Unset).
func (x *request) unsetAuthHeaders(service string, set map[string]string) []string {
	return x.rt.UpstreamAuth.Unset(service, set)
}
