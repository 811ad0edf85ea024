package guest

import "fmt"

// ABIVersion is the version of the mcpfilter ABI this SDK implements.
const ABIVersion = 1

// Stage says which point of a tool call a filter sees.
type Stage string

// Stages.
const (
	StageRequest Stage = "request" // a tools/call request before it is routed
	StageResult  Stage = "result"  // the CallToolResult on its way back
)

// Request is one call of the filter: a tools/call request or its result.
type Request struct {
	Stage       Stage
	Filter      string // the name the operator gave this filter
	Route       string // route key, e.g. "core"
	Era         string // "stateless" (2026-07-28) or "legacy" (2025-xx)
	Version     string // effective MCP protocol version
	Method      string // JSON-RPC method, "tools/call"
	Tool        string // tool name
	ToolVersion string // version of the resolved tool, when known
	// Arguments is the arguments object as raw JSON ("{}" when absent).
	Arguments []byte
	// Result is the CallToolResult object as raw JSON (result stage only).
	Result []byte

	headers []byte // raw JSON object of the headers the host exposes
}

// Header returns the value of the client request header name (lowercase).
// Only the headers the operator exposes to the filter are present.
func (r Request) Header(name string) (string, bool) {
	raw, ok := Field(r.headers, name)
	if !ok {
		return "", false
	}
	return String(raw)
}

// Headers returns every exposed client request header (lowercase names).
func (r Request) Headers() map[string]string {
	h := make(map[string]string)
	_ = eachField(r.headers, func(k, v []byte) bool {
		name, ok1 := String(k)
		value, ok2 := String(v)
		if ok1 && ok2 {
			h[name] = value
		}
		return true
	})
	return h
}

// Argument returns the raw JSON value of the named argument.
func (r Request) Argument(name string) ([]byte, bool) { return Field(r.Arguments, name) }

// StringArgument returns the named argument when it is a JSON string.
func (r Request) StringArgument(name string) (string, bool) {
	raw, ok := Field(r.Arguments, name)
	if !ok {
		return "", false
	}
	return String(raw)
}

// Action is what a filter decided.
type Action string

// Actions.
const (
	ActionPass    Action = "pass"
	ActionDeny    Action = "deny"
	ActionRewrite Action = "rewrite"
)

// Decision is a filter's answer. Build it with Pass, Deny, DenyRPC or
// Rewrite and the With methods.
type Decision struct {
	Action Action
	// Reason says why a call was denied; clients see it.
	Reason string
	// RPCError denies with a JSON-RPC error of Code instead of an isError
	// tool result.
	RPCError bool
	Code     int
	// Arguments replaces the arguments object (request stage, rewrite).
	Arguments []byte
	// Result replaces the CallToolResult object (result stage, rewrite).
	Result []byte
	// Headers are added to the upstream request (request stage, rewrite).
	Headers []Header
}

// Header is one upstream request header a decision adds.
type Header struct{ Name, Value string }

// Pass lets the call through unchanged.
func Pass() Decision { return Decision{Action: ActionPass} }

// Deny stops the call; the client gets a tool result with isError set and
// the reason as its text.
func Deny(reason string) Decision { return Decision{Action: ActionDeny, Reason: reason} }

// DenyRPC stops the call with a JSON-RPC error (code 0 lets the host pick
// its default, invalid params).
func DenyRPC(code int, reason string) Decision {
	return Decision{Action: ActionDeny, Reason: reason, RPCError: true, Code: code}
}

// Rewrite returns a decision that changes the call; add the changes with
// WithArguments, WithResult and WithHeader.
func Rewrite() Decision { return Decision{Action: ActionRewrite} }

// WithArguments replaces the arguments object (raw JSON object).
func (d Decision) WithArguments(args []byte) Decision {
	d.Action, d.Arguments = ActionRewrite, args
	return d
}

// WithResult replaces the CallToolResult object (raw JSON object).
func (d Decision) WithResult(result []byte) Decision {
	d.Action, d.Result = ActionRewrite, result
	return d
}

// WithHeader adds a header to the request sent to the Tool Service.
func (d Decision) WithHeader(name, value string) Decision {
	d.Action = ActionRewrite
	d.Headers = append(d.Headers[:len(d.Headers):len(d.Headers)], Header{name, value})
	return d
}

var (
	handler    func(Request) Decision
	configurer func(config []byte) error
)

// Handle registers the filter function. Call it from init.
func Handle(fn func(Request) Decision) { handler = fn }

// Configure registers a function that receives the operator's filter
// configuration (raw JSON, "null" when none) once per instance, before the
// first call. Returning an error makes the module fail to load.
func Configure(fn func(config []byte) error) { configurer = fn }

// Process runs the registered filter on one envelope and returns the
// encoded decision. The exports call it; tests may call it directly to run
// a filter exactly as the host would, without WebAssembly.
func Process(envelope []byte) []byte { return process(nil, envelope) }

// process appends the decision to dst, which the exports reuse from call
// to call: the host has read the previous output by the time it calls again.
func process(dst, envelope []byte) (out []byte) {
	defer func() {
		if p := recover(); p != nil {
			out = appendFailure(dst[:0], fmt.Sprintf("panic: %v", p))
		}
	}()
	req, err := decodeEnvelope(envelope)
	if err != nil {
		return appendFailure(dst, err.Error())
	}
	if handler == nil {
		return appendFailure(dst, "no filter registered: call guest.Handle from init")
	}
	return appendDecision(dst, handler(req))
}

// Setup runs the registered configuration function; see Configure.
func Setup(config []byte) (out []byte) {
	defer func() {
		if p := recover(); p != nil {
			out = appendFailure(nil, fmt.Sprintf("panic: %v", p))
		}
	}()
	if configurer != nil {
		if err := configurer(config); err != nil {
			return appendFailure(nil, err.Error())
		}
	}
	return []byte(`{"action":"pass"}`)
}
