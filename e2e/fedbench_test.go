package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The benchmarks here compare a call to a go-sdk MCP server made straight
// to it with the same call made through `toolmesh run` (local data plane and
// extproc server), which federates that server behind a route. Each
// iteration makes one direct call and one call through toolmesh, so the two
// figures and their ratio come from the same run, under the same load:
//
//	cd e2e && go test -run '^$' -bench 'Federated' -benchtime 2000x -count 3 .
//
// Their setup is checked by TestFederatedBenchSetup, which makes one call
// of each kind and stays fast.

// benchUpstream is one go-sdk MCP server served on loopback in both eras:
// /stateless (2026-07-28, no sessions) and /mcp (legacy, with sessions).
type benchUpstream struct {
	URL     string
	release chan struct{} // the stream tool waits for it after its progress event
	done    chan struct{} // closed at the end, so a waiting tool returns
}

func newBenchUpstream(tb testing.TB) *benchUpstream {
	tb.Helper()
	u := &benchUpstream{release: make(chan struct{}, 1), done: make(chan struct{})}
	s := sdk.NewServer(&sdk.Implementation{Name: "bench-upstream", Version: "1.0.0"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Returns its word."},
		func(_ context.Context, _ *sdk.CallToolRequest, v struct {
			Word string `json:"word"`
		}) (*sdk.CallToolResult, any, error) {
			return text(v.Word), nil, nil
		})
	// stream sends a progress event, then waits until the benchmark read
	// that event before it returns its result: the time to the first event
	// cannot include the tool's own work, nor can the result overtake it.
	sdk.AddTool(s, &sdk.Tool{Name: "stream", Description: "Reports progress, then waits to be released."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half way"}); err != nil {
				return nil, nil, err
			}
			select {
			case <-u.release:
				return text("released"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-u.done:
				return nil, nil, errors.New("benchmark over")
			}
		})
	mux := http.NewServeMux()
	mux.Handle("/stateless", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true}))
	mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	// Registered after the server, so it runs before the server's Close,
	// which waits for every handler.
	tb.Cleanup(func() { close(u.done) })
	u.URL = srv.URL
	return u
}

// benchEra is one way of calling: the upstream endpoint, the route that
// federates it, and the request headers and body of the era.
type benchEra struct {
	name     string
	upstream string // path on the upstream
	route    string // route key in toolmesh
	version  string
}

var benchEras = []benchEra{
	{name: "stateless", upstream: "/stateless", route: "bench", version: "2026-07-28"},
	{name: "legacy", upstream: "/mcp", route: "bench-legacy", version: "2025-11-25"},
}

// benchTarget is one endpoint to call, with the session it needs, if any.
type benchTarget struct {
	url     string
	session string
}

type benchSetup struct {
	up      *benchUpstream
	gw      *gateway
	client  *http.Client
	targets map[string][2]benchTarget // era → {direct, toolmesh}
	// proxied is, per era, the upstream behind a bare reverse proxy
	// (startFloor without ext_proc): what one Go HTTP proxy hop alone adds;
	// floored the upstream behind that proxy making the ext_proc exchange
	// of a federated call with a no-op server (startFloor with ext_proc):
	// the least a Go data plane of this shape adds.
	proxied, floored map[string]benchTarget
	proxy, floor     *floorProc
}

// newBenchSetup starts the upstream and a `toolmesh run` federating it
// behind one route per era, and opens the legacy sessions the legacy calls
// carry, straight and through toolmesh.
func newBenchSetup(tb testing.TB, extra ...string) *benchSetup {
	tb.Helper()
	up := newBenchUpstream(tb)
	var routes []any
	for _, e := range benchEras {
		routes = append(routes, map[string]any{"key": e.route, "publicPath": "/mcp/" + e.route, "toolServices": []any{
			map[string]any{"name": e.route, "protocol": "mcp", "url": up.URL + e.upstream}}})
	}
	b, _ := json.Marshal(map[string]any{"routes": routes})
	portal := filepath.Join(tb.TempDir(), "portal.json")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	// Debug logging would put a log line per request on the measured path.
	gw := startGateway(tb, portal, append([]string{"--log-level", "warn"}, extra...)...)
	s := &benchSetup{up: up, gw: gw, targets: map[string][2]benchTarget{},
		proxied: map[string]benchTarget{}, floored: map[string]benchTarget{},
		proxy: startFloor(tb, up.URL, false), floor: startFloor(tb, up.URL, true),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}}
	tb.Cleanup(s.client.CloseIdleConnections)
	for _, e := range benchEras {
		direct := benchTarget{url: up.URL + e.upstream}
		if e.version != "2026-07-28" {
			direct.session = s.openSession(tb, direct.url, e.version)
		}
		routed := benchTarget{url: gw.URL + "/mcp/" + e.route}
		if e.version != "2026-07-28" {
			// A legacy client initializes; toolmesh gives it a session
			// when the server keeps per-client state (go-sdk declares
			// logging), which its calls then carry (ADR 0022).
			routed.session = s.initialize(tb, routed.url, e.version)
		}
		s.targets[e.name] = [2]benchTarget{direct, routed}
		// The proxies pass the direct session through.
		s.proxied[e.name] = benchTarget{url: s.proxy.url + e.upstream, session: direct.session}
		s.floored[e.name] = benchTarget{url: s.floor.url + e.upstream, session: direct.session}
	}
	return s
}

