package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// redisProc is a throwaway redis-server on a loopback port that a test can
// stop and start again on the same port.
type redisProc struct {
	bin, port, dir, url string
	cmd                 *exec.Cmd
}

// startRedis runs a throwaway redis-server on a free loopback port and
// returns it. The test fails (it does not skip) when redis-server is
// missing: .ci/run installs it.
func startRedis(t *testing.T) *redisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found: install it (apt-get install -y redis-server): %v", err)
	}
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	r := &redisProc{bin: bin, port: port, dir: t.TempDir(), url: "redis://" + addr}
	r.start(t)
	t.Cleanup(r.stop)
	return r
}

func (r *redisProc) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "--bind", "127.0.0.1", "--port", r.port, "--save", "", "--appendonly", "no", "--dir", r.dir)
	out, _ := r.cmd.StdoutPipe()
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
				for sc.Scan() {
				}
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("redis-server did not start on port %s", r.port)
	}
}

// stop kills the server; its data is gone (no persistence).
func (r *redisProc) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// httpPortal serves a Portal listing on GET /v1/routes and can be made to
// fail, like a Portal that is down.
type httpPortal struct {
	url  string
	down atomic.Bool
}

func newHTTPPortal(t *testing.T, listingFile string) *httpPortal {
	t.Helper()
	listing, err := os.ReadFile(listingFile)
	if err != nil {
		t.Fatal(err)
	}
	p := &httpPortal{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/routes", func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "portal down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("content-type", "application/json")
		w.Write(listing)
	})
	p.url = newLoopbackServer(t, mux).URL
	return p
}

// TestWarmStartFromRedis runs toolmesh with a Redis store, stops it, takes
// the Portal and the Tool Service's manifest down, and starts a new process:
// it becomes ready from Redis alone and serves the same tools, and /health
// says the snapshot was restored and the Portal failed.
func TestWarmStartFromRedis(t *testing.T) {
	redisURL := startRedis(t).url
	svc := newToolService(t, "alpha", standardTools(""))
	portal := newHTTPPortal(t, writePortal(t, portalRoute{Key: "core", Services: []*toolService{svc}}))

	first := startGateway(t, "", "--portal", portal.url, "--redis", redisURL)
	want := listTools(t, first, "core")
	if len(want) != 7 {
		t.Fatalf("first process lists %v", want)
	}
	// The snapshot is written after the first successful refresh.
	eventually(t, 10*time.Second, "the snapshot to reach Redis", func() bool {
		return redisHasKey(t, redisURL, "toolmesh:route:core")
	})
	first.stop(t)

	portal.down.Store(true)
	svc.broken.Store(true)
	second := startGateway(t, "", "--portal", portal.url, "--redis", redisURL)
	got := listTools(t, second, "core")
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("warm-started process lists %v, want %v", got, want)
	}
	// A call still reaches the Tool Service, whose invoke path works.
	res := postJSON(t, second.URL+"/mcp/core", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}`)
	if !strings.Contains(res, `"text":"3"`) {
		t.Errorf("call after warm start = %s", res)
	}
	_, body := second.get(t, "/health")
	var doc struct {
		Registry struct {
			PortalError string `json:"portalError"`
			Routes      []struct {
				Key      string `json:"key"`
				Restored bool   `json:"restored"`
			} `json:"routes"`
		} `json:"registry"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/health: %v: %s", err, body)
	}
	if doc.Registry.PortalError == "" || len(doc.Registry.Routes) != 1 || !doc.Registry.Routes[0].Restored {
		t.Errorf("/health does not show the restored route and the Portal error: %s", body)
	}
}

// redisHasKey asks redis with a raw RESP EXISTS, to keep the test free of a
// client of its own.
func redisHasKey(t *testing.T, url, key string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "redis://"), time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "*2\r\n$6\r\nEXISTS\r\n$%d\r\n%s\r\n", len(key), key)
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == ":1"
}

// postJSON posts a legacy-era JSON-RPC body and returns the reply body.
func postJSON(t *testing.T, url, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("mcp-protocol-version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
	return sb.String()
}
