package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakDuration is how long TestSoak drives traffic: 15 s in `make test`,
// longer with TOOLMESH_SOAK=60s (a one-minute soak).
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("TOOLMESH_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TOOLMESH_SOAK=%q: %v", v, err)
		}
		return d
	}
	return 15 * time.Second
}

// TestSoak drives mixed traffic in both eras through a gateway with a Redis
// store while a fault injector breaks and heals the Portal, the manifests and
// Redis itself (a restart loses its data). Every answer is checked exactly;
// the run must end with zero wrong answers, a flat goroutine count and
// bounded memory in the gateway process. The figures are logged.
func TestSoak(t *testing.T) {
	duration := soakDuration(t)
	rds := startRedis(t)
	a := newToolService(t, "svc-a", standardTools("a_"))
	b := newToolService(t, "svc-b", standardTools("b_"))
	portal := newSwitchablePortal(t, writePortal(t,
		portalRoute{Key: "alpha", Services: []*toolService{a}},
		portalRoute{Key: "beta", Services: []*toolService{b}},
	))
	gw := startGateway(t, "", "--portal", portal.url, "--redis", rds.url,
		"--refresh-interval", "200ms", "--fetch-timeout", "300ms", "--log-level", "warn")
	wantA, wantB := listTools(t, gw, "alpha"), listTools(t, gw, "beta")

	warm := func() {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			postJSON(t, gw.URL+"/mcp/alpha", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		}
	}
	warm()
	start := scrape(t, gw)

	var total, wrong, transport atomic.Int64
	var mu sync.Mutex
	var examples []string
	fail := func(format string, args ...any) {
		wrong.Add(1)
		mu.Lock()
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(duration)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := 0; time.Now().Before(deadline); i++ {
				id := strconv.Itoa(w*1_000_000 + i)
				total.Add(1)
				switch op := rng.IntN(6); op {
				case 0: // legacy tools/list
					body, err := soakPost(client, gw.URL+"/mcp/alpha", legacyHeaders(), `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
					if err != nil {
						transport.Add(1)
						continue
					}
					if names := toolNamesOf(body); !slices.Equal(names, wantA) {
						fail("legacy tools/list: %s", clipBody(body))
					}
				case 1: // 2026 tools/list
					body, err := soakPost(client, gw.URL+"/mcp/beta", statelessHeaders("tools/list", ""), statelessBody(id, "tools/list", ""))
					if err != nil {
						transport.Add(1)
						continue
					}
					if names := toolNamesOf(body); !slices.Equal(names, wantB) || !strings.Contains(body, `"resultType":"complete"`) {
						fail("stateless tools/list: %s", clipBody(body))
					}
				case 2: // legacy add: the sum must be exact
					x, y := rng.IntN(1000), rng.IntN(1000)
					body, err := soakPost(client, gw.URL+"/mcp/alpha", legacyHeaders(),
						fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"a_add","arguments":{"a":%d,"b":%d}}}`, id, x, y))
					if err != nil {
						transport.Add(1)
						continue
					}
					if !strings.Contains(body, fmt.Sprintf(`"text":"%d"`, x+y)) || !strings.Contains(body, `"id":`+id+`,`) {
						fail("add %d+%d: %s", x, y, clipBody(body))
					}
				case 3: // 2026 echo
					msg := "m" + strconv.Itoa(rng.IntN(1<<30))
					body, err := soakPost(client, gw.URL+"/mcp/beta", statelessHeaders("tools/call", "b_echo"),
						statelessBody(id, "tools/call", `"name":"b_echo","arguments":{"message":"`+msg+`"},`))
					if err != nil {
						transport.Add(1)
						continue
					}
					if !strings.Contains(body, `"text":"`+msg+`"`) || strings.Contains(body, `"isError":true`) {
						fail("echo %s: %s", msg, clipBody(body))
					}
				case 4: // a failing tool is an isError result
					body, err := soakPost(client, gw.URL+"/mcp/alpha", legacyHeaders(),
						`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"a_fail","arguments":{}}}`)
					if err != nil {
						transport.Add(1)
						continue
					}
					if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "500") {
						fail("fail tool: %s", clipBody(body))
					}
				case 5: // initialize
					body, err := soakPost(client, gw.URL+"/mcp/beta", map[string]string{"content-type": "application/json"},
						`{"jsonrpc":"2.0","id":`+id+`,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}`)
					if err != nil {
						transport.Add(1)
						continue
					}
					if !strings.Contains(body, `"protocolVersion":"2025-06-18"`) {
						fail("initialize: %s", clipBody(body))
					}
				}
			}
		})
	}

	// The fault injector breaks one thing at a time and heals it.
	faults := []struct {
		name         string
		inject, heal func()
	}{
		{"manifest a 500", func() { a.broken.Store(true) }, func() { a.broken.Store(false) }},
		{"manifest b garbage", func() { b.setFault("garbage") }, func() { b.setFault("") }},
		{"portal down", func() { portal.setMode("down") }, func() { portal.setMode("") }},
		{"redis restart", rds.stop, func() { rds.start(t) }},
		{"manifest a hangs", func() { a.setFault("hang") }, func() { a.setFault("") }},
		{"portal lists nothing", func() { portal.setMode("empty") }, func() { portal.setMode("") }},
	}
	injected := 0
	for i := 0; time.Now().Add(1500 * time.Millisecond).Before(deadline); i++ {
		f := faults[i%len(faults)]
		f.inject()
		time.Sleep(700 * time.Millisecond)
		f.heal()
		injected++
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()

	// Idle connections close and refresh cycles end on their own time,
	// which a loaded machine stretches: wait (bounded) until the gateway's
	// goroutines and heap are back within the bounds asserted below, so
	// only growth that stays fails the test.
	var end map[string]float64
	settle := time.Now().Add(2 * time.Minute)
	for {
		end = scrape(t, gw)
		if end["go_goroutines"] <= start["go_goroutines"]+30 &&
			end["go_memstats_heap_inuse_bytes"] <= 2*start["go_memstats_heap_inuse_bytes"]+64<<20 ||
			time.Now().After(settle) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("soak %s: %d requests (%.0f/s), %d wrong answers, %d transport errors, %d faults injected and healed",
		duration, total.Load(), float64(total.Load())/duration.Seconds(), wrong.Load(), transport.Load(), injected)
	t.Logf("gateway goroutines %v → %v; resident memory %.1f → %.1f MiB; heap in use %.1f → %.1f MiB",
		start["go_goroutines"], end["go_goroutines"],
		start["process_resident_memory_bytes"]/(1<<20), end["process_resident_memory_bytes"]/(1<<20),
		start["go_memstats_heap_inuse_bytes"]/(1<<20), end["go_memstats_heap_inuse_bytes"]/(1<<20))

	if wrong.Load() != 0 {
		t.Errorf("%d wrong answers, e.g. %q", wrong.Load(), examples)
	}
	if transport.Load() != 0 {
		t.Errorf("%d requests got no HTTP answer", transport.Load())
	}
	// That the soak ran, not how fast: throughput is the machine's.
	if total.Load() < int64(injected) {
		t.Errorf("only %d requests in %s with %d faults injected: the soak did not run", total.Load(), duration, injected)
	}
	if g0, g1 := start["go_goroutines"], end["go_goroutines"]; g1 > g0+30 {
		t.Errorf("goroutines grew from %v to %v", g0, g1)
	}
	if h0, h1 := start["go_memstats_heap_inuse_bytes"], end["go_memstats_heap_inuse_bytes"]; h1 > 2*h0+64<<20 {
		t.Errorf("heap in use grew from %.1f to %.1f MiB", h0/(1<<20), h1/(1<<20))
	}
}

func legacyHeaders() map[string]string {
	return map[string]string{"content-type": "application/json", "mcp-protocol-version": "2025-11-25"}
}

func statelessHeaders(method, name string) map[string]string {
	h := map[string]string{"content-type": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method}
	if name != "" {
		h["mcp-name"] = name
	}
	return h
}

// statelessBody is a 2026-07-28 request; params are the inner members, each
// followed by a comma.
func statelessBody(id, method, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
}

func soakPost(c *http.Client, url string, headers map[string]string, body string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&sb)
	return sb.String(), err
}

func toolNamesOf(body string) []string {
	var out struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal([]byte(body), &out) != nil {
		return nil
	}
	var names []string
	for _, t := range out.Result.Tools {
		names = append(names, t.Name)
	}
	return names
}

func clipBody(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// scrape reads the gauges of the gateway's /metrics this test watches.
func scrape(t *testing.T, g *gateway) map[string]float64 {
	t.Helper()
	_, body := g.get(t, "/metrics")
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"} {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err == nil {
					out[name] = f
				}
			}
		}
	}
	if len(out) != 3 {
		t.Fatalf("/metrics lacks the process gauges: got %v", out)
	}
	return out
}