// floorProc is one running e2e/cmd/fedfloor: a bare Go reverse proxy to
// the upstream or, with ext_proc, that proxy making the ext_proc exchange
// of a federated call with a no-op server in the same process. A process
// of its own, so that its CPU per call is read from /proc as toolmesh's is.
// Envoy, which the local data plane stands in for, is not a Go proxy.
type floorProc struct {
	url string
	cmd *exec.Cmd
}

var (
	floorBinOnce sync.Once
	floorBin     string
	floorBinErr  error
)

// startFloor builds e2e/cmd/fedfloor once and starts it in front of
// upstream.
func startFloor(tb testing.TB, upstream string, extproc bool) *floorProc {
	tb.Helper()
	floorBinOnce.Do(func() {
		floorBin = filepath.Join(filepath.Dir(toolmeshBin), "fedfloor")
		args := []string{"build", "-o", floorBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "./cmd/fedfloor")...).CombinedOutput()
		if err != nil {
			floorBinErr = fmt.Errorf("build fedfloor: %v\n%s", err, out)
		}
	})
	if floorBinErr != nil {
		tb.Fatal(floorBinErr)
	}
	args := []string{"--upstream", upstream}
	if extproc {
		args = append(args, "--extproc")
	}
	cmd := exec.Command(floorBin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start fedfloor: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("fedfloor %v: no address: %v", args, err)
	}
	return &floorProc{url: strings.TrimSpace(line), cmd: cmd}
}

// openSession runs the legacy handshake and returns the session id.
func (s *benchSetup) openSession(tb testing.TB, url, version string) string {
	tb.Helper()
	id := s.initialize(tb, url, version)
	if id == "" {
		tb.Fatalf("initialize %s: no session", url)
	}
	return id
}

// initialize runs the legacy handshake and returns the session id, "" for
// none.
func (s *benchSetup) initialize(tb testing.TB, url, version string) string {
	tb.Helper()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`
	resp := s.post(tb, benchTarget{url: url}, version, "", init)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("initialize %s: status %d", url, resp.StatusCode)
	}
	resp = s.post(tb, benchTarget{url: url, session: id}, version, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return id
}

// callBody is a tools/call of tool in the era of version; progress asks
// for progress events.
func callBody(id int, version, tool, args string, progress bool) string {
	var meta []string
	if progress {
		meta = append(meta, `"progressToken":"p`+fmt.Sprint(id)+`"`)
	}
	if version == "2026-07-28" {
		meta = append(meta, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/clientCapabilities":{}`)
	}
	m := ""
	if len(meta) > 0 {
		m = `,"_meta":{` + strings.Join(meta, ",") + `}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, tool, args, m)
}

func (s *benchSetup) post(tb testing.TB, t benchTarget, version, tool, body string) *http.Response {
	req, err := http.NewRequest(http.MethodPost, t.url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	if version == "2026-07-28" && tool != "" {
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
	}
	if t.session != "" {
		req.Header.Set("Mcp-Session-Id", t.session)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", t.url, err)
	}
	return resp
}

// callEcho makes one tools/call of echo and checks its result.
func (s *benchSetup) callEcho(tb testing.TB, t benchTarget, version string, id int) {
	resp := s.post(tb, t, version, "echo", callBody(id, version, "echo", `{"word":"hi"}`, false))
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"text":"hi"`) ||
		strings.Contains(string(body), `"isError":true`) {
		tb.Fatalf("echo via %s: status %d, err %v, body %q", t.url, resp.StatusCode, err, body)
	}
}

// callStream makes one tools/call of stream and returns the time from the
// request to its progress event and to its result. The tool is released
// only once the progress event was read.
func (s *benchSetup) callStream(tb testing.TB, t benchTarget, version string, id int) (first, final time.Duration) {
	start := time.Now()
	resp := s.post(tb, t, version, "stream", callBody(id, version, "stream", `{}`, true))
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("stream via %s: status %d, content type %q, body %q", t.url, resp.StatusCode, ct, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		switch {
		case first == 0 && strings.Contains(line, `"notifications/progress"`):
			first = time.Since(start)
			s.up.release <- struct{}{}
		case strings.Contains(line, `"result"`):
			final = time.Since(start)
			if first == 0 || !strings.Contains(line, `"released"`) {
				tb.Fatalf("stream via %s: result %q, progress event seen: %v", t.url, line, first != 0)
			}
		}
	}
	if err := sc.Err(); err != nil || final == 0 {
		tb.Fatalf("stream via %s: no result (err %v)", t.url, err)
	}
	return first, final
}

