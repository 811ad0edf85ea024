package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/redistest"
	"github.com/toolmesh/toolmesh/internal/rlstest"
)

// limitService is a Tool Service with drop (answers at once) and slow
// (answers when release is closed); it counts the calls it got.
type limitService struct {
	url     string
	drops   atomic.Int64
	release chan struct{}
	started chan struct{}
}

func startLimitService(t *testing.T) *limitService {
	t.Helper()
	s := &limitService{release: make(chan struct{}), started: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"drop","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true},"path":"/tools/drop"},
			{"name":"slow","inputSchema":{"type":"object"},"path":"/tools/slow"}]}`)
	})
	mux.HandleFunc("POST /tools/drop", func(w http.ResponseWriter, _ *http.Request) {
		s.drops.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"dropped":true}`)
	})
	mux.HandleFunc("POST /tools/slow", func(w http.ResponseWriter, r *http.Request) {
		s.started <- struct{}{}
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"done":true}`)
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	s.url = svc.URL
	return s
}

func limitGateway(t *testing.T, svc *limitService, cfgPath, cfg string) *process {
	t.Helper()
	portal := filepath.Join(t.TempDir(), "portal.json")
	doc := `{"routes":[{"key":"r","toolServices":[{"name":"db","url":"` + svc.url + `"}]}]}`
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, "run", "--portal", portal, "--config", cfgPath)
}

func callLimited(ctx context.Context, p *process, id int, tool string) (int, http.Header, string, error) {
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addrs["dataplane"]+"/mcp/r", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// TestRunGlobalRateLimit: two `toolmesh run` replicas share one global
// limit in envoyproxy/ratelimit on a real Redis: together they let through
// the configured number of calls and no more, and the Tool Service sees
// exactly those. Then SIGHUP: an invalid block keeps the limits in force
// and names the entry; a valid one takes effect without dropping a call in
// flight.
func TestRunGlobalRateLimit(t *testing.T) {
	const perHour = 25
	rls := rlstest.Start(t, redistest.Start(t).Options().Addr, rlstest.PerCaller("drops", "hour", perHour))
	svc := startLimitService(t)
	dir := t.TempDir()
	cfg := "rateLimits:\n  rls: {address: " + rls.GRPC + ", timeout: 2s}\n  routes:\n    r:\n" +
		"      - {name: drops, tools: [drop], by: [caller], global: true}\n"
	cfg1 := filepath.Join(dir, "one.yaml")
	p1 := limitGateway(t, svc, cfg1, cfg)
	p2 := limitGateway(t, svc, filepath.Join(dir, "two.yaml"), cfg)

	hour := time.Now().UTC().Truncate(time.Hour)
	var ok, limited int
	var refusal string
	var refusalHeader http.Header
	for i := range 2 * perHour {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		code, h, body, err := callLimited(t.Context(), p, i, "drop")
		if err != nil {
			t.Fatal(err)
		}
		switch code {
		case 200:
			ok++
		case 429:
			limited++
			refusal, refusalHeader = body, h
		default:
			t.Fatalf("call %d: %d %s", i, code, body)
		}
	}
	if !time.Now().UTC().Truncate(time.Hour).Equal(hour) {
		t.Fatal("the RLS's hour window changed during the test; run it again")
	}
	t.Logf("two replicas, one global limit of %d per hour: %d of %d calls let through, %d refused, the Tool Service called %d times",
		perHour, ok, 2*perHour, limited, svc.drops.Load())
	if ok != perHour || svc.drops.Load() != perHour {
		t.Fatalf("let through %d (Tool Service called %d times), want exactly %d", ok, svc.drops.Load(), perHour)
	}
	if !strings.Contains(refusal, `"code":-32029`) || !strings.Contains(refusal, `"retryAfterMs":`) ||
		refusalHeader.Get("Retry-After") == "" || refusalHeader.Get("Ratelimit-Policy") != `"drops";q=25;w=3600` {
		t.Errorf("refusal %v %s", refusalHeader, refusal)
	}

	// The console lists the limit in force.
	resp := adminGet(t, p1.addrs["admin"], "/console/api/state", "")
	state, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(state), `"rateLimits":[{"scope":"r","name":"drops","tools":"drop","by":"caller","global":true,"keys":0}]`) {
		t.Errorf("console state lacks the limit: %s", grepLines(string(state), "rateLimits"))
	}

	// SIGHUP with an invalid entry: named, and the limits in force stay.
	hangup := func(p *process, wantLog string) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(p.logs.String(), wantLog) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the logs after SIGHUP:\n%s", wantLog, lastLines(p.logs.String(), 20))
			}
			time.Sleep(20 * time.Millisecond) // polling the logs with a deadline
		}
	}
	bad := cfg + "      - {name: slow-one, tools: [slow], concurrency: 1, per: week, requests: 1}\n"
	if err := os.WriteFile(cfg1, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	hangup(p1, `rateLimits.routes.r[1] (name slow-one): per: \"week\"`)
	if code, _, body, _ := callLimited(t.Context(), p1, 100, "drop"); code != 429 {
		t.Fatalf("after a bad reload: %d %s", code, body)
	}

	// A call in flight across a reload that adds a concurrency limit on it
	// completes; the limit holds from then on.
	var wg sync.WaitGroup
	var inflightCode int
	wg.Go(func() { inflightCode, _, _, _ = callLimited(context.Background(), p1, 101, "slow") })
	<-svc.started
	good := cfg + "      - {name: slow-one, tools: [slow], concurrency: 1}\n"
	if err := os.WriteFile(cfg1, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	hangup(p1, "rateLimits reloaded")
	var second int
	wg.Go(func() { second, _, _, _ = callLimited(context.Background(), p1, 102, "slow") })
	<-svc.started // the new limit started empty: the call in flight is not counted
	if code, _, body, _ := callLimited(t.Context(), p1, 103, "slow"); code != 429 || !strings.Contains(body, `"reason":"concurrency"`) {
		t.Errorf("a second slow call while one holds the new limit's slot: %d %s", code, body)
	}
	close(svc.release)
	wg.Wait()
	if inflightCode != 200 || second != 200 {
		t.Fatalf("calls across the reload: %d, %d; want 200, 200", inflightCode, second)
	}
}

// TestRateLimitsConfigErrors: a wrong entry stops the start naming it, and
// an RLS timeout Envoy would not wait for is refused.
func TestRateLimitsConfigErrors(t *testing.T) {
	cfg := defaultConfig()
	cfg.RateLimits = &ratelimit.Config{Routes: map[string][]ratelimit.Limit{"core": {{Name: "deletes", Requests: 10, Per: "week"}}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `rateLimits.routes.core[0] (name deletes): per: "week"`) {
		t.Errorf("invalid per: %v", err)
	}
	cfg.RateLimits = &ratelimit.Config{RLS: &ratelimit.RLSConfig{Address: "127.0.0.1:8081", Timeout: config.Duration(10 * time.Second)}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "rateLimits.rls.timeout: 10s must be below messageTimeout") {
		t.Errorf("RLS timeout above messageTimeout: %v", err)
	}
	cfg.RateLimits.RLS.Timeout = config.Duration(time.Second)
	if err := cfg.Validate(); err != nil {
		t.Errorf("valid: %v", err)
	}
}
