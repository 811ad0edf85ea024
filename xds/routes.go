package xds

import (
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// Route configuration (one virtual host, domains "*"), in match order:
//
//  0. with Options.Notifications, the route of the notifications cluster
//     (notifications.go): header x-toolmesh-cluster equal to
//     wire.NotificationsCluster, timeout 0s.
//  1. one route per Tool Service: any path with header x-toolmesh-cluster
//     exactly equal to its cluster name → that cluster. Only the extproc
//     server sets the header (clients' copies are stripped at the edge), in
//     the same reply that rewrites :path and clears the route cache. Per
//     route: timeout = cluster.requestTimeout, Host rewritten to the Tool
//     Service's authority, the routing header removed before forwarding.
//     A federated MCP server's route also adds wire.RouteTimeoutHeader
//     to its responses (routeTimeoutHeader).
//  2. any path with header x-toolmesh-cluster present but naming no route
//     of 1 → 503 (pendingBody). The registry of an extproc server and the
//     xDS server do not swap in lockstep: a Tool Service added to the
//     Portal can be routed to by the extproc server before this Envoy has
//     its route (the xDS push is debounced, and another replica may refresh
//     first). Without this route such a call fell through to 5 and got a
//     404 "no MCP route"; now it is a local reply (router.cc
//     Filter::decodeHeaders → sendLocalReply) that local_reply_config
//     turns into the call's "tool T failed: unavailable" result, the same
//     answer as a Tool Service that is briefly down, and the extproc server
//     counts it unavailable (localreply.go).
//  3. one route per Portal route: exact publicPath → 500 with a JSON-RPC
//     error. It is what Envoy first matches for POST /mcp/{route}; ext_proc
//     runs before the router, so the direct response is only reached when the
//     extproc server let a request through without routing it (a bug).
//     Because it is the route matched while ext_proc buffers the body, it
//     carries the request body limit: the largest maxRequestBytes of the
//     route's Tool Services, set only where it differs from the virtual
//     host's Options.MaxRequestBytes.
//  4. prefix "/.well-known/oauth-protected-resource/" → 404 with a JSON-RPC
//     error. The extproc server answers these GETs itself in the
//     request-headers phase: a route's protected-resource metadata (RFC 9728
//     section 3.1, the well-known suffix inserted before its public path),
//     or 404 for a route without authentication. As with 3, the direct
//     response is reached only if the extproc server let one through.
//  5. catch-all prefix "/" → 404 with a JSON-RPC error (unknown route).
//     The extproc server answers such requests itself, before the router
//     runs (the ext_proc filter is on every route): a 404 that names the path
//     and, for a POST with a body, echoes the request's JSON-RPC id, which a
//     direct response cannot read. The router answers direct responses only
//     after the filters before it let the request through
//     (source/common/router/router.cc, Filter::decodeHeaders), so this fixed
//     reply is reached only if the extproc server did not answer.
//
// Retries: tool calls are not assumed idempotent, so a call is retried only
// when Envoy knows the Tool Service cannot have seen it (DefaultRetryOn):
// connect-failure, refused-stream (HTTP/2 REFUSED_STREAM) and
// reset-before-request (Envoy ≥ 1.31). Plain "reset" and 5xx are not
// retried unless an SRE opts in with retryOn: they may replay a call that
// already ran. num_retries = maxRetries; the route timeout covers all
// attempts, perTryTimeout each one. (No previous_hosts predicate: a Tool
// Service is one endpoint, or one DNS name, and the local data plane does
// not emulate it.)
const (
	virtualHostName = "toolmesh"

	unroutedBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"request was not routed by the toolmesh extproc server"}}`
	notFoundBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no MCP route at this path"}}`
	pendingBody  = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"the Tool Service has no route on this Envoy yet; retry"}}`

	// protectedResourcePrefix is where the extproc server answers each
	// route's protected-resource metadata (extproc/authn.MetadataPrefix).
	protectedResourcePrefix = "/.well-known/oauth-protected-resource/"
	noMetadataBody          = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no protected resource metadata at this path"}}`
)

