package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// lockedBuffer is a bytes.Buffer safe for the process's concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// process is an in-process toolmesh started by startProcess.
type process struct {
	addrs  map[string]string // listener name → bound address
	logs   *lockedBuffer
	cancel context.CancelFunc
	done   chan int // the exit code
}

// startProcess runs toolmesh with args plus loopback ":0" listeners, waits
// for /readyz and stops it (checking the exit code) at the end of the test.
func startProcess(t testing.TB, args ...string) *process {
	t.Helper()
	p := launch(t, hooks{}, args...)
	p.waitReady(t)
	return p
}

// launch is startProcess without waiting for /readyz; h.listening is its own.
func launch(t testing.TB, h hooks, args ...string) *process {
	t.Helper()
	p := &process{addrs: map[string]string{}, logs: &lockedBuffer{}, done: make(chan int, 1)}
	var mu sync.Mutex
	want := 0
	for _, f := range []string{"--admin-listen", "--listen", "--extproc-listen", "--xds-listen"} {
		// Only the subcommands that have the flag get it.
		if args[0] == "run" || (args[0] == "extproc" && f == "--extproc-listen") || (args[0] == "xds" && f == "--xds-listen") || f == "--admin-listen" {
			args = append(args, f, "127.0.0.1:0")
			want++
		}
	}
	if slices.Contains(args, "--notifications-listen") {
		want++
	}
	if !slices.Contains(args, "--drain-delay") {
		args = append(args, "--drain-delay", "0s") // keep test shutdowns quick
	}
	bound := make(chan struct{})
	h.listening = func(name, addr string) {
		mu.Lock()
		defer mu.Unlock()
		p.addrs[name] = addr
		if len(p.addrs) == want {
			close(bound)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- execute(ctx, args, io.Discard, p.logs, h) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("toolmesh logs (last 60 lines):\n%s", lastLines(p.logs.String(), 60))
		}
	})
	select {
	case <-bound:
	case code := <-p.done:
		p.done <- code
		t.Fatalf("toolmesh exited with %d before listening:\n%s", code, p.logs)
	case <-time.After(30 * time.Second):
		t.Fatal("toolmesh did not bind its listeners within 30s")
	}
	return p
}

