// Package routedeadline is the route-timeout deadline of federated event
// streams, on by default
// (docs/decisions/0013-federated-stream-deadline.md): the extproc server
// learns each federated server's route timeout, SRE overrides applied, from
// wire.RouteTimeoutHeader on the response (xds/routes.go adds it), and
// ends a stalled stream with the request's isError "timeout" result shortly
// before Envoy's route timeout would reset it.
//
// The rollout guard: the request-headers override to FULL_DUPLEX_STREAMED
// (extproc/duplexresp.go) is sent by default only on a stream whose
// listener declares, in the ext_proc stream's initial metadata, that it
// allows that override (wire.ListenerLevelMetadata, set by
// xds/listener.go). An older listener would ignore the override and keep
// the body BUFFERED while the server held its headers reply (a 504 from
// the message timeout on JSON answers, a spurious StreamedBodyResponse on
// streams): without the entry the server behaves as the release before,
// and the route timeout ends a stalled stream by a reset. This package
// reads and computes; the stream handler (package extproc) decides.
package routedeadline

import (
	"context"
	"slices"
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// ListenerLevel is the level the ext_proc stream's listener declares, 0 when
// it declares none (an older listener) or something unreadable.
func ListenerLevel(ctx context.Context) int {
	// Only the one key: FromIncomingContext would copy the whole metadata.
	v := metadata.ValueFromIncomingContext(ctx, wire.ListenerLevelMetadata)
	if len(v) != 1 {
		return 0
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Carries reports whether the response headers carry
// wire.RouteTimeoutHeader, which is removed from every response (Without).
// Its value counts only on a federated server's route, whose route sets
// it, replacing any copy the server sent (OVERWRITE_IF_EXISTS_OR_ADD).
func Carries(h *extprocv3.HttpHeaders) bool {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.GetKey() == wire.RouteTimeoutHeader {
			return true
		}
	}
	return false
}

// RouteTimeout is the route timeout wire.RouteTimeoutHeader gives,
// zero for none.
func RouteTimeout(h *extprocv3.HttpHeaders) time.Duration {
	var d time.Duration
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.GetKey() != wire.RouteTimeoutHeader {
			continue
		}
		if ms, err := strconv.ParseInt(procmsg.HeaderValue(hv), 10, 64); err == nil && ms > 0 {
			d = time.Duration(ms) * time.Millisecond
		}
	}
	return d
}

// Without adds the removal of wire.RouteTimeoutHeader to a
// response-headers reply: it is for the server, never for the client.
// Other replies are returned as they are. r may be shared, so the messages
// on the way to the removals are copied, shallowly: a deep copy
// (proto.Clone) of every header set was a tenth of the extproc server's
// CPU on a federated call, and a copy through protoreflect still a tenth
// of what the server adds to one.
func Without(r *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	hr := r.GetResponseHeaders()
	if hr == nil {
		return r
	}
	cr := &extprocv3.CommonResponse{}
	if c := hr.GetResponse(); c != nil {
		cr = &extprocv3.CommonResponse{Status: c.Status, HeaderMutation: c.HeaderMutation,
			BodyMutation: c.BodyMutation, Trailers: c.Trailers, ClearRouteCache: c.ClearRouteCache}
	}
	m := &extprocv3.HeaderMutation{}
	if hm := cr.GetHeaderMutation(); hm != nil {
		m = &extprocv3.HeaderMutation{SetHeaders: hm.SetHeaders, RemoveHeaders: hm.RemoveHeaders}
	}
	// Clipped: the append never writes into the shared message's array.
	m.RemoveHeaders = append(slices.Clip(m.RemoveHeaders), wire.RouteTimeoutHeader)
	cr.HeaderMutation = m
	// Every field but the response, which is replaced, and request_drain,
	// deprecated and never set by this server. The copies name each field:
	// TestWithoutCopiesEveryField fails when the protos gain one.
	return &extprocv3.ProcessingResponse{
		Response:               &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}},
		DynamicMetadata:        r.DynamicMetadata,
		TypedDynamicMetadata:   r.TypedDynamicMetadata,
		ModeOverride:           r.ModeOverride,
		RequestDrainRequests:   r.RequestDrainRequests,
		RequestDrainResponses:  r.RequestDrainResponses,
		OverrideMessageTimeout: r.OverrideMessageTimeout,
		ServerWindowUpdate:     r.ServerWindowUpdate,
	}
}

// Margin is how long before the route timeout the gateway ends a
// stream: the final event must cross from this server to Envoy and be
// written to the client before the router's timer fires. The deadline
// counts from this request's start, the request headers, which is before
// the router starts its timer (once it has the whole request:
// source/common/router/router.cc, downstream_request_complete_time_), so
// the margin only has to cover that one hop and scheduling on a busy node
// (a timer firing late, a GC pause): 1/20 of the timeout, at most 1s
// (plenty for one gRPC message), at least 250ms; and never more than half
// a very short timeout.
func Margin(timeout time.Duration) time.Duration {
	m := min(time.Second, max(250*time.Millisecond, timeout/20))
	return min(m, timeout/2)
}

// Deadline is when a federated event stream without its response is
// ended, zero for never: the route timeout less Margin (when the route
// deadline applies: the response-headers override is in force and the
// deadline not switched off), or the explicit federatedStreamTimeout when
// that is set and sooner; both count from the request's start.
func Deadline(start time.Time, explicit, route time.Duration, routeApplies bool) time.Time {
	var d time.Time
	if explicit > 0 {
		d = start.Add(explicit)
	}
	if routeApplies && route > 0 {
		if r := start.Add(route - Margin(route)); d.IsZero() || r.Before(d) {
			d = r
		}
	}
	return d
}
