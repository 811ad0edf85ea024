package extproc

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
)

// Label values are kept to small, fixed sets: a client chooses methods and
// versions, and must not be able to grow the metric series.

const (
	methodNone         = "none"         // no method known (the request ended before its body was read)
	methodOther        = "other"        // a method outside knownMethods
	methodNotification = "notification" // any notifications/*
)

// knownMethods are the MCP methods reported by name.
var knownMethods = map[string]bool{
	"initialize":               true,
	"ping":                     true,
	"server/discover":          true,
	"tools/list":               true,
	"tools/call":               true,
	"subscriptions/listen":     true,
	"resources/list":           true,
	"resources/read":           true,
	"resources/templates/list": true,
	"prompts/list":             true,
	"prompts/get":              true,
	"completion/complete":      true,
	"logging/setLevel":         true,
}

// methodLabel maps a JSON-RPC method to its metric label.
func methodLabel(m string) string {
	switch {
	case m == "":
		return methodNone
	case knownMethods[m]:
		return m
	case strings.HasPrefix(m, "notifications/"):
		return methodNotification
	default:
		return methodOther
	}
}

// maxMethodScan bounds the body size bodyMethod decodes: the method of a
// request answered locally is only a metric label, not worth a second pass
// over a large body.
const maxMethodScan = 16 << 10

// bodyMethod returns the "method" member of a JSON-RPC request body, or ""
// when the body is large, not an object or has none. Only used for labels of
// requests mcp answered itself.
func bodyMethod(body []byte) string {
	if len(body) > maxMethodScan {
		return ""
	}
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.Method
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// upstreamOutcome is the call outcome of a Tool Service reply.
func upstreamOutcome(u mcp.Upstream) string {
	switch {
	case u.Failure == mcp.FailureTooLarge:
		return callTooLarge
	case u.Failure != mcp.FailureNone:
		return callNoResponse
	case u.Status >= 200 && u.Status <= 299:
		return callOK
	case u.Status >= 400 && u.Status <= 499:
		return callUpstream4xx
	case u.Status >= 500 && u.Status <= 599:
		return callUpstream5xx
	}
	return callToolError
}

// toolOther is the tool label of the calls of tools beyond a route's limit.
// Parentheses are not allowed in MCP tool names, so no tool is called that.
const toolOther = "(other)"

// DefaultToolLabels is how many tools of a route get their own tool label
// in toolmesh_tool_calls_total by default.
const DefaultToolLabels = 100

// toolLabels bounds the tool label of toolmesh_tool_calls_total: per route,
// the first max distinct tools called (since the process started) keep
// their name, later ones count as toolOther. Series cannot be relabelled
// once exported, so the first come keep their slot. Lookups of known names
// do not lock; the route keys are bounded by the Portal's routes.
type toolLabels struct {
	max    int64
	routes sync.Map // route key → *routeTools
}

type routeTools struct {
	n     atomic.Int64
	names sync.Map // tool name → struct{}
}

func (l *toolLabels) label(route, tool string) string {
	v, ok := l.routes.Load(route)
	if !ok {
		v, _ = l.routes.LoadOrStore(route, &routeTools{})
	}
	rt := v.(*routeTools)
	if _, ok := rt.names.Load(tool); ok {
		return tool
	}
	for {
		n := rt.n.Load()
		if n >= l.max {
			return toolOther
		}
		if rt.n.CompareAndSwap(n, n+1) {
			break
		}
	}
	if _, loaded := rt.names.LoadOrStore(tool, struct{}{}); loaded {
		rt.n.Add(-1) // another call admitted it meanwhile
	}
	return tool
}

// denyOutcome is the outcome of a call a filter denied: a failed inputSchema
// is invalid arguments, as without filters; anything else is a denial.
func denyOutcome(out *filters.Outcome) string {
	if out.SchemaInvalid {
		return callInvalidArgs
	}
	return callDenied
}

// denyDetails is the ImmediateResponse details of a denied call.
func denyDetails(outcome string) string {
	if outcome == callInvalidArgs {
		return detailsInvalidArguments
	}
	return detailsDenied
}

// invalidArgsText is the isError text of arguments that failed the tool's
// inputSchema, the same with filters (the input_schema filter) and without.
func invalidArgsText(tool string, msgs []string) string {
	return mcp.ToolFailed(tool, "invalid arguments: "+strings.Join(msgs, "; "))
}

// denyText is the isError text of a call (or result) a filter denied.
func denyText(tool string, out *filters.Outcome) string {
	if out.SchemaInvalid {
		return mcp.ToolFailed(tool, out.Reason) // "invalid arguments: ..."
	}
	return mcp.ToolFailed(tool, "denied: "+out.Reason)
}
