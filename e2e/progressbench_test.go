package e2e

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkNativeProgressFirstEvent measures a streaming native Tool
// Service call (progressService) straight to the service and through
// `toolmesh run`, in both eras: the time from the request to the first
// progress line or event (first-*) and to the result (final-*). The service
// holds its result back until the caller has read the first frame, so the
// first figure cannot include the tool's work. Run with:
//
//	cd e2e && go test -run '^$' -bench NativeProgress -benchtime 500x -count 3 .
func BenchmarkNativeProgressFirstEvent(b *testing.B) {
	svc := newProgressService(b)
	gw := startGateway(b, progressPortal(b, svc), "--log-level", "warn")
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		b.Run(era, func(b *testing.B) {
			var dFirst, dFinal, rFirst, rFinal latencies
			for i := 0; b.Loop(); i++ {
				f, l := progressCall(b, svc, "", "", i)
				dFirst, dFinal = append(dFirst, f), append(dFinal, l)
				f, l = progressCall(b, svc, gw.URL, era, i)
				rFirst, rFinal = append(rFirst, f), append(rFinal, l)
			}
			report(b, "first-", dFirst, rFirst)
			report(b, "final-", dFinal, rFinal)
		})
	}
}

// TestNativeProgressBenchSetup runs one call of the benchmark each way, so
// its setup and checks run under `go test`.
func TestNativeProgressBenchSetup(t *testing.T) {
	svc := newProgressService(t)
	gw := startGateway(t, progressPortal(t, svc))
	for _, era := range []string{"", "2025-11-25", "2026-07-28"} {
		base := gw.URL
		if era == "" {
			base = ""
		}
		if first, final := progressCall(t, svc, base, era, 1); first <= 0 || final < first {
			t.Errorf("era %q: first frame after %v, result after %v", era, first, final)
		}
	}
}

// progressCall calls count once, straight to the service when gateway is
// "" (reading NDJSON lines) or through the gateway with a progress token
// (reading events), releasing the service once the first frame was read.
func progressCall(tb testing.TB, svc *progressService, gateway, era string, id int) (first, final time.Duration) {
	release := make(chan struct{})
	svc.release.Store(&release)
	var req *http.Request
	if gateway == "" {
		req, _ = http.NewRequestWithContext(tb.Context(), http.MethodPost, svc.srv.URL+"/tools/count", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
	} else {
		meta := `{"progressToken":` + strconv.Itoa(id)
		if era == "2026-07-28" {
			meta += `,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		}
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":` + meta + `}}}`
		req, _ = http.NewRequestWithContext(tb.Context(), http.MethodPost, gateway+"/mcp/prog", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", era)
		if era == "2026-07-28" {
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "count")
		}
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("count via %q: %v", gateway, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case first == 0 && strings.Contains(line, `"progress":1`):
			first = time.Since(start)
			close(release)
		case strings.Contains(line, `"result"`):
			final = time.Since(start)
			if first == 0 || !strings.Contains(line, `"counted"`) {
				tb.Fatalf("count via %q: result %q, progress seen: %v", gateway, line, first != 0)
			}
		}
	}
	if err := sc.Err(); err != nil || final == 0 {
		tb.Fatalf("count via %q: no result (err %v)", gateway, err)
	}
	return first, final
}
