package extproc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/wasmtest"
	"github.com/toolmesh/toolmesh/registry"
)

// The filter chain driven through the ext_proc server, in both protocol eras,
// with the example WebAssembly modules built by Go's own toolchain and run by
// the real wazero host.

// The modules are built once per source state and shared between test
// binaries (internal/wasmtest). wasmCache is the compilation cache every
// filter Set here shares: the one `make test` fills with every guest's
// machine code when it names one, else one for this test binary.
var wasmCache string

func TestMain(m *testing.M) {
	wasmCache = wasmtest.CompiledDir()
	var tmp string
	if wasmCache == "" {
		dir, err := os.MkdirTemp("", "toolmesh-extproc-wasm-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		tmp, wasmCache = dir, dir
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

// filterSnapshot is route "core" with the tools the example filters act on.
func filterSnapshot(t *testing.T) *registry.Snapshot {
	t.Helper()
	obj := json.RawMessage(`{"type":"object"}`)
	return buildSnapshot(t, registry.Route{Key: "core", ToolServices: []registry.ToolService{
		{Name: "files", URL: "http://files.tools.svc:8080"},
	}}, map[string]*registry.Manifest{"files": {Tools: []registry.ManifestTool{
		{Name: "delete_file", Version: "1", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "get_user", Version: "1", InputSchema: obj},
		{Name: "run", Version: "1", InputSchema: obj},
	}}})
}

// filterSet is the filter chain of these tests; callTimeout is the
// misbehaving module's. The well-behaved modules get a generous timeout:
// these tests are about what the chain decides, and a loaded 2-core machine
// compiling modules under the race detector can take longer than the
// 250ms default for one call.
func filterSet(t *testing.T, callTimeout string) *filters.Set {
	t.Helper()
	return buildFilters(t, fmt.Sprintf(`
wasmCacheDir: %[6]s
definitions:
  - {name: schema, type: input_schema}
  - name: deny-etc
    type: wasm
    config: {path: %[1]s, stages: [request], poolSize: 2, callTimeout: 30s}
  - name: policy-header
    type: wasm
    config: {path: %[2]s, stages: [request], poolSize: 2, callTimeout: 30s}
  - name: redact
    type: wasm
    config: {path: %[3]s, stages: [result], poolSize: 2, callTimeout: 30s}
  - name: misbehave
    type: wasm
    config: {path: %[4]s, stages: [request], poolSize: 2, callTimeout: %[5]s, memoryPages: 256}
defaults: [schema, deny-etc, policy-header, redact, misbehave]
`, wasmtest.Module(t, "deny-argument"), wasmtest.Module(t, "add-header"), wasmtest.Module(t, "redact-result"),
		wasmtest.Module(t, "misbehave"), callTimeout, wasmCache))
}

// callThrough sends a tools/call in era ("legacy" or "stateless") through a
// new stream and returns the request_body reply.
func callThrough(t *testing.T, env *testEnv, era, tool, args string) (*envoy, *extprocv3.ProcessingResponse) {
	t.Helper()
	var body string
	var extra []string
	if era == "stateless" {
		body = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		extra = stateless("tools/call", tool)
	} else {
		body = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
		extra = []string{"mcp-protocol-version", "2025-11-25"}
	}
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body), extra...)...))
	return v, v.send(reqBody(body))
}

