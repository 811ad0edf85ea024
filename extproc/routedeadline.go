package extproc

import (
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/routedeadline"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// The route-timeout deadline of federated event streams (package
// routedeadline, ADR 0013), as this request's stream takes it.

// routeDeadlineOn reports whether this stream may take the route-timeout
// deadline: not switched off, and a listener that allows the override.
func (x *request) routeDeadlineOn() bool {
	return !x.s.cfg.FederatedStreamDeadlineOff && x.listenerLevel() >= wire.ListenerLevel
}

// listenerLevel is the level the stream's listener declares. It is read
// from the stream's metadata on the federated paths that ask, once, not
// for every request.
func (x *request) listenerLevel() int {
	if !x.listenerRead {
		x.listener, x.listenerRead = routedeadline.ListenerLevel(x.ctx), true
	}
	return x.listener
}

// withoutRouteTimeout removes wire.RouteTimeoutHeader from a
// response-headers reply when the response headers h carry it: it is
// removed from every response; the federatedCall kind reads its value.
func withoutRouteTimeout(r *extprocv3.ProcessingResponse, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if !routedeadline.Carries(h) {
		return r
	}
	return routedeadline.Without(r)
}

// streamDeadline is when a federated event stream without its response is
// ended here, zero for never (routedeadline.Deadline): the route timeout
// (routeTimeout, from the response headers)
// counts where the response-headers override of duplexRequest is in force
// and the deadline is not switched off.
func (x *request) streamDeadline(routeTimeout time.Duration) time.Time {
	return routedeadline.Deadline(x.start, x.s.cfg.FederatedStreamTimeout, routeTimeout,
		x.fullDuplex() && x.routeDeadlineOn())
}
