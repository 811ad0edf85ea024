package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRoutedCall measures a routed tools/call through `toolmesh run`
// (local data plane → ext_proc → Tool Service, all in this process over
// loopback) against the same Tool Service called directly, in the same run,
// in both eras:
//
//   - clients=1: one call at a time, direct and routed interleaved; reports
//     the p50/p99 of each in µs, the routed p50 minus the direct p50
//     (added-p50-µs), the ratio of the p50s, and the heap allocations of
//     the whole process per routed and per direct call (client, data plane,
//     extproc and Tool Service together), counted over up to allocCalls
//     further calls of each kind after the timed ones.
//   - clients=16: b.N calls spread over 16 concurrent clients, first all
//     direct, then all routed; reports calls/s of each and the process's
//     CPU time per call.
//
// Every answer is checked (status, JSON-RPC id, the arguments echoed back);
// any failure fails the benchmark, and errors are reported as a metric.
// Run with:
//
//	go test -run '^$' -bench RoutedCall -benchtime 2000x -count 3 ./internal/app/
func BenchmarkRoutedCall(b *testing.B) {
	f := newCallBench(b)
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		b.Run("era="+era+"/clients=1", func(b *testing.B) {
			var direct, routed []time.Duration
			for i := 0; b.Loop(); i++ {
				direct = append(direct, f.call(b, "", i))
				routed = append(routed, f.call(b, era, i))
			}
			// Allocations are counted after the timed calls, on calls of
			// their own: runtime.ReadMemStats stops the world and empties
			// every P's allocation cache (flushallmcaches), so read around
			// each timed call it made every call start cold, refilling a
			// span per size class, and doubled both p50s on 2 cores.
			na := min(len(routed), allocCalls)
			dAllocs, rAllocs := f.allocs(b, "", na), f.allocs(b, era, na)
			dp50, rp50 := percentile(direct, 50), percentile(routed, 50)
			b.ReportMetric(us(dp50), "direct-p50-µs")
			b.ReportMetric(us(percentile(direct, 99)), "direct-p99-µs")
			b.ReportMetric(us(rp50), "routed-p50-µs")
			b.ReportMetric(us(percentile(routed, 99)), "routed-p99-µs")
			b.ReportMetric(us(rp50-dp50), "added-p50-µs")
			b.ReportMetric(float64(rp50)/float64(dp50), "ratio-p50")
			b.ReportMetric(dAllocs, "direct-allocs/call")
			b.ReportMetric(rAllocs, "routed-allocs/call")
			b.ReportMetric(0, "ns/op") // one op is two calls; the metrics above say more
		})
		b.Run("era="+era+"/clients=16", func(b *testing.B) {
			const clients = 16
			n := b.N
			b.ResetTimer()
			c0 := cpuTime()
			dRate, dErrs := f.load(b, "", clients, n)
			c1 := cpuTime()
			rRate, rErrs := f.load(b, era, clients, n)
			c2 := cpuTime()
			b.ReportMetric(dRate, "direct-calls/s")
			b.ReportMetric(rRate, "routed-calls/s")
			// CPU time of the whole process per call (client, data plane,
			// extproc and Tool Service): unlike calls/s, barely moved by
			// other work on a shared machine. 2 cores / this is the rate two
			// dedicated cores could sustain.
			b.ReportMetric(us(c1-c0)/float64(n), "direct-cpu-µs/call")
			b.ReportMetric(us(c2-c1)/float64(n), "routed-cpu-µs/call")
			b.ReportMetric(rRate/dRate, "ratio-rate")
			b.ReportMetric(float64(dErrs+rErrs), "errors")
			b.ReportMetric(0, "ns/op")
			if dErrs+rErrs > 0 {
				b.Errorf("%d direct and %d routed calls failed", dErrs, rErrs)
			}
		})
	}
}

// TestRoutedCallBenchSetup runs a few calls of the benchmark each way, so
// its setup and answer checks run under `go test`.
func TestRoutedCallBenchSetup(t *testing.T) {
	f := newCallBench(t)
	for _, era := range []string{"", "2025-11-25", "2026-07-28"} {
		for i := range 3 {
			f.call(t, era, i)
		}
		if n := f.allocs(t, era, 2); n <= 0 {
			t.Errorf("era %q: %v allocations per call, want some", era, n)
		}
		if _, errs := f.load(t, era, 4, 20); errs != 0 {
			t.Errorf("era %q: %d of 20 concurrent calls failed", era, errs)
		}
	}
}

