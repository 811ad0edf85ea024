package metrics

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
)

// Label values are kept to small, fixed sets: a client chooses methods and
// versions, and must not be able to grow the metric series.

// Method labels besides the known methods' own names.
const (
	MethodNone         = "none"         // no method known (the request ended before its body was read)
	MethodOther        = "other"        // a method outside knownMethods
	MethodNotification = "notification" // any notifications/*
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

// MethodLabel maps a JSON-RPC method to its metric label.
func MethodLabel(m string) string {
	switch {
	case m == "":
		return MethodNone
	case knownMethods[m]:
		return m
	case strings.HasPrefix(m, "notifications/"):
		return MethodNotification
	default:
		return MethodOther
	}
}

// maxMethodScan bounds the body size BodyMethod decodes: the method of a
// request answered locally is only a metric label, not worth a second pass
// over a large body.
const maxMethodScan = 16 << 10

// BodyMethod returns the "method" member of a JSON-RPC request body, or ""
// when the body is large, not an object or has none. Only used for labels of
// requests mcp answered itself.
func BodyMethod(body []byte) string {
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

// ToolOther is the tool label of the calls of tools beyond a route's limit.
// Parentheses are not allowed in MCP tool names, so no tool is called that.
const ToolOther = "(other)"

// DefaultToolLabels is how many tools of a route get their own tool label
// in toolmesh_tool_calls_total by default.
const DefaultToolLabels = 100

// ToolLabels bounds the tool label of toolmesh_tool_calls_total: per route,
// the first max distinct tools called (since the process started) keep
// their name, later ones count as ToolOther. Series cannot be relabelled
// once exported, so the first come keep their slot. Lookups of known names
// do not lock; the route keys are bounded by the Portal's routes.
type ToolLabels struct {
	max    int64
	routes sync.Map // route key → *routeTools
}

type routeTools struct {
	n     atomic.Int64
	names sync.Map // tool name → struct{}
}

// Label is the tool label of a call of tool on route.
func (l *ToolLabels) Label(route, tool string) string {
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
			return ToolOther
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
