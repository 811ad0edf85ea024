package filters

import (
	"context"
	"encoding/json"
	"fmt"
)

// Stage is the point of a tool call at which a filter runs.
type Stage int

// Stages.
const (
	// StageRequest: a parsed tools/call request, before it is routed.
	StageRequest Stage = iota + 1
	// StageResult: the CallToolResult, before it goes back to the client.
	StageResult
)

// String returns "request" or "result".
func (s Stage) String() string {
	switch s {
	case StageRequest:
		return "request"
	case StageResult:
		return "result"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// Protocol eras, as carried in Request.Era and Result.Era.
const (
	EraStateless = "stateless" // 2026-07-28: no initialize, per-request _meta
	EraLegacy    = "legacy"    // 2025-03-26 … 2025-11-25: initialize handshake
)

// CodeInvalidParams is the JSON-RPC error code a deny of kind RPCError gets
// when the filter names none: the call's params are what the policy refuses,
// and it is the code an unknown tool gets too.
const CodeInvalidParams = -32602

// Request is one tools/call at the request stage. The extproc stream handler
// fills it after the protocol rules have passed and the tool has resolved to
// exactly one Tool Service.
type Request struct {
	Route       string // route key from the path, e.g. "core"
	Era         string // EraStateless or EraLegacy
	Version     string // effective MCP protocol version
	Method      string // JSON-RPC method: "tools/call"
	Tool        string // tool name
	ToolVersion string // version of the resolved tool, when known
	// Arguments is the arguments object ("{}" when the call had none). The
	// chain replaces it when a filter rewrites the arguments, so later
	// filters see the rewrite.
	Arguments json.RawMessage
	// Headers holds the client's request headers: lowercase names,
	// pseudo-headers excluded.
	Headers map[string]string
	// Caller is who makes the call, as authentication and the mesh
	// established it; nil when nothing is known (an anonymous caller). A
	// per-caller rule can be a filter that reads it.
	Caller *Caller
	// Validate checks arguments against the tool's inputSchema and returns
	// the validation messages (none when valid). The caller supplies it
	// because filters must not depend on the registry; nil skips
	// validation.
	Validate func(args json.RawMessage) []string
}

// Caller is the caller of a call as filters see it. Filters never see the
// caller's token.
type Caller struct {
	// Authenticated is true when a bearer token was validated.
	Authenticated bool
	// Issuer and Subject are the token's iss and sub.
	Issuer  string
	Subject string
	// MeshID is the SPIFFE ID of the downstream mTLS peer, if any.
	MeshID string
	// Scopes are the token's granted scopes.
	Scopes []string
	// Claims are the token's claims as decoded JSON; read only.
	Claims map[string]any
}

// Result is one tool result at the result stage.
type Result struct {
	Route       string
	Era         string
	Version     string
	Tool        string
	ToolVersion string
	// Body is the CallToolResult object. The chain replaces it when a
	// filter rewrites the result.
	Body json.RawMessage
}

// Action is what a filter decided.
type Action int

// Actions.
const (
	// ActionPass lets the call through unchanged (the zero Decision).
	ActionPass Action = iota
	// ActionDeny stops the call; later filters do not run.
	ActionDeny
	// ActionRewrite changes the call: the arguments (request stage), the
	// result (result stage) or the headers sent upstream (request stage).
	ActionRewrite
)

// String returns "pass", "deny" or "rewrite".
func (a Action) String() string {
	switch a {
	case ActionPass:
		return "pass"
	case ActionDeny:
		return "deny"
	case ActionRewrite:
		return "rewrite"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// DenyKind says how a deny reaches the client.
type DenyKind int

// Deny kinds.
const (
	// ToolError answers with a CallToolResult that has isError set and the
	// reason as its text, so a model can read it and correct itself.
	ToolError DenyKind = iota
	// RPCError answers with a JSON-RPC error carrying Code and the reason.
	RPCError
)

// String returns "tool_error" or "rpc_error".
func (k DenyKind) String() string {
	if k == RPCError {
		return "rpc_error"
	}
	return "tool_error"
}

// Decision is one filter's answer. The zero value passes.
type Decision struct {
	Action Action
	// Reason says why a call is denied; the client sees it.
	Reason string
	// DenyAs picks how a deny is answered.
	DenyAs DenyKind
	// Code is the JSON-RPC error code of an RPCError deny (0 means
	// CodeInvalidParams).
	Code int
	// Arguments replaces the arguments object (request stage).
	Arguments json.RawMessage
	// Result replaces the CallToolResult object (result stage).
	Result json.RawMessage
	// AddHeaders are set on the request to the Tool Service (request
	// stage). Names are lowercase; gateway-owned names are refused.
	AddHeaders map[string]string
}

// Deny returns a deny answered as an isError tool result.
func Deny(reason string) Decision {
	return Decision{Action: ActionDeny, Reason: reason, DenyAs: ToolError}
}

// DenyRPC returns a deny answered as a JSON-RPC error (code 0 means
// CodeInvalidParams).
func DenyRPC(code int, reason string) Decision {
	return Decision{Action: ActionDeny, Reason: reason, DenyAs: RPCError, Code: code}
}

// Filter inspects, denies or rewrites tool calls. Implementations must be
// safe for concurrent use: one Filter serves every request of every route it
// is configured on. A filter returns an error only when it could not decide;
// the chain then applies the filter's fail-open or fail-closed setting.
type Filter interface {
	// Name is the name the filter was configured under.
	Name() string
	// OnRequest sees a tools/call request.
	OnRequest(ctx context.Context, r *Request) (Decision, error)
	// OnResult sees the result of a call that reached a Tool Service.
	OnResult(ctx context.Context, r *Result) (Decision, error)
}

// StageFilter is implemented by filters that run on only some stages; the
// chain skips them elsewhere (no call, no metrics).
type StageFilter interface {
	Filter
	Runs(Stage) bool
}

// ToolLister is implemented by filters that decide, from the tool name alone,
// that a tool is not callable on a route. The caller uses Chain.ToolAllowed
// to leave such tools out of tools/list, so clients are not shown tools that
// would be refused.
type ToolLister interface {
	Filter
	ToolAllowed(tool string) bool
}

// Error prefixes a filter's error with its name, as filter/<name>: ….
func Error(name string, err error) error { return fmt.Errorf("filter/%s: %w", name, err) }
