package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// ABIVersion is the mcpfilter ABI version this host speaks. A module's
// abi_version export must return it.
const ABIVersion = 1

// Export names of the mcpfilter/v1 ABI (see docs/wasm-abi.md).
const (
	exportABIVersion = "abi_version" // () -> i32
	exportAlloc      = "alloc"       // (size i32) -> ptr i32
	exportFilter     = "filter"      // (ptr i32, len i32) -> i64 (ptr<<32 | len)
	exportConfigure  = "configure"   // optional, same shape as filter
	exportMemory     = "memory"
)

// Errors a call can fail with. They wrap the underlying cause, so use
// errors.Is.
var (
	// ErrTimeout: the guest ran past CallTimeout and was stopped.
	ErrTimeout = errors.New("wasm filter timed out")
	// ErrTrap: the guest trapped (a Go runtime fatal error such as out of
	// memory, an unrecovered panic outside the SDK, proc_exit, …).
	ErrTrap = errors.New("wasm filter trapped")
	// ErrGuest: the guest reported a failure (the SDK recovered a panic, or
	// could not decode the envelope).
	ErrGuest = errors.New("wasm filter failed")
	// ErrABI: the guest broke the ABI (bad pointers, malformed decision).
	ErrABI = errors.New("wasm filter broke the ABI")
	// ErrBusy: no instance became free within QueueTimeout.
	ErrBusy = errors.New("wasm filter busy")
	// ErrTooLarge: the envelope exceeds MaxEnvelopeBytes.
	ErrTooLarge = errors.New("wasm filter input too large")
	// ErrClosed: the module was closed.
	ErrClosed = errors.New("wasm filter closed")
)

// Stage names used in the envelope.
const (
	StageRequest = "request"
	StageResult  = "result"
)

// Input is what the host tells the guest about one call. The host encodes
// it as the JSON envelope of the ABI; Arguments and Result must be valid
// JSON (they are copied verbatim).
type Input struct {
	Stage       string // StageRequest or StageResult
	Route       string
	Era         string
	Version     string
	Method      string
	Tool        string
	ToolVersion string
	// Arguments is the arguments object (request stage only).
	Arguments json.RawMessage
	// Result is the CallToolResult object (result stage only).
	Result json.RawMessage
	// Headers are the client request headers the guest may see.
	Headers map[string]string
}

// Decision is a guest's answer, decoded.
type Decision struct {
	// Action is "pass", "deny" or "rewrite".
	Action string `json:"action"`
	// Reason explains a deny.
	Reason string `json:"reason,omitempty"`
	// As is "tool_error" (default) or "rpc_error" for a deny.
	As string `json:"as,omitempty"`
	// Code is the JSON-RPC error code of an rpc_error deny (0: host default).
	Code int `json:"code,omitempty"`
	// Arguments replaces the arguments object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Result replaces the CallToolResult object.
	Result json.RawMessage `json:"result,omitempty"`
	// Headers are added to the upstream request.
	Headers map[string]string `json:"headers,omitempty"`
}

// Decision actions and deny kinds.
const (
	ActionPass    = "pass"
	ActionDeny    = "deny"
	ActionRewrite = "rewrite"
	actionError   = "error" // the SDK's report of a failed call
	AsToolError   = "tool_error"
	AsRPCError    = "rpc_error"
)

// appendEnvelope encodes in as the mcpfilter/v1 envelope. It is written by
// hand so the raw arguments and result are copied, not re-parsed.
func appendEnvelope(dst []byte, filter string, in *Input) []byte {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, ABIVersion, 10)
	dst = appendField(dst, "stage", in.Stage)
	dst = appendField(dst, "filter", filter)
	dst = appendField(dst, "route", in.Route)
	dst = appendField(dst, "era", in.Era)
	dst = appendField(dst, "version", in.Version)
	dst = appendField(dst, "method", in.Method)
	dst = appendField(dst, "tool", in.Tool)
	dst = appendField(dst, "toolVersion", in.ToolVersion)
	if len(in.Headers) > 0 {
		// Sorted, so the guest sees the same bytes for the same headers.
		names := make([]string, 0, len(in.Headers))
		for k := range in.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		dst = append(dst, `,"headers":{`...)
		for i, k := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, in.Headers[k])
		}
		dst = append(dst, '}')
	}
	// The payload goes last, always: guests take it as the rest of the
	// envelope instead of scanning it (see docs/wasm-abi.md).
	switch {
	case in.Stage == StageResult && len(in.Result) > 0:
		dst = append(dst, `,"result":`...)
		dst = append(dst, in.Result...)
	case in.Stage != StageResult && len(in.Arguments) > 0:
		dst = append(dst, `,"arguments":`...)
		dst = append(dst, in.Arguments...)
	}
	return append(dst, '}')
}

func appendField(dst []byte, key, value string) []byte {
	if value == "" {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return appendString(dst, value)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 is passed through;
// guests decode leniently and the host never relies on it.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ParseDecision decodes and checks a guest's output. A guest-reported
// failure ("action":"error") is returned as an error wrapping ErrGuest;
// anything malformed wraps ErrABI.
func ParseDecision(b []byte) (Decision, error) {
	var d Decision
	if err := json.Unmarshal(b, &d); err != nil {
		return Decision{}, fmt.Errorf("%w: decode decision: %v", ErrABI, err)
	}
	switch d.Action {
	case ActionPass, ActionDeny, ActionRewrite:
	case actionError:
		return Decision{}, fmt.Errorf("%w: %s", ErrGuest, d.Reason)
	default:
		return Decision{}, fmt.Errorf("%w: unknown action %q", ErrABI, d.Action)
	}
	switch d.As {
	case "", AsToolError, AsRPCError:
	default:
		return Decision{}, fmt.Errorf("%w: unknown deny kind %q", ErrABI, d.As)
	}
	if d.Action == ActionDeny && d.Reason == "" {
		d.Reason = "denied by filter"
	}
	if err := checkObject(d.Arguments, "arguments"); err != nil {
		return Decision{}, err
	}
	if err := checkObject(d.Result, "result"); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// checkObject insists that a rewritten arguments or result value is a JSON
// object, as MCP requires of both.
func checkObject(raw json.RawMessage, what string) error {
	if raw == nil {
		return nil
	}
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: rewritten %s is not a JSON object", ErrABI, what)
	}
	return nil
}
