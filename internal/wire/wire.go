// Package wire holds the names the extproc server and the xDS translator
// must agree on: headers, dynamic metadata keys and the names of Envoy
// resources and clusters. The extproc server sets them and the xDS translator
// programs Envoy to read them; both import this package, which imports
// nothing, so the two sides cannot drift apart.
package wire

const (
	// ClusterHeader carries the upstream cluster chosen by the extproc server.
	// Envoy's route table routes on it after clear_route_cache; the listener's
	// early header mutation removes any client-supplied value first.
	ClusterHeader = "x-toolmesh-cluster"

	// HeaderPrefix is the prefix of every header toolmesh owns. Client-supplied
	// headers with this prefix are never trusted and are stripped at the edge.
	HeaderPrefix = "x-toolmesh-"

	// Headers the gateway sets on a tool call to the Tool Service (docs/contracts/toolservice.md).
	RouteHeader       = "x-toolmesh-route"
	ToolHeader        = "x-toolmesh-tool"
	ToolVersionHeader = "x-toolmesh-tool-version"

	// MetadataNamespace is the ext_proc dynamic metadata namespace the extproc
	// server writes and Envoy's local_reply_config reads.
	MetadataNamespace = "toolmesh"
	// MetadataJSONRPCID holds the exact JSON text of the request's JSON-RPC id
	// (for example 7 or "7"), so a local reply can echo it byte for byte.
	MetadataJSONRPCID = "jsonrpc_id"
	// MetadataToolCall is "true" on requests that were routed to a Tool Service.
	MetadataToolCall = "tool_call"
	// MetadataTool holds the tool name of a routed call.
	MetadataTool = "tool"
	// MetadataEra is "2026-07-28" for a stateless-era call and "legacy"
	// otherwise, so a local reply can take the era's result shape.
	MetadataEra = "era"
	// MetadataAnswered is "true" on an ImmediateResponse of the extproc
	// server: its reply is already a JSON-RPC body, which local_reply_config
	// must leave alone.
	MetadataAnswered = "answered"

	// LocalReplyHeader marks Envoy's own reply to a routed tools/call: the
	// listener's local_reply_config sets it to LocalReplyTimeout (route or
	// per-try timeout, 504) or LocalReplyUnavailable (503: no healthy
	// upstream, connect failure, reset, overflow), and the extproc server,
	// which sees that reply's headers on the response path, counts the call
	// by it and removes it.
	LocalReplyHeader      = "x-toolmesh-local-reply"
	LocalReplyTimeout     = "timeout"
	LocalReplyUnavailable = "unavailable"

	// RouteTimeoutHeader carries a federated MCP server's route timeout in
	// milliseconds ("0": none) on every response of its Tool Service route:
	// the route adds it (response_headers_to_add, OVERWRITE_IF_EXISTS_OR_ADD,
	// so the server's own copy is replaced) before the encoder filters, and
	// the extproc server reads it to end a stalled event stream before that
	// timeout, then removes it (docs/decisions/0013-federated-stream-deadline.md).
	RouteTimeoutHeader = "x-toolmesh-route-timeout-ms"

	// ListenerLevelMetadata is the gRPC initial metadata entry on the ext_proc
	// grpc_service: the feature level of the listener Envoy runs, an integer
	// that only grows. A stream without it comes from an older listener.
	// Level 1: allowed_override_modes has the FULL_DUPLEX_STREAMED entry and
	// federated MCP servers' routes carry RouteTimeoutHeader, so the extproc
	// server may set that mode from the request headers by default (ADR 0013).
	ListenerLevelMetadata = "x-toolmesh-listener"
	// ListenerLevel is the level this release's listener declares.
	ListenerLevel = 1

	// ExtProcFilterName is the HTTP filter name of ext_proc in the listener.
	ExtProcFilterName = "envoy.filters.http.ext_proc"
	// ExtProcCluster is the static bootstrap cluster that reaches the extproc server.
	ExtProcCluster = "toolmesh_extproc"
	// XDSCluster is the static bootstrap cluster that reaches the xDS server.
	XDSCluster = "toolmesh_xds"
	// ListenerName and RouteConfigName name the resources the xDS server emits.
	ListenerName    = "toolmesh_mcp"
	RouteConfigName = "toolmesh_routes"

	// Change-notification streams (docs/decisions/0012): the cluster that
	// reaches the notifications server of the extproc processes, the path
	// the extproc server rewrites a subscriptions/listen POST or a legacy
	// GET to, and the headers it sets for that server.
	NotificationsCluster = "toolmesh_notifications"
	NotificationsPath    = "/toolmesh/notifications"
	// SubscriptionHeader is the exact JSON text of the subscriptions/listen
	// request id; absent on a legacy GET stream.
	SubscriptionHeader = "x-toolmesh-subscription"
	// NotifyHeader lists the notification kinds the stream carries,
	// comma-separated NotifyTools, NotifyPrompts, NotifyResources.
	NotifyHeader    = "x-toolmesh-notify"
	NotifyTools     = "tools"
	NotifyPrompts   = "prompts"
	NotifyResources = "resources"
	// CallerHeader names the authenticated caller, when there is one
	// (identity.Caller.Key: issuer, subject and mesh identity); the
	// notifications server bounds streams per caller.
	CallerHeader = "x-toolmesh-caller"
	// FollowHeader is the sealed follow ticket of a legacy GET stream whose
	// client has upstream sessions of its own (extproc/session, ADR 0025):
	// the notifications server follows them and passes their server
	// notifications on.
	FollowHeader = "x-toolmesh-follow"
)

// ClusterName is the Envoy cluster name of a Tool Service.
func ClusterName(toolService string) string { return "toolsvc_" + toolService }
