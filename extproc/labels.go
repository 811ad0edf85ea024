package extproc

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolmesh/toolmesh/mcp"
)

// Label values are kept to small, fixed sets: a client chooses methods and
// versions, and must not be able to grow the metric series.

const (
	methodNone         = "none"         // no method known (the request ended before its body was read)
	methodOther        = "other"        // a method outside knownMethods
	methodNotification = "notification" // any notifications/*
	eraStateless       = mcp.Version20260728
	eraLegacy          = "legacy"
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

// eraLabel is the metric label and dynamic metadata value of an era.
func eraLabel(e mcp.Era) string {
	if e == mcp.EraStateless {
		return eraStateless
	}
	return eraLegacy
}

// eraLabelFromHeader guesses the era of a request mcp did not classify (one
// answered from its headers) from its MCP-Protocol-Version header.
func eraLabelFromHeader(r *mcp.HTTPRequest) string {
	if r.HasProtocolVersion && strings.TrimSpace(r.ProtocolVersion) == mcp.Version20260728 {
		return eraStateless
	}
	return eraLegacy
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