// callBench is a Tool Service with one tool, echo, behind `toolmesh run`.
type callBench struct {
	svc, gw string
	client  *http.Client
}

// echoReply is the Tool Service's answer; it echoes the arguments as
// structured content so every answer can be checked against its request.
var (
	echoHead = []byte(`{"content":[{"type":"text","text":"echoed"}],"structuredContent":`)
	echoTail = []byte(`}`)
)

func newCallBench(tb testing.TB) *callBench {
	tb.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"echo","version":"1","description":"Echoes its arguments.",
			"inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"path":"/tools/echo"}]}`)
	})
	mux.HandleFunc("POST /tools/echo", func(w http.ResponseWriter, r *http.Request) {
		args, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(echoHead)+len(args)+len(echoTail)))
		_, _ = w.Write(echoHead)
		_, _ = w.Write(args)
		_, _ = w.Write(echoTail)
	})
	svc := httptest.NewServer(mux)
	tb.Cleanup(svc.Close)

	portal := filepath.Join(tb.TempDir(), "portal.json")
	doc := `{"routes":[{"key":"bench","toolServices":[{"name":"echo","url":"` + svc.URL + `"}]}]}`
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	p := startProcess(tb, "run", "--portal", portal, "--log-level", "warn")
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	tb.Cleanup(tr.CloseIdleConnections)
	f := &callBench{svc: svc.URL, gw: "http://" + p.addrs["dataplane"], client: &http.Client{Transport: tr}}
	// The route is ready once the snapshot reached the data plane: wait
	// for the first routed call to succeed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := f.do(tb.Context(), "2026-07-28", 0); err == nil {
			return f
		} else if time.Now().After(deadline) {
			tb.Fatalf("the echo tool is not callable after 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call makes one call (direct when era is "") and fails tb on a wrong answer.
func (f *callBench) call(tb testing.TB, era string, i int) time.Duration {
	d, err := f.do(tb.Context(), era, i)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// do makes call number i straight to the Tool Service (era "") or through
// the gateway in era, and checks its answer.
func (f *callBench) do(ctx context.Context, era string, i int) (time.Duration, error) {
	q := strconv.Itoa(i)
	args := `{"q":"` + q + `"}`
	var req *http.Request
	if era == "" {
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, f.svc+"/tools/echo", bytes.NewReader([]byte(args)))
		req.Header.Set("Content-Type", "application/json")
	} else {
		meta := ""
		if era == "2026-07-28" {
			meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		}
		body := `{"jsonrpc":"2.0","id":` + q + `,"method":"tools/call","params":{"name":"echo","arguments":` + args + meta + `}}`
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, f.gw+"/mcp/bench", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", era)
		if era == "2026-07-28" {
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "echo")
		}
	}
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("call %d (era %q): %w", i, era, err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("call %d (era %q): reading the answer: %w", i, era, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("call %d (era %q): status %d: %s", i, era, resp.StatusCode, out)
	}
	if !bytes.Contains(out, []byte(`"structuredContent":`+args)) {
		return 0, fmt.Errorf("call %d (era %q): arguments not echoed: %s", i, era, out)
	}
	if era != "" && (!bytes.Contains(out, []byte(`"id":`+q+`,`)) || bytes.Contains(out, []byte(`"isError":true`))) {
		return 0, fmt.Errorf("call %d (era %q): not the result of id %s: %s", i, era, q, out)
	}
	return d, nil
}

// allocCalls bounds the calls of each kind whose allocations are counted.
const allocCalls = 500

// allocs makes n calls (direct when era is "") between two
// runtime.ReadMemStats and returns the heap allocations per call of the
// whole process.
func (f *callBench) allocs(tb testing.TB, era string, n int) float64 {
	if n <= 0 {
		return 0
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m0 := ms.Mallocs
	for i := range n {
		f.call(tb, era, i)
	}
	runtime.ReadMemStats(&ms)
	return float64(ms.Mallocs-m0) / float64(n)
}

// load makes n calls over clients concurrent clients and returns the calls
// per second and the number of failed calls (the first few are logged).
func (f *callBench) load(tb testing.TB, era string, clients, n int) (rate float64, errs int64) {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if _, err := f.do(tb.Context(), era, i); err != nil {
					if failed.Add(1) <= 3 {
						tb.Log(err)
					}
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), failed.Load()
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
