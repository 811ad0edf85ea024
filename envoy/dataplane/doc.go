// Package dataplane is the local data plane that stands in for Envoy; the
// bootstraps it stands in for are in the envoy directory above it.
//
// The local data plane ([DataPlane]) is NOT a production proxy. It is a
// development and test stand-in for Envoy that understands exactly the
// configuration toolmesh's xDS translator emits (one listener with an HTTP
// connection manager, an early header mutation, ext_proc and router filters,
// local_reply_config, a route configuration, clusters and endpoints) and
// behaves like Envoy for it: it speaks the ext_proc gRPC protocol to the
// extproc server the way Envoy's ext_proc filter does, routes with Envoy's
// route-matching and route-cache rules, and shapes its own error replies
// through local_reply_config. It exists so `toolmesh run` works without an
// Envoy binary and so end-to-end tests can exercise the extproc server
// through real HTTP. Production deployments use real Envoy.
//
// This package is the listener and HTTP connection manager (activeStream,
// which drives the filter chain), the ext_proc connection pool and the ADS
// client. Its internal packages hold the rest: xdsconfig compiles the xDS
// resources, headers is the header map, extprocfilter the ext_proc filter,
// router the router filter's upstream calls, and rules every emulated Envoy
// rule.
//
// Every Envoy behaviour it emulates is written down in the rules package
// with the Envoy source or documentation it follows, so the emulation can
// be re-checked against a real Envoy. Anything outside that set is
// rejected by [DataPlane.Apply] or documented there as not emulated.
package dataplane
