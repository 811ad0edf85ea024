package extproc

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// Change-notification streams (docs/decisions/0012). The extproc server
// cannot hold a long-lived response, so a subscriptions/listen POST (from
// its body reply) and a legacy GET (from its headers reply, as a GET has no
// body) are routed like a tool call: x-toolmesh-cluster names the
// notifications cluster, :path becomes wire.NotificationsPath, and
// headers tell the notifications server the route, the subscription id, the
// notification kinds and the caller. At the response headers the body is
// switched to STREAMED with the override event streams already use
// (streamOverride), and every chunk passes unchanged.

// methodGetStream is the method label of a legacy GET stream.
const methodGetStream = "GET"

// streamRequest answers a GET on a route: a legacy stream when the gateway
// serves them (mcp.Config.ListChanged), otherwise 405 as before.
func (x *request) streamRequest(owned []string) *extprocv3.ProcessingResponse {
	l, r := x.s.proto.CheckStream(&x.req, x.snap)
	if r != nil {
		return x.answer(r, "", detailsRejected)
	}
	x.method, x.era = methodGetStream, mcp.EraLegacy.Label()
	// A client with upstream sessions of its own (clientsession.go) also
	// hears what those servers send outside a call (ADR 0025).
	follow, bad := x.followTicket()
	if bad != nil {
		return x.answer(bad, "", detailsRejected)
	}
	return procmsg.RequestHeaders(x.routeStream(l, owned, follow))
}

// listen routes a subscriptions/listen request from the body reply; the
// body passes unchanged.
func (x *request) listen(l *mcp.Listen) *extprocv3.ProcessingResponse {
	x.method, x.era = "subscriptions/listen", mcp.EraStateless.Label()
	return procmsg.RequestBody(x.routeStream(l, nil, ""))
}

// routeStream is the header mutation that sends a stream request to the
// notifications cluster; follow is a legacy stream's follow ticket ("" for
// none).
func (x *request) routeStream(l *mcp.Listen, owned []string, follow string) *extprocv3.CommonResponse {
	kinds := make([]string, 0, 3)
	for _, k := range []struct {
		on   bool
		name string
	}{{l.Tools, wire.NotifyTools}, {l.Prompts, wire.NotifyPrompts}, {l.Resources, wire.NotifyResources}} {
		if k.on {
			kinds = append(kinds, k.name)
		}
	}
	set := []*corev3.HeaderValueOption{
		procmsg.SetHeader(wire.ClusterHeader, wire.NotificationsCluster),
		procmsg.SetHeader(":path", wire.NotificationsPath),
		procmsg.SetHeader(wire.RouteHeader, x.routeKey),
		procmsg.SetHeader(wire.NotifyHeader, strings.Join(kinds, ",")),
	}
	mine := []string{wire.ClusterHeader, wire.RouteHeader, wire.NotifyHeader}
	if l.ID != nil {
		set = append(set, procmsg.SetHeader(wire.SubscriptionHeader, string(l.ID)))
		mine = append(mine, wire.SubscriptionHeader)
	}
	if !x.caller.Anonymous() {
		set = append(set, procmsg.SetHeader(wire.CallerHeader, x.caller.Key()))
		mine = append(mine, wire.CallerHeader)
	}
	if follow != "" {
		set = append(set, procmsg.SetHeader(wire.FollowHeader, follow))
		mine = append(mine, wire.FollowHeader)
	}
	// The client's session token stays here: what the notifications
	// server needs of it is in the follow ticket.
	remove := []string{"mcp-method", "mcp-name", "accept-encoding", "mcp-session-id"}
	for _, k := range owned {
		if !slices.Contains(mine, k) {
			remove = append(remove, k)
		}
	}
	// The request's outcome is that of the notifications server's answer
	// (streamResponseHeaders); no_response when none came.
	x.kind, x.outcome, x.callOutcome = &listenStream{}, outcomeRouted, callNoResponse
	return &extprocv3.CommonResponse{
		HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: remove},
		ClearRouteCache: true, // honoured because a header mutation comes with it
	}
}

// streamResponseHeaders switches an event stream from the notifications
// server to STREAMED; anything else (its JSON errors: over a bound, no
// route) passes as it is.
func (x *request) streamResponseHeaders(k *listenStream, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	k.up.note(h)
	x.callOutcome = upstreamOutcome(mcp.Upstream{Status: k.up.status})
	resp := procmsg.ResponseHeaders(&extprocv3.CommonResponse{})
	if k.up.status >= 200 && k.up.status <= 299 && reqheaders.IsEventStream(k.up.contentType) && !h.GetEndOfStream() {
		k.streaming = true
		resp.ModeOverride = procmsg.StreamOverride()
	}
	x.status = k.up.status
	return resp
}
