package app

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkToolsList10k measures an unpaged tools/list of a 10,000-tool
// route through `toolmesh run` (client → local data plane → ext_proc
// ImmediateResponse → data plane → client, all in this process over
// loopback), one request at a time, for a client that asks for no coding
// and one that asks for gzip (as Go's, Node's and Python's HTTP clients do
// by default). The gzip client sets Accept-Encoding itself and decompresses
// the answer, as net/http's transport does for its own requests. It reports
// the p50/p99 of a request until the last byte of the answer arrived, the
// answer's size on the wire, the client's mean time to decompress it, and
// the heap bytes and objects the whole process allocated per request
// (client included: it reads the answer into buffers kept across requests).
//
//	go test -run '^$' -bench ToolsList10k -benchtime 300x -count 3 ./internal/app/
func BenchmarkToolsList10k(b *testing.B) {
	f := newListBench(b, 10_000)
	for _, gzip := range []bool{false, true} {
		name := "encoding=identity"
		if gzip {
			name = "encoding=gzip"
		}
		b.Run(name, func(b *testing.B) {
			c := newListClient(gzip)
			f.list(b, c) // warm: connections open, the gzip form is built
			var durs []time.Duration
			var inflate time.Duration
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			m0, a0 := ms.Mallocs, ms.TotalAlloc
			for b.Loop() {
				d := f.list(b, c)
				durs = append(durs, d)
				inflate += c.inflate
			}
			runtime.ReadMemStats(&ms)
			n := float64(len(durs))
			b.ReportMetric(us(percentile(durs, 50)), "p50-µs")
			b.ReportMetric(us(percentile(durs, 99)), "p99-µs")
			b.ReportMetric(float64(c.wireLen), "answer-B")
			if gzip {
				b.ReportMetric(us(inflate)/n, "inflate-µs")
			}
			b.ReportMetric(float64(ms.TotalAlloc-a0)/n, "process-B/req")
			b.ReportMetric(float64(ms.Mallocs-m0)/n, "process-allocs/req")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// listClient is what one client keeps across requests: buffers for the
// answer as received and decompressed, and a gzip reader reused with Reset.
type listClient struct {
	gzip    bool
	wire    *bytes.Buffer
	plain   *bytes.Buffer
	zr      *gzip.Reader
	out     []byte        // the last answer, decompressed
	wireLen int           // its size as received
	inflate time.Duration // of the last answer
}

func newListClient(gz bool) *listClient {
	return &listClient{gzip: gz, wire: bytes.NewBuffer(make([]byte, 0, 4<<20)),
		plain: bytes.NewBuffer(make([]byte, 0, 4<<20))}
}

// TestListBenchSetup runs the list benchmark's request over a small route,
// so its setup and answer check run under `go test`.
func TestListBenchSetup(t *testing.T) {
	f := newListBench(t, 50)
	c := newListClient(false)
	f.list(t, c)
	if n := strings.Count(string(c.out), `"name":"tool_`); n != 50 {
		t.Fatalf("the list has %d tools, want 50", n)
	}
}

type listBench struct {
	gw     string
	client *http.Client
	tools  int
}

func newListBench(tb testing.TB, tools int) *listBench {
	tb.Helper()
	var m bytes.Buffer
	m.WriteString(`{"tools":[`)
	for i := range tools {
		if i > 0 {
			m.WriteByte(',')
		}
		fmt.Fprintf(&m, `{"name":"tool_%05d","version":"1.0.0","description":"Looks up things of kind %d and returns them as JSON.",`+
			`"inputSchema":{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["q"]},"path":"/tools/t%d"}`, i, i, i)
	}
	m.WriteString(`]}`)
	manifest := m.Bytes()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(manifest)
	})
	svc := httptest.NewServer(mux)
	tb.Cleanup(svc.Close)

	portal := filepath.Join(tb.TempDir(), "portal.json")
	doc := `{"routes":[{"key":"big","toolServices":[{"name":"svc","url":"` + svc.URL + `"}]}]}`
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	p := startProcess(tb, "run", "--portal", portal, "--log-level", "warn")
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	tb.Cleanup(tr.CloseIdleConnections)
	f := &listBench{gw: "http://" + p.addrs["dataplane"], client: &http.Client{Transport: tr}, tools: tools}
	deadline := time.Now().Add(30 * time.Second)
	c := newListClient(false)
	for {
		if _, err := f.do(c); err == nil {
			return f
		} else if time.Now().After(deadline) {
			tb.Fatalf("the route does not list %d tools after 30s: %v", tools, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *listBench) list(tb testing.TB, c *listClient) time.Duration {
	d, err := f.do(c)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// do lists the route's tools with client c and checks the answer is the
// whole list, gzip-coded when c asked for it. It returns the time until the
// last byte of the answer arrived.
func (f *listBench) do(c *listClient) (time.Duration, error) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	req, _ := http.NewRequest(http.MethodPost, f.gw+"/mcp/big", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if c.gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	c.wire.Reset()
	c.plain.Reset()
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = c.wire.ReadFrom(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %.200s", resp.StatusCode, c.wire.Bytes())
	}
	c.wireLen = c.wire.Len()
	coded := resp.Header.Get("Content-Encoding") == "gzip"
	if coded != c.gzip && c.wire.Len() >= 8<<10 {
		return 0, fmt.Errorf("gzip-coded %v, asked %v", coded, c.gzip)
	}
	if coded {
		start := time.Now()
		if c.zr == nil {
			if c.zr, err = gzip.NewReader(c.wire); err != nil {
				return 0, err
			}
		} else if err := c.zr.Reset(c.wire); err != nil {
			return 0, err
		}
		if _, err := c.plain.ReadFrom(c.zr); err != nil {
			return 0, fmt.Errorf("gzip answer: %w", err)
		}
		c.inflate = time.Since(start)
		c.out = c.plain.Bytes()
	} else {
		c.out = c.wire.Bytes()
	}
	out := c.out
	// The last tool and the absence of a cursor are both in the answer's
	// tail (the cursor follows the tools array); scanning 2 MB per request
	// would cost more than the request.
	tail := out[max(0, len(out)-1024):]
	last := fmt.Sprintf(`"name":"tool_%05d"`, f.tools-1)
	if !bytes.Contains(tail, []byte(last)) || bytes.Contains(tail, []byte(`"nextCursor"`)) {
		return 0, fmt.Errorf("not the whole list of %d tools: %d bytes, ends %q", f.tools, len(out), out[max(0, len(out)-200):])
	}
	return d, nil
}

// TestToolsListGzipThroughRun lists a route large enough to be answered
// gzip-coded through `toolmesh run` with net/http clients: the default
// transport (which asks for gzip and decompresses transparently) gets the
// same list as a client asking for no coding, and a client refusing gzip
// gets it uncompressed; both codings say Vary: Accept-Encoding.
func TestToolsListGzipThroughRun(t *testing.T) {
	f := newListBench(t, 200) // about 45 KB of tools, above mcp.GzipMinBytes
	list := func(tr *http.Transport, acceptEncoding string) (*http.Response, []byte) {
		t.Helper()
		t.Cleanup(tr.CloseIdleConnections)
		const body = `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`
		req, _ := http.NewRequest(http.MethodPost, f.gw+"/mcp/big", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %.200s", resp.StatusCode, b)
		}
		return resp, b
	}
	identityResp, identity := list(&http.Transport{DisableCompression: true}, "")
	if ce := identityResp.Header.Get("Content-Encoding"); ce != "" {
		t.Fatalf("no Accept-Encoding: Content-Encoding %q", ce)
	}
	if n := strings.Count(string(identity), `"name":"tool_`); n != 200 {
		t.Fatalf("the identity list has %d tools", n)
	}

	gzResp, decoded := list(&http.Transport{}, "")
	if !gzResp.Uncompressed {
		t.Fatal("net/http's transport got no gzip-coded answer to its Accept-Encoding: gzip")
	}
	if !bytes.Equal(decoded, identity) {
		t.Fatalf("the decompressed list differs from the identity one:\n%.300s\n%.300s", decoded, identity)
	}

	refusedResp, refused := list(&http.Transport{DisableCompression: true}, "gzip;q=0, identity")
	if ce := refusedResp.Header.Get("Content-Encoding"); ce != "" || !bytes.Equal(refused, identity) {
		t.Fatalf("gzip;q=0: Content-Encoding %q", ce)
	}

	// Vary on both codings; the transport removed Content-Encoding from
	// the decompressed one, so ask again for the raw answer.
	rawResp, raw := list(&http.Transport{DisableCompression: true}, "gzip")
	if rawResp.Header.Get("Content-Encoding") != "gzip" || len(raw) >= len(identity)/2 {
		t.Fatalf("raw gzip answer: Content-Encoding %q, %d B for %d B", rawResp.Header.Get("Content-Encoding"), len(raw), len(identity))
	}
	for name, r := range map[string]*http.Response{"identity": identityResp, "gzip": rawResp} {
		if v := r.Header.Get("Vary"); v != "Accept-Encoding" {
			t.Errorf("%s answer: Vary %q", name, v)
		}
	}
}
