package fetch

import (
	"encoding/json"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// TestPerClientState: a legacy server's logging and resources.subscribe
// capabilities are kept from its listing; a log level is per-client state
// of a legacy server only (ADR 0022).
func TestPerClientState(t *testing.T) {
	caps := mcp.ServerCapabilities{Logging: json.RawMessage(`{}`), Resources: &mcp.ListCapability{Subscribe: true}}
	legacy := manifestOf(&upstream.Listing{ProtocolVersion: mcp.Version20251125, Capabilities: caps})
	modern := manifestOf(&upstream.Listing{ProtocolVersion: mcp.Version20260728, Capabilities: caps})
	bare := manifestOf(&upstream.Listing{ProtocolVersion: mcp.Version20251125, Capabilities: mcp.ServerCapabilities{Logging: json.RawMessage(`null`)}})
	if !legacy.MCP.Logging || !legacy.MCP.Subscribe || !legacy.MCP.PerClientState() {
		t.Errorf("legacy manifest %+v: want logging and subscribe kept", legacy.MCP)
	}
	if modern.MCP.PerClientState() || bare.MCP.PerClientState() {
		t.Errorf("per-client state for a 2026-07-28 server (%v) or one without the capability (%v)", modern.MCP.PerClientState(), bare.MCP.PerClientState())
	}
}