// waitReady polls /readyz until it answers 200; the limit only bounds a
// hang. It is long because readiness waits for the wasm filters, which the
// race detector's build of wazero compiles for a minute on a loaded
// 2-core machine.
func (p *process) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, body := httpGet(t, "http://"+p.addrs["admin"]+"/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 3m: %d %s", code, body)
		}
		select {
		case code := <-p.done:
			p.done <- code
			t.Fatalf("toolmesh exited with %d before ready", code)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop cancels the process context (what SIGTERM does) and checks that it
// shuts down gracefully with exit code 0.
func (p *process) stop(t testing.TB) {
	t.Helper()
	p.cancel()
	select {
	case code := <-p.done:
		p.done <- code
		if code != exitOK {
			t.Errorf("exit code %d after shutdown, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("toolmesh did not stop within 30s")
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rpc posts one JSON-RPC request to an MCP route of the local data plane.
func rpc(t *testing.T, base, route, body string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	code, out, err := post(t.Context(), base, route, body, headers)
	if err != nil {
		t.Fatal(err)
	}
	return code, out
}

// post is rpc for goroutines other than the test's: it returns its error.
func post(ctx context.Context, base, route, body string, headers map[string]string) (int, map[string]any, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp/"+route, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("POST /mcp/%s: %w", route, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("POST /mcp/%s %s: %d, not JSON: %q", route, body, resp.StatusCode, b)
	}
	return resp.StatusCode, out, nil
}

// dig walks a decoded JSON document: keys for objects, ints for arrays.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// TestRunServesMCP runs `toolmesh run` with the demo Portal in-process and
// goes through the whole path: local data plane → ext_proc → demo service.
func TestRunServesMCP(t *testing.T) {
	p := startProcess(t, "run")
	base := "http://" + p.addrs["dataplane"]

	t.Run("legacy initialize", func(t *testing.T) {
		code, out := rpc(t, base, "core", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, nil)
		if code != http.StatusOK || dig(out, "id") != float64(1) {
			t.Fatalf("initialize = %d %v", code, out)
		}
		if v := dig(out, "result", "protocolVersion"); v != "2025-11-25" {
			t.Errorf("protocolVersion = %v", v)
		}
		if v := dig(out, "result", "serverInfo", "name"); v != "toolmesh" {
			t.Errorf("serverInfo.name = %v", v)
		}
		if dig(out, "result", "capabilities", "tools") == nil {
			t.Errorf("capabilities lack tools: %v", dig(out, "result", "capabilities"))
		}
	})

	t.Run("tools/list", func(t *testing.T) {
		for route, want := range map[string][]string{
			"core":    {"math.add", "math.multiply", "time.now", "time.sleep"},
			"process": {"math.add", "math.multiply", "text.echo", "text.fail", "text.forbidden", "text.upper"},
		} {
			code, out := rpc(t, base, route, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`,
				map[string]string{"MCP-Protocol-Version": "2025-11-25"})
			tools, _ := dig(out, "result", "tools").([]any)
			var names []string
			for _, tl := range tools {
				names = append(names, fmt.Sprint(dig(tl, "name")))
				if dig(tl, "inputSchema", "type") != "object" || dig(tl, "description") == "" {
					t.Errorf("%s: tool %v lacks an object schema or a description", route, tl)
				}
			}
			if code != http.StatusOK || dig(out, "id") != "list" || !slices.Equal(names, want) {
				t.Errorf("%s tools/list = %d %v, want tools %v", route, code, names, want)
			}
		}
	})

	t.Run("legacy tools/call", func(t *testing.T) {
		code, out := rpc(t, base, "core", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"math.add","arguments":{"a":2,"b":3}}}`,
			map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		if code != http.StatusOK || dig(out, "id") != float64(7) {
			t.Fatalf("tools/call = %d %v", code, out)
		}
		if v := dig(out, "result", "content", 0, "text"); v != "5" {
			t.Errorf("content[0].text = %v, want 5 (%v)", v, out)
		}
		if v := dig(out, "result", "structuredContent", "sum"); v != float64(5) {
			t.Errorf("structuredContent.sum = %v, want 5", v)
		}
		if v := dig(out, "result", "isError"); v == true {
			t.Errorf("isError = true: %v", out)
		}
	})

	t.Run("stateless tools/call", func(t *testing.T) {
		code, out := rpc(t, base, "process", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"text.upper","arguments":{"message":"mesh"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "text.upper"})
		if code != http.StatusOK || dig(out, "result", "content", 0, "text") != "MESH" {
			t.Fatalf("tools/call = %d %v", code, out)
		}
	})

	t.Run("admin", func(t *testing.T) {
		admin := "http://" + p.addrs["admin"]
		if code, body := httpGet(t, admin+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("/healthz = %d %q", code, body)
		}
		code, body := httpGet(t, admin+"/health")
		var doc healthDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil || code != http.StatusOK {
			t.Fatalf("/health = %d %s", code, body)
		}
		if doc.Status != "ready" || doc.Mode != "run" || len(doc.Registry.Routes) != 2 {
			t.Errorf("/health = %+v", doc)
		}
		for _, c := range []string{"registry", "extproc", "xds", "dataPlane"} {
			if _, ok := doc.Components[c]; !ok {
				t.Errorf("/health lacks component %s: %v", c, doc.Components)
			}
		}
		code, body = httpGet(t, admin+"/metrics")
		for _, m := range []string{"toolmesh_build_info", "go_goroutines", "process_cpu_seconds_total"} {
			if code != http.StatusOK || !strings.Contains(body, m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
		requireServing(t, p.addrs["extproc"], gRPCServiceExtProc)
		requireServing(t, p.addrs["xds"], gRPCServiceADS)
	})
}

// TestServerModes runs extproc and xds alone against a Portal file naming a
// demo service, and checks their readiness and gRPC health.
func TestServerModes(t *testing.T) {
	portal := demoPortal(t)
	for _, tt := range []struct {
		mode, listener, service string
	}{
		{"extproc", "extproc", gRPCServiceExtProc},
		{"xds", "xds", gRPCServiceADS},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			p := startProcess(t, tt.mode, "--portal", portal)
			requireServing(t, p.addrs[tt.listener], tt.service)
			if _, ok := p.addrs["dataplane"]; ok {
				t.Errorf("%s started a data plane", tt.mode)
			}
			_, body := httpGet(t, "http://"+p.addrs["admin"]+"/health")
			if !strings.Contains(body, `"mode": "`+tt.mode+`"`) {
				t.Errorf("/health = %s", body)
			}
		})
	}
}

// requireServing checks the gRPC health service of the server at addr.
func requireServing(t *testing.T, addr, service string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, svc := range []string{"", service} {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("gRPC health of %q at %s = %v, %v", svc, addr, resp.GetStatus(), err)
		}
	}
}

func TestExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
	}{
		{"version", []string{"version"}, exitOK, version, ""},
		{"help", []string{"--help"}, exitOK, "toolmesh", ""},
		{"unknown command", []string{"serve"}, exitUsage, "", `unknown command "serve"`},
		{"unknown flag", []string{"run", "--colour"}, exitUsage, "", "unknown flag: --colour"},
		{"flag of another command", []string{"extproc", "--listen", "127.0.0.1:1"}, exitUsage, "", "unknown flag: --listen"},
		{"xds without portal", []string{"xds"}, exitUsage, "", "xds needs --portal"},
		{"invalid config", []string{"run", "--log-format", "xml"}, exitUsage, "", `logFormat: "xml" is not text or json`},
		{"port taken", []string{"run", "--admin-listen", busy.Addr().String()}, exitError, "", "admin server cannot listen on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr lockedBuffer
			code := execute(t.Context(), tt.args, &stdout, &stderr, hooks{})
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.wantOut)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantErr)
			}
		})
	}
}

// TestShutdownDrainsCalls cancels the process while a tool call is in
// flight: readiness turns 503 at once, the call still gets its answer, and
// the process then exits 0.
func TestShutdownDrainsCalls(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"block","version":"1","description":"Blocks until the test releases it.",
			"inputSchema":{"type":"object","additionalProperties":false},"path":"/tools/block"}]}`)
	})
	mux.HandleFunc("POST /tools/block", func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "released")
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	portal := filepath.Join(t.TempDir(), "portal.json")
	doc := `{"routes":[{"key":"slow","toolServices":[{"name":"slow","url":"` + svc.URL + `"}]}]}`
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--portal", portal)

	type answer struct {
		code int
		out  map[string]any
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		code, out, err := post(t.Context(), "http://"+p.addrs["dataplane"], "slow",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`,
			map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		answers <- answer{code, out, err}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the tool call did not reach the Tool Service")
	}
	p.cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, "http://"+p.addrs["admin"]+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "stopping") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q while draining, want 503 stopping", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	a := <-answers
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.code != http.StatusOK || dig(a.out, "result", "content", 0, "text") != "released" {
		t.Errorf("call in flight during shutdown = %d %v, want the Tool Service's answer", a.code, a.out)
	}
	p.stop(t)
}
