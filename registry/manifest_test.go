package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeManifest(t *testing.T) {
	m, err := DecodeManifest([]byte(`{"schemaVersion":"0.1","tools":[
		{"name":"ok","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},
		{"name":5,"inputSchema":{"type":"object"}},
		{"name":"wrong_active","active":"yes","inputSchema":{"type":"object"}},
		"just a string",
		{"name":"ok2","active":false,"inputSchema":{"type":"object"}}
	]}`))
	if err != nil {
		t.Fatalf("DecodeManifest() = %v", err)
	}
	if len(m.Tools) != 2 || m.Tools[0].Name != "ok" || m.Tools[1].Name != "ok2" || *m.Tools[1].Active {
		t.Errorf("tools = %+v", m.Tools)
	}
	want := []InvalidEntry{
		{Index: 1, Reason: `not a valid tool entry: field "name": unexpected number`},
		{Index: 2, Name: "wrong_active", Reason: `not a valid tool entry: field "active": unexpected string`},
		{Index: 3, Reason: "not a valid tool entry: must be an object, got string"},
	}
	if !reflect.DeepEqual(m.Invalid, want) {
		t.Errorf("invalid = %+v\nwant %+v", m.Invalid, want)
	}

	for _, tc := range []struct{ doc, want string }{
		{``, "not a JSON object"},
		{`[]`, "not a JSON object"},
		{`{}`, `missing "tools" array`},
		{`{"tools":null}`, `missing "tools" array`},
		{`{"tools":{}}`, "decode manifest"},
		{`{"tools":[]} x`, "trailing data"},
		{`{"tools":[`, "decode manifest"},
	} {
		if _, err := DecodeManifest([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeManifest(%q) = %v, want error containing %q", tc.doc, err, tc.want)
		}
	}
	if m, err := DecodeManifest([]byte(`{"tools":[]}`)); err != nil || m.Tools == nil || len(m.Tools) != 0 {
		t.Errorf("empty manifest = %+v, %v", m, err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "registry", "manifest-weather.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(calcManifest))
	f.Add([]byte(`{"tools":[1,"x",{"name":{}},{"name":"a","inputSchema":{"type":"object","$ref":"#"}}]}`))
	f.Add([]byte(`{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"p":{"pattern":"(?=x)"}}},"icons":{}}]}`))
	route := Route{Key: "fuzz", ToolServices: []ToolService{{Name: "svc", URL: "http://svc"}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			return
		}
		// Whatever a manifest holds, a snapshot is built: bad entries are
		// rejected, never fatal, and the version is stable.
		s, err := BuildSnapshot(route, map[string]*Manifest{"svc": m}, t0)
		if err != nil {
			t.Fatalf("BuildSnapshot() = %v", err)
		}
		page, _, _ := s.ToolsPage("")
		if !json.Valid(page) {
			t.Fatalf("tools JSON is invalid: %s", page)
		}
		for _, tool := range s.Tools {
			_ = tool.ValidateArguments(json.RawMessage(`{"x":1}`))
		}
		again, err := UnmarshalSnapshot(mustJSON(t, s))
		if err != nil || again.Version != s.Version {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func mustJSON(t *testing.T, s *Snapshot) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
