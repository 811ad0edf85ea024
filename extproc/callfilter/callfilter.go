// Package callfilter applies a route's filter chain (package filters) to
// one tools/call: the request stage, which may validate, rewrite or deny
// the arguments and add headers, and the result stage, which may rewrite or
// deny the result. It also writes the answers of a refused call, the same
// with filters and without, so a client cannot tell a filter's schema check
// from the built-in one. The stream handler (package extproc) logs, counts
// and sends them.
package callfilter

import (
	"context"
	"encoding/json"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Call outcomes of a refusal, values of the outcome label of
// toolmesh_tool_calls_total (docs/metrics.md).
const (
	OutcomeInvalidArgs = "invalid_arguments" // the arguments failed the tool's inputSchema
	OutcomeDenied      = "denied"            // a filter denied the call or its result
)

// Call is one resolved tools/call as the chain sees it.
type Call struct {
	Route   string
	Call    *mcp.Call
	Tool    *registry.Tool
	Headers *corev3.HeaderMap // the client's request headers
	Caller  *identity.Caller  // nil: anonymous
}

// Admission is what the request stage decided.
type Admission struct {
	// Args are the arguments as they will be routed, AddHeaders the
	// headers the filters add to a native call.
	Args       json.RawMessage
	AddHeaders map[string]string
	// Out is what the chain said; Out.Err a filter's failure, which the
	// chain already turned into its verdict.
	Out filters.Outcome
	// Reply is the answer of a refused call, nil when admitted; Outcome is
	// then the call's outcome.
	Reply   *mcp.Reply
	Outcome string
}

// Request runs chain's request stage on c with args.
func Request(ctx context.Context, chain *filters.Chain, proto *mcp.Server, c Call, args json.RawMessage) Admission {
	call, t := c.Call, c.Tool
	freq := &filters.Request{Route: c.Route, Era: call.Era.String(), Version: call.Version,
		Method: "tools/call", Tool: t.Name, ToolVersion: t.Version, Arguments: args,
		Headers: reqheaders.ForFilters(c.Headers), Caller: caller(c.Caller), Validate: t.ValidateArguments}
	out := chain.RunRequest(ctx, freq)
	a := Admission{Args: freq.Arguments, AddHeaders: out.AddHeaders, Out: out}
	if !out.Denied() {
		return a
	}
	a.Outcome = outcome(&out)
	if out.DenyAs == filters.RPCError {
		a.Reply = mcp.ErrorReply(200, call.ID, out.Code, out.Reason, nil)
	} else {
		a.Reply = &mcp.Reply{Status: 200, Body: proto.ToolError(call, denyText(t.Name, &out))}
	}
	return a
}

// Result runs chain's result stage on body, the response body built for
// c's call, and returns what the client gets; denied when a filter denied
// the result; err a filter's failure (the chain already decided).
func Result(ctx context.Context, chain *filters.Chain, proto *mcp.Server, c Call, body []byte) (out []byte, denied bool, err error) {
	call, t := c.Call, c.Tool
	res := &filters.Result{Route: c.Route, Era: call.Era.String(), Version: call.Version,
		Tool: t.Name, ToolVersion: t.Version, Body: mcp.ResultOf(call, body)}
	o := chain.RunResult(ctx, res)
	switch {
	case o.Denied():
		if o.DenyAs == filters.RPCError {
			return mcp.ErrorReply(200, call.ID, o.Code, o.Reason, nil).Body, true, o.Err
		}
		return proto.ToolError(call, denyText(t.Name, &o)), true, o.Err
	case o.Action == filters.ActionRewrite:
		return proto.WithResult(call, res.Body), false, o.Err
	}
	return body, false, o.Err
}

// caller is the request's caller as filters see it; nil when nothing is
// known of it.
func caller(c *identity.Caller) *filters.Caller {
	if c == nil || c.Anonymous() {
		return nil
	}
	return &filters.Caller{Authenticated: c.Authenticated, Issuer: c.Issuer,
		Subject: c.Subject, MeshID: c.MeshID, Scopes: c.Scopes, Claims: c.Claims}
}

// outcome is the outcome of a call a filter denied: a failed inputSchema
// is invalid arguments, as without filters; anything else is a denial.
func outcome(out *filters.Outcome) string {
	if out.SchemaInvalid {
		return OutcomeInvalidArgs
	}
	return OutcomeDenied
}

// InvalidArgsText is the isError text of arguments that failed the tool's
// inputSchema, the same with filters (the input_schema filter) and without.
func InvalidArgsText(tool string, msgs []string) string {
	return mcp.ToolFailed(tool, "invalid arguments: "+strings.Join(msgs, "; "))
}

// denyText is the isError text of a call (or result) a filter denied.
func denyText(tool string, out *filters.Outcome) string {
	if out.SchemaInvalid {
		return mcp.ToolFailed(tool, out.Reason) // "invalid arguments: ..."
	}
	return mcp.ToolFailed(tool, "denied: "+out.Reason)
}