func TestFiltersThroughExtProc(t *testing.T) {
	set := filterSet(t, "200ms")
	env := newTestEnv(t, Config{Runtime: &Runtime{Filters: set}}, testRoutes{"/mcp/core": {key: "core", snap: filterSnapshot(t)}})

	for _, era := range []string{"legacy", "stateless"} {
		t.Run(era, func(t *testing.T) {
			t.Run("wasm deny becomes an isError result", func(t *testing.T) {
				_, resp := callThrough(t, env, era, "delete_file", `{"path":"/etc/passwd"}`)
				im := resp.GetImmediateResponse()
				if im == nil || im.GetStatus().GetCode() != 200 {
					t.Fatalf("got %v, want an immediate 200", resp)
				}
				r := decodeResult(t, im.GetBody(), "9")
				if !r.IsError || !strings.Contains(string(im.GetBody()), "/etc/") {
					t.Fatalf("body %s: want an isError result naming the denied prefix", im.GetBody())
				}
				if era == "stateless" && !strings.Contains(string(im.GetBody()), `"resultType":"complete"`) {
					t.Errorf("stateless deny lacks resultType: %s", im.GetBody())
				}
			})
			t.Run("schema failure is still an isError result", func(t *testing.T) {
				_, resp := callThrough(t, env, era, "delete_file", `{"path":7}`)
				im := resp.GetImmediateResponse()
				if im == nil || !decodeResult(t, im.GetBody(), "9").IsError {
					t.Fatalf("got %v, want an isError result", resp)
				}
			})
			t.Run("a passing call is routed with the header a filter added", func(t *testing.T) {
				v, resp := callThrough(t, env, era, "delete_file", `{"path":"/tmp/x"}`)
				cr := resp.GetRequestBody().GetResponse()
				if cr == nil {
					t.Fatalf("got %v, want a routed call", resp)
				}
				set := setOf(t, cr.GetHeaderMutation())
				if set["x-policy"] != "wasm-example" {
					t.Errorf("upstream headers %v lack the filter's x-policy", set)
				}
				if string(cr.GetBodyMutation().GetBody()) != `{"path":"/tmp/x"}` {
					t.Errorf("body %s", cr.GetBodyMutation().GetBody())
				}
				// The result stage redacts what reaches the client.
				v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
				out := v.send(respBody(`{"content":[{"type":"text","text":"{\"ssn\":\"123-45-6789\"}"}],"structuredContent":{"name":"ada","ssn":"123-45-6789"}}`))
				got := string(out.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
				if strings.Contains(got, "123-45-6789") || !strings.Contains(got, "[redacted]") || !strings.Contains(got, `"name":"ada"`) {
					t.Errorf("result reaching the client: %s", got)
				}
				if decodeResult(t, []byte(got), "9").IsError {
					t.Errorf("a redacted result must not become an error: %s", got)
				}
			})
			t.Run("a guest that loops is cut off and the call denied", func(t *testing.T) {
				_, resp := callThrough(t, env, era, "run", `{"mode":"loop"}`)
				im := resp.GetImmediateResponse()
				if im == nil || !decodeResult(t, im.GetBody(), "9").IsError || !strings.Contains(string(im.GetBody()), "misbehave") {
					t.Fatalf("got %v, want a fail-closed deny naming the filter", resp)
				}
			})
			t.Run("a guest that exhausts memory is replaced", func(t *testing.T) {
				_, resp := callThrough(t, env, era, "run", `{"mode":"oom"}`)
				if im := resp.GetImmediateResponse(); im == nil || !decodeResult(t, im.GetBody(), "9").IsError {
					t.Fatalf("got %v, want a fail-closed deny", resp)
				}
				_, resp = callThrough(t, env, era, "run", `{"mode":"fine"}`)
				if resp.GetRequestBody().GetResponse() == nil {
					t.Fatalf("the call after the out-of-memory guest was not routed: %v", resp)
				}
			})
		})
	}
}

// TestFilterReloadMidTraffic reloads every module while calls flow: every
// call gets a right answer (routed, or denied for the denied path).
func TestFilterReloadMidTraffic(t *testing.T) {
	set := filterSet(t, "30s")
	env := newTestEnv(t, Config{Runtime: &Runtime{Filters: set}}, testRoutes{"/mcp/core": {key: "core", snap: filterSnapshot(t)}})
	stop := make(chan struct{})
	var reloads sync.WaitGroup
	reloads.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := set.Reload(t.Context()); err != nil {
				t.Errorf("reload: %v", err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrong := 0
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				era := []string{"legacy", "stateless"}[(w+i)%2]
				path, wantRouted := "/tmp/ok", true
				if i%3 == 0 {
					path, wantRouted = "/etc/shadow", false
				}
				_, resp := callThrough(t, env, era, "delete_file", `{"path":"`+path+`"}`)
				routed := resp.GetRequestBody().GetResponse() != nil
				denied := resp.GetImmediateResponse() != nil && strings.Contains(string(resp.GetImmediateResponse().GetBody()), "/etc/")
				if (wantRouted && !routed) || (!wantRouted && !denied) {
					mu.Lock()
					wrong++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	reloads.Wait()
	if wrong != 0 {
		t.Fatalf("%d of 100 calls got a wrong answer during reloads", wrong)
	}
}

// TestACLHidesTools: tools a route's tool_acl refuses are neither listed (in
// either era, on every page) nor callable, and unrefused ones are.
func TestACLHidesTools(t *testing.T) {
	set := buildFilters(t, `
definitions:
  - {name: acl, type: tool_acl, config: {deny: ["get_*"]}}
defaults: [acl]
`)
	snap := filterSnapshot(t)
	paged := buildSnapshot(t, registry.Route{Key: "paged", Catalog: &registry.Catalog{PageSize: 1}, ToolServices: []registry.ToolService{
		{Name: "files", URL: "http://files.tools.svc:8080"},
	}}, map[string]*registry.Manifest{"files": {Tools: []registry.ManifestTool{
		{Name: "delete_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "get_user", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "run", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}}})
	env := newTestEnv(t, Config{Runtime: &Runtime{Filters: set}}, testRoutes{
		"/mcp/core":  {key: "core", snap: snap},
		"/mcp/paged": {key: "paged", snap: paged},
	})
	list := func(t *testing.T, path, era, cursor string) ([]string, string) {
		t.Helper()
		params := `"cursor":"` + cursor + `",`
		if cursor == "" {
			params = ""
		}
		var body string
		var extra []string
		if era == "stateless" {
			body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + params +
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			extra = stateless("tools/list")
		} else {
			body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + strings.TrimSuffix(params, ",") + `}}`
			extra = []string{"mcp-protocol-version", "2025-11-25"}
		}
		v := env.open(t)
		v.send(reqHeaders(false, post(path, len(body), extra...)...))
		im := v.send(reqBody(body)).GetImmediateResponse()
		var out struct {
			Result struct {
				Tools      []struct{ Name string } `json:"tools"`
				NextCursor string                  `json:"nextCursor"`
			} `json:"result"`
		}
		if im == nil || json.Unmarshal(im.GetBody(), &out) != nil {
			t.Fatalf("tools/list: %v", im)
		}
		var names []string
		for _, tool := range out.Result.Tools {
			names = append(names, tool.Name)
		}
		return names, out.Result.NextCursor
	}
	for _, era := range []string{"legacy", "stateless"} {
		t.Run(era, func(t *testing.T) {
			if names, _ := list(t, "/mcp/core", era, ""); strings.Join(names, ",") != "delete_file,run" {
				t.Errorf("core lists %v, want the refused get_user left out", names)
			}
			var all []string
			for cursor, i := "", 0; i < 5; i++ {
				names, next := list(t, "/mcp/paged", era, cursor)
				all = append(all, names...)
				if next == "" {
					break
				}
				cursor = next
			}
			if strings.Join(all, ",") != "delete_file,run" {
				t.Errorf("paged walk lists %v", all)
			}
			_, resp := callThrough(t, env, era, "get_user", `{}`)
			im := resp.GetImmediateResponse()
			if im == nil || decodeReply(t, im.GetBody()).Error == nil || decodeReply(t, im.GetBody()).Error.Code != -32602 {
				t.Errorf("calling a refused tool: %v, want -32602", resp)
			}
			if _, resp := callThrough(t, env, era, "run", `{}`); resp.GetRequestBody().GetResponse() == nil {
				t.Errorf("an allowed tool was not routed: %v", resp)
			}
		})
	}
}

// TestSchemaValidationOnByDefault: a filters section whose lists leave the
// input_schema filter out still validates every route's arguments; only
// schemaValidationOff turns it off, with a warning naming the route.
func TestSchemaValidationOnByDefault(t *testing.T) {
	cfg, err := filters.ParseConfig([]byte(`
definitions:
  - {name: acl, type: tool_acl, config: {deny: ["*_admin"]}}
defaults: [acl]
routes:
  listed: []
schemaValidationOff: [raw]
`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	set, err := filters.Build(t.Context(), cfg, slog.New(slog.NewJSONHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.Context(): it is cancelled before cleanups run, and Close then
	// does not wait for a wasm instance still being replaced.
	t.Cleanup(func() { _ = set.Close(context.Background()) })
	var warned []string
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Level, Msg, Route string }
		mustUnmarshal(t, []byte(line), &rec)
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "input-schema validation is off") {
			warned = append(warned, rec.Route)
		}
	}
	if !slices.Equal(warned, []string{"raw"}) {
		t.Errorf("schema-off warnings name routes %q, want [raw]; logs:\n%s", warned, logs)
	}

	routes := testRoutes{}
	for _, key := range []string{"core", "listed", "raw"} {
		snap := buildSnapshot(t, registry.Route{Key: key, ToolServices: []registry.ToolService{
			{Name: "files", URL: "http://files.tools.svc:8080"},
		}}, map[string]*registry.Manifest{"files": {Tools: []registry.ManifestTool{
			{Name: "delete_file", Version: "1", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		}}})
		routes["/mcp/"+key] = testRoute{key: key, snap: snap}
	}
	env := newTestEnv(t, Config{Runtime: &Runtime{Filters: set}}, routes)
	const body = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":7}}}`
	for _, tc := range []struct {
		route     string
		validated bool
	}{{"core", true}, {"listed", true}, {"raw", false}} {
		t.Run(tc.route, func(t *testing.T) {
			v := env.open(t)
			v.send(reqHeaders(false, post("/mcp/"+tc.route, len(body), "mcp-protocol-version", "2025-11-25")...))
			resp := v.send(reqBody(body))
			im := resp.GetImmediateResponse()
			if !tc.validated {
				if im != nil || resp.GetRequestBody().GetResponse().GetBodyMutation() == nil {
					t.Fatalf("got %v, want the call routed unvalidated", resp)
				}
				return
			}
			// An ImmediateResponse: the Tool Service is never called.
			if im == nil {
				t.Fatalf("got %v, want an isError result without routing", resp)
			}
			if r := decodeResult(t, im.GetBody(), "9"); !r.IsError || !strings.Contains(string(im.GetBody()), "invalid arguments") {
				t.Errorf("body %s: want an isError result with the validation message", im.GetBody())
			}
		})
	}
}

// buildFilters builds the filter set of a filters configuration document,
// closed when the test ends.
func buildFilters(t *testing.T, doc string) *filters.Set {
	t.Helper()
	cfg, err := filters.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	set, err := filters.Build(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatalf("build filters: %v", err)
	}
	// Not t.Context(): it is cancelled before cleanups run, and Close then
	// does not wait for a wasm instance still being replaced.
	t.Cleanup(func() { _ = set.Close(context.Background()) })
	return set
}
