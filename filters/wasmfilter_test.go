package filters

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/wasmtest"
)

// Guest modules are built once per source state and shared between test
// binaries (internal/wasmtest), and compiled once: every Set in these tests
// uses the same on-disk compilation cache, the one `make test` fills with
// every guest's machine code when it names one.
var cacheDir string

func TestMain(m *testing.M) {
	cacheDir = wasmtest.CompiledDir()
	var tmp string
	if cacheDir == "" {
		dir, err := os.MkdirTemp("", "toolmesh-filters-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		tmp, cacheDir = dir, dir
	}
	code := m.Run()
	if err := wasmtest.CheckCompiledDir(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if tmp != "" {
		_ = os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// guest returns the path of the built guest name (a wasmtest.Guests key).
// Tests must not modify the file.
func guest(t testing.TB, name string) string {
	t.Helper()
	return wasmtest.Module(t, name)
}

func wasmDef(name, path string, failOpen bool, extra string) Definition {
	cfg := fmt.Sprintf(`{"path":%q%s}`, path, extra)
	return Definition{Name: name, Type: TypeWasm, FailOpen: failOpen, Config: json.RawMessage(cfg)}
}

func TestWasmFiltersInChains(t *testing.T) {
	dir := t.TempDir()
	swap := filepath.Join(dir, "swap.wasm")
	copyFile(t, guest(t, "add-header"), swap)
	misbehave := guest(t, "misbehave")
	reg := prometheus.NewRegistry()
	cfg := Config{
		WasmCacheDir: cacheDir,
		Definitions: []Definition{
			{Name: "size", Type: TypeArgumentSize, Config: json.RawMessage(`{"maxBytes":4096}`)},
			wasmDef("deny", guest(t, "deny-argument"), false, `,"stages":["request"]`),
			wasmDef("header", swap, false, `,"config":{"name":"X-Policy","value":"v2"},"headers":["x-tenant"]`),
			wasmDef("closed", misbehave, false, `,"poolSize":1`),
			wasmDef("open", misbehave, true, `,"poolSize":1`),
			wasmDef("redact", guest(t, "redact-result"), false, `,"stages":["result"]`),
		},
		Routes: map[string][]string{
			"policy": {"size", "deny", "header"},
			"closed": {"closed"},
			"open":   {"open"},
			"redact": {"redact"},
		},
	}
	s, err := Build(t.Context(), cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})

	call := func(route, tool, args string) (Outcome, *Request) {
		r := &Request{Route: route, Era: EraLegacy, Version: "2025-11-25", Method: "tools/call", Tool: tool,
			Arguments: json.RawMessage(args), Headers: map[string]string{"x-tenant": "acme"}}
		return s.Chain(route).RunRequest(t.Context(), r), r
	}

	t.Run("deny by argument value", func(t *testing.T) {
		out, _ := call("policy", "delete_file", `{"path":"/etc/passwd"}`)
		if !out.Denied() || out.Filter != "deny" || out.DenyAs != ToolError || !strings.Contains(out.Reason, "/etc/") {
			t.Fatalf("outcome = %+v", out)
		}
	})
	t.Run("header added upstream", func(t *testing.T) {
		out, r := call("policy", "delete_file", `{"path":"/tmp/x"}`)
		if out.Action != ActionRewrite || out.AddHeaders["x-policy"] != "v2" || string(r.Arguments) != `{"path":"/tmp/x"}` {
			t.Fatalf("outcome = %+v", out)
		}
	})
	t.Run("guest panic fails closed", func(t *testing.T) {
		out, _ := call("closed", "t", `{"mode":"panic"}`)
		if !out.Denied() || out.Filter != "closed" || out.Err == nil || !strings.Contains(out.Err.Error(), "panic: boom") {
			t.Fatalf("outcome = %+v", out)
		}
		if strings.Contains(out.Reason, "boom") {
			t.Fatalf("reason %q leaks the guest's panic message", out.Reason)
		}
	})
	t.Run("guest trap fails open when configured", func(t *testing.T) {
		out, _ := call("open", "t", `{"mode":"crash"}`)
		if out.Denied() || out.Err == nil || !strings.Contains(out.Err.Error(), "trapped") {
			t.Fatalf("outcome = %+v", out)
		}
		if out, _ := call("open", "t", `{}`); out.Err != nil {
			t.Fatalf("the next call after a trap: %+v", out)
		}
	})
	t.Run("redaction", func(t *testing.T) {
		res := &Result{Route: "redact", Tool: "lookup", Body: json.RawMessage(`{"content":[],"structuredContent":{"ssn":"1"}}`)}
		out := s.Chain("redact").RunResult(t.Context(), res)
		if out.Action != ActionRewrite || string(res.Body) != `{"content":[],"structuredContent":{"ssn":"[redacted]"}}` {
			t.Fatalf("outcome = %+v, body %s", out, res.Body)
		}
		// The redact module runs on results only.
		if out, _ := call("redact", "t", `{"ssn":"1"}`); out.Action != ActionPass {
			t.Fatalf("request stage = %+v", out)
		}
	})
	t.Run("reload swaps the module", func(t *testing.T) {
		copyFile(t, guest(t, "deny-argument"), swap)
		if err := s.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
		out, _ := call("policy", "read_file", `{}`)
		if out.Action != ActionPass {
			t.Fatalf("after reload the header module still answers: %+v", out)
		}
	})
	t.Run("update keeps unchanged modules warm", func(t *testing.T) {
		before := s.state.Load().filters["deny"]
		next := cfg
		next.Definitions = append([]Definition(nil), cfg.Definitions...)
		next.Definitions[0].Config = json.RawMessage(`{"maxBytes":8}`)
		if err := s.Update(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		if s.state.Load().filters["deny"] != before {
			t.Fatal("an unchanged wasm filter was rebuilt")
		}
		if out, _ := call("policy", "t", `{"long":"argument"}`); !out.Denied() || out.Filter != "size" {
			t.Fatalf("outcome = %+v, want the new size limit", out)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		got := gather(t, reg)
		for k, want := range map[string]float64{
			`toolmesh_filter_denials_total{filter="deny",stage="request"}`:    1,
			`toolmesh_filter_errors_total{filter="closed",stage="request"}`:   1,
			`toolmesh_wasm_filter_errors_total{filter="open",kind="trap"}`:    1,
			`toolmesh_wasm_filter_errors_total{filter="closed",kind="guest"}`: 1,
		} {
			if got[k] != want {
				t.Errorf("%s = %v, want %v", k, got[k], want)
			}
		}
	})
}

func TestWasmFilterLoadFailure(t *testing.T) {
	cfg := Config{
		Definitions: []Definition{wasmDef("w", filepath.Join(t.TempDir(), "missing.wasm"), false, "")},
		Defaults:    []string{"w"},
	}
	if _, err := Build(t.Context(), cfg, nil, nil); err == nil || !strings.Contains(err.Error(), `build filter "w"`) {
		t.Fatalf("Build error = %v", err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		t.Fatal(err)
	}
}