// buildRouteConfig builds the route configuration of these Tool Services
// and Portal routes; bodyLimits are the routes' request body limits.
func buildRouteConfig(ups []upstream, prs []portalRoute, bodyLimits []uint64, opts Options) *routev3.RouteConfiguration {
	routes := make([]*routev3.Route, 0, len(ups)+len(prs)+4)
	if opts.Notifications != nil {
		routes = append(routes, notificationsRoute())
	}
	for _, u := range ups {
		routes = append(routes, toolServiceRoute(u))
	}
	routes = append(routes, directJSON("cluster_pending", &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{{
			Name:                 wire.ClusterHeader,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true},
		}},
	}, 503, pendingBody))
	for i, p := range prs {
		rt := directJSON("unrouted "+p.path,
			&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p.path}}, 500, unroutedBody)
		if bodyLimits[i] != 0 && bodyLimits[i] != opts.MaxRequestBytes {
			rt.RequestBodyBufferLimit = wrapperspb.UInt64(bodyLimits[i])
		}
		routes = append(routes, rt)
	}
	routes = append(routes, directJSON("protected_resource_metadata",
		&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: protectedResourcePrefix}}, 404, noMetadataBody))
	routes = append(routes, directJSON("not_found",
		&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, 404, notFoundBody))
	return &routev3.RouteConfiguration{
		Name: wire.RouteConfigName,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    virtualHostName,
			Domains: []string{"*"},
			Routes:  routes,
			// On the virtual host, so the limit does not depend on which route
			// matched first (the buffer limit follows the first match).
			RequestBodyBufferLimit: wrapperspb.UInt64(opts.MaxRequestBytes),
		}},
	}
}

func toolServiceRoute(u upstream) *routev3.Route {
	s := u.settings
	action := &routev3.RouteAction{
		ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: u.cluster},
		Timeout:              durationpb.New(s.requestTimeout),
		HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: u.authority},
	}
	if s.idleTimeout != nil {
		action.IdleTimeout = durationpb.New(*s.idleTimeout)
	} else if u.mcp && s.requestTimeout > 0 {
		action.IdleTimeout = durationpb.New(s.requestTimeout + federatedIdleMargin)
	}
	if s.maxRetries > 0 || s.perTryTimeout > 0 {
		action.RetryPolicy = &routev3.RetryPolicy{
			RetryOn:    s.retryOn,
			NumRetries: wrapperspb.UInt32(s.maxRetries),
		}
		if s.perTryTimeout > 0 {
			action.RetryPolicy.PerTryTimeout = durationpb.New(s.perTryTimeout)
		}
	}
	rt := &routev3.Route{
		Name: u.cluster,
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{
				Name:                 wire.ClusterHeader,
				HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: exact(u.cluster)},
			}},
		},
		Action:                 &routev3.Route_Route{Route: action},
		RequestHeadersToRemove: []string{wire.ClusterHeader},
	}
	if u.mcp {
		rt.ResponseHeadersToAdd = []*corev3.HeaderValueOption{routeTimeoutHeader(s.requestTimeout)}
	}
	return rt
}

// federatedIdleMargin is what a federated server's route adds to its
// timeout for its stream idle timeout. Its responses are
// FULL_DUPLEX_STREAMED, where Envoy runs no ext_proc message timer
// (ext_proc.cc ProcessorState::onStartProcessorCall), and once the upstream
// response is complete the router's timeout is gone too: an extproc server
// stalling on a held response would hold the client until the connection
// manager's stream_idle_timeout (5 minutes). The route's idle_timeout
// (route_components.proto RouteAction.idle_timeout: reset by every encode
// or decode event; a stream reset once upstream response headers arrived,
// source/common/http/conn_manager_impl.cc ActiveStream::onIdleTimeout)
// bounds that wait at the route timeout plus the margin (5s: an extproc
// server on a loaded node that answers its own deadline a little late must
// not lose to it). While the router's
// timer runs it cannot fire first: it needs that long without any event.
const federatedIdleMargin = 5 * time.Second

// routeTimeoutHeader tells the extproc server this route's timeout, with
// SRE overrides applied, so that it can end a federated server's stalled
// event stream with a result before Envoy resets it
// (docs/decisions/0013-federated-stream-deadline.md). Envoy's router adds
// route response_headers_to_add to the upstream's headers before it hands
// them to the encoder filters, ext_proc included
// (source/common/router/router.cc Filter::onUpstreamHeaders:
// route_entry_->finalizeResponseHeaders, then callbacks_->encodeHeaders),
// and to a local reply through the filter chain
// (source/common/http/filter_manager.cc: the local-reply encode functions
// call the route's finalizeResponseHeaders) [verify:
// source/common/http/filter_manager.cc
// DownstreamFilterManager::prepareLocalReplyViaFilterChain and
// sendLocalReplyViaFilterChain: read only in third-party copies; no stored
// copy of Envoy's own file is at v1.40.0].
// OVERWRITE_IF_EXISTS_OR_ADD replaces a copy the server sent itself, so
// the value is the route's. Only federated servers' routes carry it: only
// their streams need it, and native routes keep their responses unchanged.
// The extproc server removes it from every response it sees it on.
func routeTimeoutHeader(timeout time.Duration) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: wire.RouteTimeoutHeader, Value: strconv.FormatInt(timeout.Milliseconds(), 10)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

func directJSON(name string, match *routev3.RouteMatch, status uint32, body string) *routev3.Route {
	return &routev3.Route{
		Name:  name,
		Match: match,
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: status,
			Body:   &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
		}},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "content-type", Value: "application/json"},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}},
	}
}