// latencies collects the durations of one kind of call.
type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q)]
}

func (l latencies) mean() time.Duration {
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return sum / time.Duration(len(l))
}

// BenchmarkFederatedToolsCall: a tools/call of a federated tool, straight
// to the upstream and through toolmesh, in each era, with the figures the
// federated call's targets are stated in (issue 25):
//
//   - c1-added-p50-ns: what toolmesh adds to the median call at one client
//     (target ≤ 400,000 ns). Each iteration makes one direct call and one
//     call through toolmesh, so both come from the same moments.
//   - c16-share: calls per second through toolmesh with 16 concurrent
//     clients, as a share of the same made straight to the upstream
//     (target ≥ 0.8), over c16Rounds interleaved rounds.
//   - cpu-ns/call: CPU time of the toolmesh process (data plane and
//     extproc server, user and system) per call through it, over the c1
//     loop and the c16 rounds.
//   - c1-proxy-added-p50-ns, c16-proxy-share and proxy-cpu-ns/call: the
//     same three figures for a bare Go reverse proxy in front of the same
//     upstream (startFloor), called in the same iterations and rounds.
//   - c1-floor-added-p50-ns, c16-floor-share and floor-cpu-ns/call: the
//     same for that proxy making, for every request, the ext_proc exchange
//     the local data plane makes for this call, against a no-op ext_proc
//     server in the same process (e2e/cmd/fedfloor): the least a Go data
//     plane of this shape adds, with nothing of toolmesh's own work. The
//     extproc server's own part is measured by extproc
//     BenchmarkFederatedSSE (docs/benchmarks.md).
//
// A legacy client initializes through toolmesh first and sends the
// Mcp-Session-Id it got, as a real one does (ADR 0022).
func BenchmarkFederatedToolsCall(b *testing.B) {
	s := newBenchSetup(b)
	for _, e := range benchEras {
		b.Run(e.name, func(b *testing.B) {
			// The ways of calling, in the order each iteration and round
			// makes them: direct, toolmesh, bare proxy, floor.
			t := s.targets[e.name]
			ways := []benchTarget{t[0], t[1], s.proxied[e.name], s.floored[e.name]}
			procs := []int{0, s.gw.cmd.Process.Pid, s.proxy.cmd.Process.Pid, s.floor.cmd.Process.Pid}
			// So that a failed call names which way it went.
			b.Logf("%s: direct %s, through toolmesh %s, through the proxy %s, through the floor %s",
				e.name, t[0].url, t[1].url, ways[2].url, ways[3].url)
			lat := make([]latencies, len(ways))
			cpu := make([]time.Duration, len(ways))
			dur := make([]time.Duration, len(ways))
			c0 := make([]time.Duration, len(ways))
			for k := 1; k < len(ways); k++ {
				c0[k] = procCPU(b, procs[k])
			}
			for i := 0; b.Loop(); i++ {
				for k, w := range ways {
					start := time.Now()
					s.callEcho(b, w, e.version, i)
					lat[k] = append(lat[k], time.Since(start))
				}
			}
			b.StopTimer()
			for k := 1; k < len(ways); k++ {
				cpu[k] = procCPU(b, procs[k]) - c0[k]
			}
			for range c16Rounds {
				for k, w := range ways {
					var c time.Duration
					if k > 0 {
						c = procCPU(b, procs[k])
					}
					dur[k] += s.concurrent(b, w, e.version, 16, c16Calls)
					if k > 0 {
						cpu[k] += procCPU(b, procs[k]) - c
					}
				}
			}
			calls := float64(len(lat[0]) + c16Rounds*c16Calls)
			ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
			direct := ns(lat[0].quantile(0.5))
			added := func(k int) float64 { return ns(lat[k].quantile(0.5)) - direct }
			share := func(k int) float64 { return ns(dur[0]) / ns(dur[k]) }
			perCall := func(k int) float64 { return ns(cpu[k]) / calls }
			b.ReportMetric(direct, "c1-direct-p50-ns")
			b.ReportMetric(added(1), "c1-added-p50-ns")
			b.ReportMetric(float64(c16Rounds*c16Calls)/dur[0].Seconds(), "c16-direct-rps")
			b.ReportMetric(float64(c16Rounds*c16Calls)/dur[1].Seconds(), "c16-toolmesh-rps")
			b.ReportMetric(share(1), "c16-share")
			b.ReportMetric(perCall(1), "cpu-ns/call")
			b.ReportMetric(added(2), "c1-proxy-added-p50-ns")
			b.ReportMetric(share(2), "c16-proxy-share")
			b.ReportMetric(perCall(2), "proxy-cpu-ns/call")
			b.ReportMetric(added(3), "c1-floor-added-p50-ns")
			b.ReportMetric(share(3), "c16-floor-share")
			b.ReportMetric(perCall(3), "floor-cpu-ns/call")
			b.Logf("%s: added p50 at c1 %.0f µs (target ≤ 400: %s), c16 share of direct %.2f (target ≥ 0.8: %s), CPU %.0f µs/call; "+
				"in the same run a bare Go reverse proxy: added p50 %.0f µs, c16 share %.2f, CPU %.0f µs/call; "+
				"the floor (that proxy with a no-op ext_proc exchange): added p50 %.0f µs (%s), c16 share %.2f (%s), CPU %.0f µs/call",
				e.name, added(1)/1e3, met(added(1) <= 400e3), share(1), met(share(1) >= 0.8), perCall(1)/1e3,
				added(2)/1e3, share(2), perCall(2)/1e3,
				added(3)/1e3, met(added(3) <= 400e3), share(3), met(share(3) >= 0.8), perCall(3)/1e3)
		})
	}
}

