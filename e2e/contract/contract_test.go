package contract

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestMatchJSON(t *testing.T) {
	tests := []struct {
		name, want, have string
		ok               bool
		path             string
	}{
		{"equal objects", `{"a":1,"b":[1,"x"]}`, `{"b":[1,"x"],"a":1}`, true, ""},
		{"any matches an object", `{"a":"<any>"}`, `{"a":{"deep":true}}`, true, ""},
		{"extra key", `{"a":1}`, `{"a":1,"b":2}`, false, "$"},
		{"missing key", `{"a":1,"b":2}`, `{"a":1,"c":2}`, false, "$.b"},
		{"different value deep", `{"a":{"b":[1,2]}}`, `{"a":{"b":[1,3]}}`, false, "$.a.b[1]"},
		{"array length", `[1]`, `[1,2]`, false, "$"},
		{"type differs", `{"id":1}`, `{"id":"1"}`, false, "$.id"},
		{"null id", `{"id":null}`, `{"id":null}`, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want, have any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.have), &have); err != nil {
				t.Fatal(err)
			}
			path, ok := MatchJSON(want, have, "$")
			if ok != tc.ok || path != tc.path {
				t.Errorf("MatchJSON = %q, %v; want %q, %v", path, ok, tc.path, tc.ok)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	var ex Exchange
	ex.Description = "d"
	ex.Response.Status = 200
	ex.Response.Headers = map[string]string{"content-type": "application/json"}
	ex.Response.AbsentHeaders = []string{"mcp-session-id"}
	ex.Response.BodyContains = []string{"RESULT"}
	ex.Response.Body = json.RawMessage(`{"result":{}}`)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   []string // substrings, one per mismatch, in order
	}{
		{"kept", 200, h("content-type", "application/json; charset=utf-8"), `{"result":{}}`, nil},
		{"status alone", 500, h(), `oops`, []string{"status 500, want 200"}},
		{"header, absent header, body", 200, h("content-type", "text/plain", "mcp-session-id", "x"), `{"result":1}`,
			[]string{`header content-type = "text/plain"`, "want it absent", "body differs at $.result"}},
		{"not JSON", 200, h("content-type", "application/json"), `result`, []string{"body is not JSON"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ex.Match(tc.status, tc.header, []byte(tc.body))
			if len(got) != len(tc.want) {
				t.Fatalf("Match = %q, want %d mismatches", got, len(tc.want))
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("mismatch %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestPaddedPing(t *testing.T) {
	for _, size := range []int{100, 1100000, LargeBodyBytes} {
		b := PaddedPing(size)
		if len(b) != size || !json.Valid(b) {
			t.Errorf("PaddedPing(%d): %d bytes, valid JSON %v", size, len(b), json.Valid(b))
		}
	}
}

func TestRouteKey(t *testing.T) {
	for path, want := range map[string]string{
		"/mcp/core":              "core",
		"/mcp/core/":             "core",
		"/mcp/core?x=1":          "core",
		"/mcp/core%2F..%2Fadmin": "core%2F..%2Fadmin",
		"/other":                 "",
	} {
		if got := RouteKey(path); got != want {
			t.Errorf("RouteKey(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestSelect(t *testing.T) {
	mk := func(name, path string, status int, body string) Example {
		ex := Example{Name: name}
		ex.Exchange.Request.Path = path
		ex.Exchange.Request.Body = json.RawMessage(body)
		ex.Exchange.Response.Status = status
		return ex
	}
	examples := []Example{
		mk("ping", "/mcp/core", 200, `{"jsonrpc":"2.0","id":1,"method":"ping"}`),
		mk("list", "/mcp/core", 200, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
		mk("call-contract", "/mcp/core", 200, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}`),
		mk("call-unknown", "/mcp/core", 200, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`),
		mk("call-name-number", "/mcp/core", 200, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`),
		mk("header-mismatch", "/mcp/core", 400, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}`),
		mk("unknown-route", "/mcp/nope", 404, `{"jsonrpc":"2.0","id":1,"method":"ping"}`),
		mk("other-route", "/mcp/elsewhere", 200, `{"jsonrpc":"2.0","id":1,"method":"ping"}`),
	}
	tools := []string{"add", "echo"}
	names := func(run []Example, skipped []Skip) (r, s []string) {
		for _, ex := range run {
			r = append(r, ex.Name)
		}
		for _, sk := range skipped {
			if sk.Reason == "" {
				t.Errorf("%s skipped without a reason", sk.Example.Name)
			}
			s = append(s, sk.Example.Name)
		}
		return r, s
	}
	tests := []struct {
		name         string
		target       Target
		run, skipped []string
	}{
		{"demo services", Target{Routes: []string{"core", "process"}},
			[]string{"ping", "call-unknown", "call-name-number", "header-mismatch", "unknown-route"},
			[]string{"list", "call-contract", "other-route"}},
		{"contract Tool Services", Target{Routes: []string{"core"}, ContractTools: true},
			[]string{"ping", "list", "call-contract", "call-unknown", "call-name-number", "header-mismatch", "unknown-route"},
			[]string{"other-route"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, s := names(Select(examples, tc.target, tools))
			if !slices.Equal(r, tc.run) || !slices.Equal(s, tc.skipped) {
				t.Errorf("Select: run %v, skipped %v; want run %v, skipped %v", r, s, tc.run, tc.skipped)
			}
		})
	}
}

func TestLoadAndToolNames(t *testing.T) {
	const dir = "../../docs/contracts/examples"
	examples, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		if ex.Name == "" || ex.Exchange.Request.Path == "" || ex.Exchange.Response.Status == 0 {
			t.Errorf("%s: incomplete example %+v", ex.File, ex)
		}
	}
	tools, err := ContractToolNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"add", "echo", "shared", "weather"} {
		if !slices.Contains(tools, want) {
			t.Errorf("ContractToolNames = %v, want %s among them", tools, want)
		}
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory: no error")
	}
}

func TestProbes(t *testing.T) {
	for _, name := range ProbeNames {
		ex, err := Probe(name)
		if err != nil {
			t.Fatal(err)
		}
		if RouteKey(ex.Request.Path) != ProbeRoute || ex.Description == "" {
			t.Errorf("probe %s: path %s, description %q", name, ex.Request.Path, ex.Description)
		}
		if len(ex.Request.Body) > 0 && !json.Valid(ex.Request.Body) {
			t.Errorf("probe %s: request body is not JSON", name)
		}
	}
	if _, err := Probe("nope"); err == nil {
		t.Error("Probe(nope): no error")
	}
}

// TestNoProductImports checks that the runner stays test tooling: no
// package of the repository's other modules (the main module and deploy;
// e2e is a module of its own) imports it.
func TestNoProductImports(t *testing.T) {
	const self = "github.com/toolmesh/toolmesh/e2e/contract"
	for _, dir := range []string{"../..", "../../deploy"} {
		cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./... in %s: %v", dir, err)
		}
		seen := 0
		for line := range strings.Lines(string(out)) {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			seen++
			if slices.Contains(fields[1:], self) {
				t.Errorf("%s imports %s, which is test tooling", fields[0], self)
			}
		}
		if seen < 3 {
			t.Fatalf("go list in %s named only %d packages:\n%s", dir, seen, out)
		}
	}
}
