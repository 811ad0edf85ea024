package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// blockingTool is a Tool Service with one tool whose calls wait for release.
type blockingTool struct {
	url     string
	started chan struct{}
	release chan struct{}
}

func newBlockingTool(t *testing.T) *blockingTool {
	t.Helper()
	bt := &blockingTool{started: make(chan struct{}, 1), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"block","version":"1","description":"Blocks until the test releases it.",
			"inputSchema":{"type":"object","additionalProperties":false},"path":"/tools/block"}]}`)
	})
	mux.HandleFunc("POST /tools/block", func(w http.ResponseWriter, _ *http.Request) {
		bt.started <- struct{}{}
		<-bt.release
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "released")
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	bt.url = svc.URL
	return bt
}

// portalDoc is a Portal listing with route "slow" on the Tool Service at url.
func portalDoc(url string) string {
	return `{"routes":[{"key":"slow","toolServices":[{"name":"slow","url":"` + url + `"}]}]}`
}

// TestHangupDuringStartup sends SIGHUP while the registry's first cycle is
// blocked on the Portal. SIGHUP's default action ends the process (exit
// 129), so this test binary dies if toolmesh has not caught it by then; it
// must instead start, then handle the signal as a filter reload, and stop
// with 0.
func TestHangupDuringStartup(t *testing.T) {
	tool := newBlockingTool(t)
	for _, mode := range []string{"run", "extproc", "xds"} {
		t.Run(mode, func(t *testing.T) {
			listed := make(chan struct{})
			release := make(chan struct{})
			var once sync.Once
			portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/routes" {
					http.NotFound(w, r)
					return
				}
				once.Do(func() { close(listed) })
				<-release
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, portalDoc(tool.url))
			}))
			t.Cleanup(portal.Close)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})

			p := launch(t, hooks{}, mode, "--portal", portal.URL, "--fetch-timeout", "1m")
			select {
			case <-listed:
			case <-time.After(30 * time.Second):
				t.Fatal("toolmesh did not ask the Portal for its routes")
			}
			// The registry's start is now blocked on the Portal.
			if code, _ := httpGet(t, "http://"+p.addrs["admin"]+"/readyz"); code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz = %d during start-up, want 503", code)
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			close(release)
			p.waitReady(t)
			// The SIGHUP was kept, not lost: it reloads once the loops run.
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(p.logs.String(), "SIGHUP: reloading filters") {
				if time.Now().After(deadline) {
					t.Fatal("the SIGHUP sent during start-up was never handled")
				}
				time.Sleep(20 * time.Millisecond)
			}
			p.stop(t)
		})
	}
}

// TestShutdownOrder checks the shutdown order in every mode: on the signal
// the gRPC health turns NOT_SERVING (and /readyz 503) first; during the
// drain delay everything still serves, new requests included; only then
// does draining start, and a call in flight still gets its answer.
func TestShutdownOrder(t *testing.T) {
	tool := newBlockingTool(t)
	portal := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(portal, []byte(portalDoc(tool.url)), 0o600); err != nil {
		t.Fatal(err)
	}
	const delay = 7 * time.Second
	for _, tt := range []struct {
		mode     string
		services map[string]string // listener → gRPC service
	}{
		{"run", map[string]string{"extproc": gRPCServiceExtProc, "xds": gRPCServiceADS}},
		{"extproc", map[string]string{"extproc": gRPCServiceExtProc}},
		{"xds", map[string]string{"xds": gRPCServiceADS}},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			waiting := make(chan time.Duration, 1)
			goOn := make(chan struct{})
			h := hooks{drainWait: func(d time.Duration) {
				waiting <- d
				<-goOn
			}}
			p := launch(t, h, tt.mode, "--portal", portal, "--drain-delay", delay.String())
			p.waitReady(t)
			for ln, svc := range tt.services {
				requireServing(t, p.addrs[ln], svc)
			}

			type answer struct {
				code int
				out  map[string]any
				err  error
			}
			answers := make(chan answer, 1)
			if tt.mode == "run" {
				go func() {
					code, out, err := post(t.Context(), "http://"+p.addrs["dataplane"], "slow",
						`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`,
						map[string]string{"MCP-Protocol-Version": "2025-11-25"})
					answers <- answer{code, out, err}
				}()
				select {
				case <-tool.started:
				case <-time.After(30 * time.Second):
					t.Fatal("the tool call did not reach the Tool Service")
				}
			}

			p.cancel() // what SIGTERM does
			select {
			case d := <-waiting:
				if d != delay {
					t.Errorf("drain delay %s, want %s", d, delay)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("shutdown did not wait the drain delay")
			}
			// In the delay: health is NOT_SERVING, yet the servers still
			// accept connections and answer.
			for ln, svc := range tt.services {
				requireStatus(t, p.addrs[ln], svc, healthpb.HealthCheckResponse_NOT_SERVING)
			}
			if code, body := httpGet(t, "http://"+p.addrs["admin"]+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "stopping") {
				t.Errorf("/readyz = %d %q in the drain delay, want 503 stopping", code, body)
			}
			if tt.mode == "run" {
				code, out := rpc(t, "http://"+p.addrs["dataplane"], "slow", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
					map[string]string{"MCP-Protocol-Version": "2025-11-25"})
				if code != http.StatusOK || dig(out, "result", "tools", 0, "name") != "block" {
					t.Errorf("new request in the drain delay = %d %v, want it served", code, out)
				}
			}
			select {
			case code := <-p.done:
				t.Fatalf("exited with %d during the drain delay", code)
			default:
			}

			close(goOn)
			if tt.mode == "run" {
				close(tool.release)
				a := <-answers
				if a.err != nil {
					t.Fatal(a.err)
				}
				if a.code != http.StatusOK || dig(a.out, "result", "content", 0, "text") != "released" {
					t.Errorf("call in flight during shutdown = %d %v, want the Tool Service's answer", a.code, a.out)
				}
			}
			p.stop(t)
		})
	}
}

// requireStatus checks the gRPC health of service (and of the server) at addr.
func requireStatus(t *testing.T, addr, service string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, svc := range []string{"", service} {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("gRPC health of %q at %s = %v, %v; want %v", svc, addr, resp.GetStatus(), err, want)
		}
	}
}

// TestMain lets a test run this binary as toolmesh itself, main and its
// signal handling included: with TOOLMESH_TEST_MAIN=1 it runs Main.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLMESH_TEST_MAIN") == "1" {
		os.Exit(Main())
	}
	os.Exit(m.Run())
}

// TestProcessSignals runs the real main in a child process: a SIGHUP while
// the Portal listing is blocked must not kill it (the default action would,
// with status 129); it then becomes ready, and SIGTERM stops it with exit
// code 0. (A signal before the Go runtime has started main cannot be
// caught by any Go program, so none is sent that early.)
func TestProcessSignals(t *testing.T) {
	tool := newBlockingTool(t)
	listed := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(listed) })
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, portalDoc(tool.url))
	}))
	t.Cleanup(portal.Close)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	cmd := exec.Command(os.Args[0], "extproc", "--portal", portal.URL, "--fetch-timeout", "1m",
		"--admin-listen", "127.0.0.1:0", "--extproc-listen", "127.0.0.1:0", "--drain-delay", "0s", "--log-format", "json")
	cmd.Env = append(os.Environ(), "TOOLMESH_TEST_MAIN=1")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("toolmesh stderr:\n%s", lastLines(stderr.String(), 40))
		}
	})
	select {
	case <-listed:
	case err := <-exited:
		t.Fatalf("toolmesh exited during start-up: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("toolmesh did not ask the Portal for its routes")
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	releaseOnce.Do(func() { close(release) })

	admin := ""
	deadline := time.Now().Add(30 * time.Second)
	for {
		if admin == "" {
			admin = loggedAddr(stderr.String(), "admin")
		}
		if admin != "" {
			if code, _ := httpGet(t, "http://"+admin+"/readyz"); code == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("toolmesh exited before ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("toolmesh not ready within 30s")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("toolmesh after SIGTERM: %v, want exit code 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("toolmesh did not stop within 30s of SIGTERM")
	}
}

// loggedAddr finds the address of a listener in toolmesh's JSON log.
func loggedAddr(logs, server string) string {
	for line := range strings.SplitSeq(logs, "\n") {
		var rec struct{ Msg, Server, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Server == server {
			return rec.Addr
		}
	}
	return ""
}