// The c16 rounds of BenchmarkFederatedToolsCall: calls per round, and
// rounds, each direct then through toolmesh.
const (
	c16Calls  = 1600
	c16Rounds = 3
)

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// concurrent makes n echo calls to t from c clients at once and returns
// how long they took.
func (s *benchSetup) concurrent(tb testing.TB, t benchTarget, version string, c, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				s.callEcho(tb, t, version, int(i))
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// procCPU is the CPU time (user and system) process pid used so far, from
// /proc/PID/stat (Linux; in clock ticks of 1/100 s).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("CPU time of process %d: %v", pid, err)
	}
	// Fields after the command name (which may hold spaces, in parens):
	// utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("CPU time of process %d: %q: %v", pid, b, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// BenchmarkFederatedStreamFirstEvent: a tool that sends a progress event and
// then waits until the benchmark read it, straight to the upstream and
// through toolmesh, per iteration. Reports the time from the request to the
// first event (first-*) and to the result (final-*).
func BenchmarkFederatedStreamFirstEvent(b *testing.B) {
	s := newBenchSetup(b)
	for _, e := range benchEras {
		b.Run(e.name, func(b *testing.B) {
			t := s.targets[e.name]
			var dFirst, dFinal, rFirst, rFinal latencies
			for i := 0; b.Loop(); i++ {
				f, l := s.callStream(b, t[0], e.version, i)
				dFirst, dFinal = append(dFirst, f), append(dFinal, l)
				f, l = s.callStream(b, t[1], e.version, i)
				rFirst, rFinal = append(rFirst, f), append(rFinal, l)
			}
			report(b, "first-", dFirst, rFirst)
			report(b, "final-", dFinal, rFinal)
		})
	}
}

// report writes the direct and routed figures of one measure.
func report(b *testing.B, prefix string, direct, routed latencies) {
	if len(direct) == 0 {
		return
	}
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
	b.ReportMetric(ns(direct.mean()), prefix+"direct-ns/op")
	b.ReportMetric(ns(routed.mean()), prefix+"toolmesh-ns/op")
	b.ReportMetric(ns(routed.mean())/ns(direct.mean()), prefix+"ratio")
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		d, r := direct.quantile(q.q), routed.quantile(q.q)
		b.ReportMetric(ns(d), prefix+"direct-"+q.name+"-ns")
		b.ReportMetric(ns(r), prefix+"toolmesh-"+q.name+"-ns")
		b.ReportMetric(ns(r)-ns(d), prefix+"added-"+q.name+"-ns")
	}
}

// TestFederatedBenchSetup makes one call of each benchmark's kind, in each
// era, straight and through toolmesh, so the benchmarks' setup and checks
// are exercised by `go test` without running the benchmarks.
func TestFederatedBenchSetup(t *testing.T) {
	s := newBenchSetup(t)
	if tok := s.targets["legacy"][1].session; !strings.HasPrefix(tok, "tms1.") {
		t.Errorf("a legacy client of a go-sdk server (which declares logging) got session %q from toolmesh, want a session token (ADR 0022)", tok)
	}
	for _, e := range benchEras {
		s.callEcho(t, s.proxied[e.name], e.version, 0)
		s.callEcho(t, s.floored[e.name], e.version, 0)
		for i, target := range s.targets[e.name] {
			s.callEcho(t, target, e.version, i)
			if first, final := s.callStream(t, target, e.version, i); first <= 0 || final < first {
				t.Errorf("%s %s: first event after %v, result after %v", e.name, target.url, first, final)
			}
		}
	}
}
