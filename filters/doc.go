// Package filters runs policy on tool calls inside the extproc server.
//
// A [Filter] sees a tools/call at two stages: the request ([Request]: route,
// era, method, tool, arguments, client headers) before it is routed, and the
// result ([Result]: the CallToolResult) before the client gets it. It answers
// with a [Decision]: pass, deny (as an isError tool result or a JSON-RPC
// error, with a reason) or rewrite (the arguments, the result, headers added
// to the upstream request).
//
// Filters are configured in the filters section of the toolmesh config file
// ([Config]): a list of definitions whose order is the execution order of
// every chain, the filters every route runs by default, and per-route
// adjustments. [Build] validates the configuration and constructs a [Set]:
// the filters, built once, and a precomputed [Chain] per route.
//
// Input-schema validation is on for every route even when the lists leave
// the input_schema filter out (see [Config]); only Config.SchemaValidationOff
// turns it off for a route, and [Build] logs a warning naming each one.
//
// Built-in types: input_schema (arguments against the tool's inputSchema,
// via Request.Validate), tool_acl (allow/deny globs on tool names, which also
// hide tools from tools/list via [Chain.ToolAllowed]), argument_size,
// header_propagation and redact (RFC 6901 pointers and regexps on results).
// Type wasm runs a WebAssembly module through package filters/wasm; see
// docs/wasm-abi.md.
//
// # Calling filters from an ext_proc stream
//
// Capture the chain once per stream, so both stages of one call see the same
// configuration even if it is reloaded in between:
//
//	chain := set.Chain(route)                    // lock-free
//	req := &filters.Request{Route: route, Era: filters.EraStateless, Version: v,
//		Method: "tools/call", Tool: name, Arguments: args, Headers: hdrs,
//		Validate: snapshot.ValidatorFor(name)}
//	out := chain.RunRequest(ctx, req)
//	switch {
//	case out.Denied() && out.DenyAs == filters.RPCError:
//		// immediate response: JSON-RPC error out.Code, out.Reason
//	case out.Denied():
//		// immediate response: a tool error result carrying out.Reason
//	default:
//		// route the call with req.Arguments (rewritten or not) and
//		// out.AddHeaders added to the upstream request
//	}
//	// later, with the Tool Service's answer mapped to a CallToolResult:
//	res := &filters.Result{Route: route, Era: era, Tool: name, Body: callToolResult}
//	rout := chain.RunResult(ctx, res)                 // res.Body holds any rewrite
//
// Log out.Err when it is set: it holds the failure behind a fail-closed
// deny or the failures of fail-open filters. A filter that fails to decide
// denies the call unless its definition sets failOpen.
//
// tools/list can leave out tools a route's chain refuses by name with
// chain.ToolAllowed(tool).
//
// Metrics: toolmesh_filter_{calls,denials,rewrites,errors}_total and
// toolmesh_filter_duration_seconds, labelled by filter and stage, plus the
// toolmesh_wasm_filter_* series of package filters/wasm.
package filters
