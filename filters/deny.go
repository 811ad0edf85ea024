package filters

import "fmt"

// denySpec is the configurable part of how a built-in filter denies.
type denySpec struct {
	// DenyAs is "tool_error" (an isError result) or "rpc_error".
	DenyAs string `json:"denyAs,omitempty"`
	// Code is the JSON-RPC error code for rpc_error (default -32602).
	Code int `json:"code,omitempty"`
}

// decision returns a deny with reason in the configured form; def is the
// kind used when the configuration names none.
func (s denySpec) decision(reason string, def DenyKind) Decision {
	kind := def
	switch s.DenyAs {
	case "tool_error":
		kind = ToolError
	case "rpc_error":
		kind = RPCError
	}
	if kind == RPCError {
		return DenyRPC(s.Code, reason)
	}
	return Deny(reason)
}

func (s denySpec) check(def DenyKind) error {
	switch s.DenyAs {
	case "", "tool_error", "rpc_error":
	default:
		return fmt.Errorf(`denyAs %q: want "tool_error" or "rpc_error"`, s.DenyAs)
	}
	if s.Code != 0 && s.decision("", def).DenyAs != RPCError {
		return fmt.Errorf(`code is only used with denyAs "rpc_error"`)
	}
	return nil
}
