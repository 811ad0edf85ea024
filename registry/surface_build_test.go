package registry

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/surface"
)

const recordsManifest = `{"tools":[
 {"name":"delete","inputSchema":{"type":"object","properties":{"id":{"type":"string"},"tenant":{"type":"string"},"force":{"type":"boolean"}},"required":["id","tenant"]}},
 {"name":"list","inputSchema":{"type":"object"}},
 {"name":"other","inputSchema":{"type":"object"}}
]}`

func surfaceRoute(s *RouteSurface) Route {
	return Route{Key: "core", Surface: s, ToolServices: []ToolService{
		{Name: "records", URL: "http://records:8080"},
		{Name: "fed", URL: "http://fed:8080/mcp", Protocol: ProtocolMCP, ToolPrefix: "fed_"},
	}}
}

func surfaceManifests(t *testing.T) map[string]*Manifest {
	fed := mustManifest(t, `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"},"secret":{"type":"string"}}}}]}`)
	fed.MCP = &MCPManifest{ProtocolVersion: "2025-06-18"}
	return map[string]*Manifest{"records": mustManifest(t, recordsManifest), "fed": fed}
}

func TestSurfaceBuild(t *testing.T) {
	desc := "Deletes one record of the caller's tenant."
	s := mustBuild(t, surfaceRoute(&RouteSurface{
		Held: []HeldTool{{Service: "records", Tool: "list", Hash: "sha256:new", Accepted: "sha256:old"}},
		Overrides: map[string]surface.Override{
			"delete":   {Name: "delete_record", Description: &desc, Arguments: map[string]surface.Argument{"tenant": {Fix: json.RawMessage(`"acme"`)}, "force": {Hide: true}}},
			"fed_echo": {Name: "say", Arguments: map[string]surface.Argument{"secret": {Hide: true}}},
			"missing":  {Title: &desc},
			"other":    {Arguments: map[string]surface.Argument{"nope": {Hide: true}}},
		},
	}), surfaceManifests(t))
	if got, want := toolNames(s), []string{"delete_record", "say"}; !slices.Equal(got, want) {
		t.Fatalf("tools = %q, want %q", got, want)
	}
	for _, name := range []string{"delete", "fed_echo", "other", "missing"} {
		if _, res := s.Lookup(name); res != mcp.ToolUnknown {
			t.Errorf("Lookup(%q) = %v, want unknown (renamed, rejected or never there)", name, res)
		}
	}
	if _, res := s.Lookup("list"); res != mcp.ToolQuarantined {
		t.Errorf("Lookup(list) = %v, want quarantined", res)
	}
	if want := []QuarantinedTool{{Name: "list", Service: "records", Tool: "list", Hash: "sha256:new", Accepted: "sha256:old"}}; !slices.Equal(s.Quarantined, want) {
		t.Errorf("quarantined = %+v", s.Quarantined)
	}
	if len(s.SurfaceErrors) != 1 || !strings.Contains(s.SurfaceErrors[0], `"missing"`) {
		t.Errorf("surface errors = %q", s.SurfaceErrors)
	}
	if !slices.ContainsFunc(s.Rejected, func(r RejectedTool) bool {
		return r.Name == "other" && strings.Contains(r.Reason, "arguments.nope: the tool has no such argument")
	}) {
		t.Errorf("rejected = %+v, want other's override refused", s.Rejected)
	}
	del, _ := s.Lookup("delete_record")
	if del.ServiceToolName() != "delete" || del.Description != desc || del.Args == nil {
		t.Errorf("delete_record: upstream %q description %q args %v", del.ServiceToolName(), del.Description, del.Args)
	}
	if strings.Contains(string(del.InputSchema), "tenant") || strings.Contains(string(del.InputSchema), "force") {
		t.Errorf("schema still names a fixed or hidden argument: %s", del.InputSchema)
	}
	if msgs := del.ValidateArguments(json.RawMessage(`{}`)); len(msgs) == 0 {
		t.Error("the virtual schema does not require id")
	}
	say, _ := s.Lookup("say")
	if say.ServiceToolName() != "echo" || !say.Federated() {
		t.Errorf("say: upstream %q", say.ServiceToolName())
	}

	// The surface is part of the version and of the persisted snapshot.
	plain := mustBuild(t, surfaceRoute(nil), surfaceManifests(t))
	if plain.Version == s.Version {
		t.Error("the surface does not change the version")
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(toolNames(back), toolNames(s)) || back.Version != s.Version || len(back.Quarantined) != 1 {
		t.Errorf("restored: tools %q version %s quarantined %v", toolNames(back), back.Version, back.Quarantined)
	}
}

func TestSurfaceRenameCollision(t *testing.T) {
	s := mustBuild(t, surfaceRoute(&RouteSurface{Overrides: map[string]surface.Override{"other": {Name: "list"}}}), surfaceManifests(t))
	if _, res := s.Lookup("list"); res != mcp.ToolFound {
		t.Fatal("the tool that keeps its name is gone")
	}
	if got := toolNames(s); slices.Contains(got, "other") {
		t.Errorf("tools = %q: the colliding rename is served under its old name", got)
	}
}

func TestListingRefusesSurface(t *testing.T) {
	l := Listing{Routes: []Route{surfaceRoute(&RouteSurface{})}}
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "surface") {
		t.Errorf("Validate() = %v, want the Portal's surface refused", err)
	}
	l = Listing{Routes: []Route{surfaceRoute(nil)}}
	l.Routes[0].ToolServices[0].AcceptedHashes = map[string][]string{"delete": {"md5:x"}}
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "acceptedHashes") {
		t.Errorf("Validate() = %v, want a bad accepted hash refused", err)
	}
}
