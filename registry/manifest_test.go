package registry

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/registrytest"
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

func TestHTTPFetcher(t *testing.T) {
	doc := registrytest.ToolsDoc("a", "b")
	tests := []struct {
		name    string
		mode    string
		body    string
		max     int64
		timeout time.Duration
		want    string // error substring; "" means success
	}{
		{name: "ok", mode: registrytest.ModeOK, body: doc},
		{name: "exactly at the limit", mode: registrytest.ModeOK, body: doc, max: int64(len(doc))},
		{name: "over the limit", mode: registrytest.ModeOK, body: doc, max: int64(len(doc)) - 1, want: "larger than"},
		{name: "server error", mode: registrytest.ModeFail, want: `status 500: "upstream exploded"`},
		{name: "html", mode: registrytest.ModeHTML, want: `content type "text/html", want application/json`},
		{name: "garbage", mode: registrytest.ModeGarbage, want: "decode manifest"},
		{name: "not a manifest", mode: registrytest.ModeOK, body: `{"routes":[]}`, want: `missing "tools"`},
		{name: "hang", mode: registrytest.ModeHang, timeout: 200 * time.Millisecond, want: "context deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := registrytest.NewFakeServer(t, "/base/manifest.json", doc)
			srv.Set(tc.mode, tc.body)
			ctx := t.Context()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			f := NewHTTPFetcher(srv.Client(), tc.max)
			m, err := f.Fetch(ctx, ToolService{Name: "svc", URL: srv.URL + "/base/", ManifestPath: "/manifest.json"})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Fetch() = %v", err)
				}
				if len(m.Tools) != 2 {
					t.Fatalf("Fetch() tools = %+v", m.Tools)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"svc"`) {
				t.Fatalf("Fetch() = %v, want an error naming the service and containing %q", err, tc.want)
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		big := `{"tools":[],"pad":"` + strings.Repeat("x", DefaultMaxManifestBytes) + `"}`
		srv := registrytest.NewFakeServer(t, "/manifest", big)
		_, err := NewHTTPFetcher(nil, 0).Fetch(t.Context(), ToolService{Name: "big", URL: srv.URL})
		if err == nil || !strings.Contains(err.Error(), "larger than 4194304 bytes") {
			t.Fatalf("Fetch() = %v, want the 4 MiB default limit", err)
		}
	})
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
