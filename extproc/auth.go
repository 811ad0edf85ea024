package extproc

import (
	"log/slog"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/mcp"
)

// detailsUnauthenticated is the response code detail of an answer of
// authentication (400, 401, 403, 503).
const detailsUnauthenticated = "toolmesh_unauthenticated"

// authenticate runs in the request-headers phase once the route is known:
// it sets x.caller, or answers before any body is read, so nothing of a
// refused request is routed. nil means go on.
func (x *request) authenticate(route string) *extprocv3.ProcessingResponse {
	a := x.rt.Auth
	if !a.Enabled(route) {
		return nil // an open route reads no header for it
	}
	r := authn.Request{Route: route, PublicPath: x.req.Path}
	r.Authorization, r.AuthorizationCount, r.Query = reqheaders.Credentials(x.headers)
	res := a.Authenticate(x.ctx, &r)
	if res.Label != "" {
		x.s.metrics.Auth.WithLabelValues(route, res.Label).Inc()
	}
	if res.Status == 0 {
		if res.Caller != nil {
			// Keep what is already known of the caller (its mesh identity,
			// set from the connection); res.Caller is new and not yet shared.
			if x.caller != nil {
				res.Caller.MeshID = x.caller.MeshID
			}
			x.caller = res.Caller
		}
		return nil
	}
	// A refusal is a security decision: an audit event like authorization's
	// and approval's, with the mesh identity when there is one and never
	// the token or its unverified claims.
	x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "audit",
		slog.String("event", "authentication"),
		slog.String("caller", x.caller.String()),
		slog.String("route", route),
		slog.String("decision", "refused"),
		slog.String("reason", res.Label),
		slog.Int("status", res.Status),
		slog.String("request_id", x.requestID))
	return x.answer(res.Reply(), outcomeRejected, detailsUnauthenticated)
}

// protectedResource answers GET /.well-known/oauth-protected-resource{public
// path}: the route's RFC 9728 metadata, 404 for a path that names no route
// or a route that does not authenticate.
func (x *request) protectedResource() *extprocv3.ProcessingResponse {
	public := strings.TrimPrefix(x.req.Path, authn.MetadataPrefix)
	key, _, ok := x.s.routes.Lookup(public)
	var doc []byte
	if ok && x.rt.Auth != nil {
		x.routeKey = key
		doc, ok = x.rt.Auth.Metadata(key, public)
	}
	if !ok || doc == nil {
		r := mcp.ErrorReply(404, nullID, mcp.CodeInvalidRequest, "no protected resource metadata at this path", nil)
		return x.answer(r, outcomeUnknownRoute, detailsUnknownRoute)
	}
	if x.req.Method != "GET" && x.req.Method != "HEAD" {
		r := mcp.ErrorReply(405, nullID, mcp.CodeInvalidRequest, "method not allowed", nil)
		r.Headers = append(r.Headers, mcp.Header{Key: "allow", Value: "GET, HEAD"})
		return x.answer(r, outcomeRejected, detailsRejected)
	}
	return x.answer(&mcp.Reply{Status: 200, Body: doc, Headers: []mcp.Header{
		{Key: "content-type", Value: procmsg.ContentTypeJSON},
		{Key: "cache-control", Value: "max-age=300"},
	}}, outcomeAnswered, detailsReply)
}
