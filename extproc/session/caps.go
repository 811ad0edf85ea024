package session

import (
	"bytes"

	"github.com/toolmesh/toolmesh/mcp"
)

// Caps are the client capabilities a legacy session declares: the
// requests a legacy client said it answers, on its own tools/call. A
// legacy client declares its capabilities in initialize, which the gateway
// answers itself and keeps nothing of (it issues no session), so it is
// known only when the request repeats it in params._meta under the
// 2026-07-28 member io.modelcontextprotocol/clientCapabilities. The flags
// keep the number of sessions per server small and declare nothing the
// gateway cannot pass on (no roots.listChanged: the gateway does not relay
// the client's notifications; no sampling sub-capabilities).
type Caps uint8

// The capabilities passed on.
const (
	CapSampling Caps = 1 << iota
	CapElicitForm
	CapElicitURL
	CapRoots
)

// CapsOf reads the capabilities a legacy client declared in its request.
func CapsOf(body []byte) Caps {
	return CapsFrom(mcp.Member(mcp.Member(mcp.Member(body, "params"), "_meta"), mcp.MetaClientCapabilities))
}

// CapsFrom reads a ClientCapabilities object.
func CapsFrom(c []byte) Caps {
	var caps Caps
	if isJSONObject(mcp.Member(c, "sampling")) {
		caps |= CapSampling
	}
	if isJSONObject(mcp.Member(c, "roots")) {
		caps |= CapRoots
	}
	if e := mcp.Member(c, "elicitation"); isJSONObject(e) {
		form, url := isJSONObject(mcp.Member(e, "form")), isJSONObject(mcp.Member(e, "url"))
		if form || !url { // an empty elicitation object means form (2025-11-25)
			caps |= CapElicitForm
		}
		if url {
			caps |= CapElicitURL
		}
	}
	return caps
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// Declare is the capabilities object of initialize; nil for none.
func (c Caps) Declare() map[string]any {
	if c == 0 {
		return nil
	}
	m := map[string]any{}
	if c&CapSampling != 0 {
		m["sampling"] = map[string]any{}
	}
	if c&CapRoots != 0 {
		m["roots"] = map[string]any{}
	}
	if c&(CapElicitForm|CapElicitURL) != 0 {
		e := map[string]any{}
		if c&CapElicitForm != 0 {
			e["form"] = map[string]any{}
		}
		if c&CapElicitURL != 0 {
			e["url"] = map[string]any{}
		}
		m["elicitation"] = e
	}
	return m
}
