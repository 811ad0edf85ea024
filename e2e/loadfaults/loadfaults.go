// Package loadfaults drives a running-gateway load test with faults: clients
// mix tools/list and tools/call in both protocol eras (2025-11-25 and
// 2026-07-28) through `toolmesh run` (registry, extproc, xDS and the local
// data plane) in front of real Tool Services on 127.0.0.1, while one Tool
// Service restarts on the same port, another gains and loses a tool, and the
// Portal file is rewritten (tools added to a route, a route added and
// removed). Every answer is checked: well-formed JSON-RPC with the request's
// id; a call's result is what that Tool Service returns for those
// arguments; a list is one of the tool sets some Portal and manifest version
// gives. A call to a restarting service (or to a cluster a Portal change
// just removed) may fail, but only with the documented shape — an isError
// result "tool NAME failed: unavailable" (docs/contracts/mcp.md, tools/call)
// — and only around that fault. Command e2e/cmd/loadfaults (make load) runs
// it; TestLoadFaults runs a short variant.
package loadfaults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is one run.
type Config struct {
	Toolmesh string        // the toolmesh binary
	Duration time.Duration // how long the clients send (default 60s)
	Clients  int           // concurrent clients (default 16)
	Seed     uint64        // the clients' random choices
	// Output receives the gateway's log lines (default: discarded).
	Output io.Writer
	// Progress receives a line per fault injected (default: discarded).
	Progress io.Writer
}

// Outcome kinds. The first four are answers the contract allows; the rest
// fail the run.
const (
	KindOK          = "ok"
	KindUnknownTool = "unknown_tool" // -32602 for a tool another version lists
	KindNoRoute     = "no_route"     // 404 -32600 for a route another version lists
	KindUnavailable = "unavailable"  // isError "unavailable" around a fault
	KindNotReady    = "not_ready"    // 503 -32603 "route not ready": gamma just added, no snapshot yet
	// KindNotRouted is the data plane's catch-all 404 ("no MCP route at
	// this path", id null) for a call to a Tool Service a Portal change is
	// adding or removing: the extproc server routed it with a snapshot
	// that names the service while the data plane's route configuration
	// (pushed over xDS, debounced) did not have its route yet or any
	// more. It fails the run: the route and the tool exist, and the id is
	// lost.
	KindNotRouted = "not_routed_404"
	// KindStrayUnavailable is "unavailable" with no fault near it.
	KindStrayUnavailable = "unavailable_without_fault"
	KindTransport        = "transport" // no HTTP answer from the gateway
	KindWrong            = "wrong"     // any other answer
)

// Report is what a run measured.
type Report struct {
	Duration                               time.Duration
	Clients                                int
	Requests                               int64
	Kinds                                  map[string]int64
	Latency                                map[string]Percentiles // by op ("list/2025-11-25", ...) and "all"
	Restarts, PortalChanges, ToolChanges   int
	Examples                               []string // of the failing kinds, a few
	RestartDown, PortalGrace, RestartGrace time.Duration
}

// Percentiles of one op's latencies.
type Percentiles struct {
	N             int
	P50, P99, Max time.Duration
}

// Failures counts the answers that fail the run.
func (r *Report) Failures() int64 {
	return r.Kinds[KindNotRouted] + r.Kinds[KindStrayUnavailable] + r.Kinds[KindTransport] + r.Kinds[KindWrong]
}

// String is the human-readable report.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loadfaults: %s, %d clients, %d requests, %.0f req/s\n",
		r.Duration.Round(time.Millisecond), r.Clients, r.Requests, float64(r.Requests)/r.Duration.Seconds())
	fmt.Fprintf(&b, "faults: %d Tool Service restarts (down %s each), %d Portal rewrites, %d manifest changes\n",
		r.Restarts, r.RestartDown, r.PortalChanges, r.ToolChanges)
	ops := make([]string, 0, len(r.Latency))
	for op := range r.Latency {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	fmt.Fprintf(&b, "%-22s %8s %10s %10s %10s\n", "latency", "n", "p50", "p99", "max")
	for _, op := range ops {
		p := r.Latency[op]
		fmt.Fprintf(&b, "%-22s %8d %10s %10s %10s\n", op, p.N, p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond), p.Max.Round(time.Microsecond))
	}
	fmt.Fprintf(&b, "answers by kind:")
	for _, k := range []string{KindOK, KindUnknownTool, KindNoRoute, KindUnavailable, KindNotReady, KindNotRouted, KindStrayUnavailable, KindTransport, KindWrong} {
		fmt.Fprintf(&b, " %s=%d", k, r.Kinds[k])
	}
	fmt.Fprintf(&b, "\nwrong answers: %d\n", r.Kinds[KindWrong])
	for _, e := range r.Examples {
		fmt.Fprintf(&b, "  e.g. %s\n", e)
	}
	return b.String()
}

// window is a span around a fault in which a call to service may get
// "unavailable".
type window struct {
	service  string
	from, to time.Time
}

// pending is an answer that is right only near a fault (kind: unavailable,
// not ready, not routed), judged after the run against the fault windows of
// service; away from every fault an "unavailable" counts as
// KindStrayUnavailable and anything else as KindWrong.
type pending struct {
	kind, service string
	start, end    time.Time
	example       string
}

// run is the state of one Run.
type run struct {
	cfg     Config
	gw      string // http://127.0.0.1:port of the data plane
	a, b, c *toolService
	portal  *portal
	client  *http.Client
	nextID  atomic.Int64
	began   time.Time // when the clients started

	mu       sync.Mutex
	kinds    map[string]int64
	lat      map[string][]time.Duration
	pending  []pending
	windows  []window
	examples []string
	perKind  map[string]int // examples kept per kind
}

// Run starts the Tool Services and the gateway, drives the load and the
// faults for cfg.Duration, stops everything and returns the report. An
// error means the run could not be set up; wrong answers are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = time.Minute
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 16
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	bin, err := filepath.Abs(cfg.Toolmesh) // the gateway runs in a directory of its own
	if err != nil {
		return nil, fmt.Errorf("toolmesh binary: %w", err)
	}
	cfg.Toolmesh = bin
	r := &run{cfg: cfg, kinds: map[string]int64{}, lat: map[string][]time.Duration{}}
	if r.a, err = newToolService("svc-a", "a_"); err != nil {
		return nil, err
	}
	defer r.a.stop()
	if r.b, err = newToolService("svc-b", "b_"); err != nil {
		return nil, err
	}
	defer r.b.stop()
	if r.c, err = newToolService("svc-c", "c_"); err != nil {
		return nil, err
	}
	defer r.c.stop()
	dir, err := os.MkdirTemp("", "toolmesh-loadfaults-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	r.portal = &portal{path: filepath.Join(dir, "portal.json"), a: r.a, b: r.b, c: r.c}
	if err := r.portal.write(0); err != nil {
		return nil, err
	}
	r.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 4 * cfg.Clients, MaxIdleConnsPerHost: 4 * cfg.Clients, IdleConnTimeout: 30 * time.Second,
	}}
	defer r.client.CloseIdleConnections()

	stop, err := r.startGateway(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := r.waitServing(ctx, 60*time.Second); err != nil {
		return nil, err
	}

	rep := &Report{Clients: cfg.Clients}
	began := time.Now()
	r.began = began
	deadline := began.Add(cfg.Duration)
	var wg sync.WaitGroup
	for w := range cfg.Clients {
		wg.Go(func() { r.client1(ctx, w, deadline) })
	}
	r.injectFaults(ctx, began, deadline, rep)
	wg.Wait()
	rep.Duration = time.Since(began)
	r.finish(rep)
	return rep, ctx.Err()
}

// startGateway runs `toolmesh run` on the Portal file with a short refresh
// interval and returns a func that stops it (SIGTERM, then kill).
func (r *run) startGateway(ctx context.Context, dir string) (func(), error) {
	ports := make([]string, 4)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().String()
		l.Close()
	}
	r.gw = "http://" + ports[0]
	cmd := exec.CommandContext(ctx, r.cfg.Toolmesh, "run",
		"--listen", ports[0], "--extproc-listen", ports[1], "--xds-listen", ports[2], "--admin-listen", ports[3],
		"--portal", r.portal.path, "--refresh-interval", "200ms", "--fetch-timeout", "300ms", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = r.cfg.Output, r.cfg.Output
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", r.cfg.Toolmesh, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}, nil
}

// waitServing waits until both routes of Portal version 0 list their tools.
func (r *run) waitServing(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		okA := r.listNames("alpha", legacy) == strings.Join(r.a.tools(), ",")
		okB := r.listNames("beta", legacy) == strings.Join(r.b.tools(), ",")
		if okA && okB {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: alpha and beta do not list their tools after %s", errNotReady, limit)
}

func (r *run) listNames(route string, era string) string {
	body, _, err := r.post(route, era, "tools/list", "", strconv.FormatInt(r.nextID.Add(1), 10), "")
	if err != nil {
		return ""
	}
	var resp rpcResponse
	if json.Unmarshal(body, &resp) != nil || resp.Result == nil {
		return ""
	}
	return strings.Join(resp.names(), ",")
}

// injectFaults runs the fault schedule until deadline: restarts of svc-a,
// Portal rewrites, and svc-b gaining and losing its extra tool, spread over
// the run and interleaved.
func (r *run) injectFaults(ctx context.Context, began, deadline time.Time, rep *Report) {
	d := deadline.Sub(began)
	nRestart := max(2, int(d/(12*time.Second)))
	nPortal := max(2, int(d/(10*time.Second)))
	down := min(time.Second, d/10)
	// How long after a fault an "unavailable" is still its doing: the
	// refresh interval and the xDS push for a Portal change, Envoy's
	// connection pool noticing the restarted listener for a restart.
	rep.RestartDown, rep.RestartGrace, rep.PortalGrace = down, 2*time.Second, 3*time.Second
	type event struct {
		at time.Duration
		do func()
	}
	var events []event
	for k := range nRestart {
		at := d*time.Duration(k)/time.Duration(nRestart) + d/time.Duration(5*nRestart)
		events = append(events, event{at, func() {
			from := time.Now()
			r.a.stop()
			fmt.Fprintf(r.cfg.Progress, "%6.2fs svc-a stopped\n", time.Since(began).Seconds())
			select {
			case <-ctx.Done():
			case <-time.After(down):
			}
			if err := r.a.start(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(r.cfg.Progress, "%v\n", err)
			}
			fmt.Fprintf(r.cfg.Progress, "%6.2fs svc-a started on %s\n", time.Since(began).Seconds(), r.a.addr)
			r.addWindow(window{service: "svc-a", from: from, to: time.Now().Add(rep.RestartGrace)})
			rep.Restarts++
		}})
	}
	for k := range nPortal {
		version := (k + 1) % 2
		at := d*time.Duration(k)/time.Duration(nPortal) + 3*d/time.Duration(5*nPortal)
		events = append(events, event{at, func() {
			now := time.Now()
			if err := r.portal.write(version); err != nil {
				fmt.Fprintf(r.cfg.Progress, "%v\n", err)
				return
			}
			// svc-c's cluster comes and goes with the Portal version.
			r.addWindow(window{service: "svc-c", from: now, to: now.Add(rep.PortalGrace)})
			fmt.Fprintf(r.cfg.Progress, "%6.2fs portal version %d\n", time.Since(began).Seconds(), version)
			rep.PortalChanges++
		}})
		events = append(events, event{at + d/time.Duration(4*nPortal), func() {
			on := !r.b.extra.Load()
			r.b.extra.Store(on)
			fmt.Fprintf(r.cfg.Progress, "%6.2fs svc-b extra tool listed: %v\n", time.Since(began).Seconds(), on)
			rep.ToolChanges++
		}})
	}
	slices.SortFunc(events, func(x, y event) int { return int(x.at - y.at) })
	for _, e := range events {
		at := began.Add(e.at)
		if !at.Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		e.do()
	}
}

func (r *run) addWindow(w window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows = append(r.windows, w)
}

// Protocol eras.
const (
	legacy    = "2025-11-25"
	stateless = "2026-07-28"
)

// client1 is one client: a random op, in a random era, until deadline.
func (r *run) client1(ctx context.Context, w int, deadline time.Time) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(w)))
	for ctx.Err() == nil && time.Now().Before(deadline) {
		era := legacy
		if rng.IntN(2) == 1 {
			era = stateless
		}
		id := strconv.FormatInt(r.nextID.Add(1), 10)
		if rng.IntN(3) == 0 {
			route := []string{"alpha", "beta", "gamma"}[rng.IntN(3)]
			r.checkList(route, era, id)
			continue
		}
		var c call
		switch rng.IntN(6) {
		case 0:
			c = call{route: "alpha", svc: r.a, tool: "add"}
		case 1:
			c = call{route: "alpha", svc: r.a, tool: "echo"}
		case 2:
			c = call{route: "beta", svc: r.b, tool: "echo"}
		case 3:
			c = call{route: "beta", svc: r.b, tool: "extra"}
		case 4:
			c = call{route: "alpha", svc: r.c, tool: "add"}
		default:
			c = call{route: "gamma", svc: r.c, tool: "echo"}
		}
		c.x, c.y, c.msg = rng.IntN(1_000_000), rng.IntN(1_000_000), "m"+strconv.FormatUint(rng.Uint64(), 36)
		r.checkCall(c, era, id)
	}
}

// call is one tools/call and what its answer must be.
type call struct {
	route string
	svc   *toolService
	tool  string
	x, y  int
	msg   string
}

func (c call) name() string { return c.svc.prefix + c.tool }

// want is the text the Tool Service answers.
func (c call) want() string {
	switch c.tool {
	case "add":
		return strconv.Itoa(c.x + c.y)
	case "extra":
		return "extra:" + c.msg
	}
	return c.msg
}

func (c call) args() string {
	if c.tool == "add" {
		return fmt.Sprintf(`{"a":%d,"b":%d}`, c.x, c.y)
	}
	return `{"message":"` + c.msg + `"}`
}

// mayBeUnknown: the tool is listed by some versions of the route only.
func (c call) mayBeUnknown() bool { return c.tool == "extra" || c.svc.name == "svc-c" }

func (r *run) checkCall(c call, era, id string) {
	start := time.Now()
	params := `"name":"` + c.name() + `","arguments":` + c.args() + `,`
	body, status, err := r.post(c.route, era, "tools/call", c.name(), id, params)
	end := time.Now()
	r.latency("call/"+era, end.Sub(start))
	what := fmt.Sprintf("%s tools/call %s on %s id %s", era, c.name(), c.route, id)
	if err != nil {
		r.record(KindTransport, what+": "+err.Error())
		return
	}
	resp, bad := parse(body, id)
	if bad != "" && (c.route == "gamma" || c.svc.name == "svc-c") {
		// The two answers that lose the id (not ready, not routed) are
		// judged by their fault window instead.
		if nr, _ := parse(body, "null"); nr != nil {
			resp, bad = nr, ""
		}
	}
	switch {
	case bad != "":
		r.record(KindWrong, fmt.Sprintf("%s: %s: HTTP %d %s", what, bad, status, clip(body)))
	case c.route == "gamma" && isNoRoute(resp, status, c.route):
		r.record(KindNoRoute, "")
	case c.route == "gamma" && isNotReady(resp, status):
		r.defer1(KindNotReady, c.svc.name, start, end, what+": "+clip(body))
	case isNotRouted(resp, status) && c.svc.name == "svc-c":
		r.defer1(KindNotRouted, c.svc.name, start, end, what+": "+clip(body))
	case resp.Error != nil && resp.Error.Code == -32602 && strings.Contains(resp.Error.Message, "unknown tool") && c.mayBeUnknown():
		r.record(KindUnknownTool, "")
	case resp.Result == nil:
		r.record(KindWrong, fmt.Sprintf("%s: no result: HTTP %d %s", what, status, clip(body)))
	case resp.Result.IsError && len(resp.Result.Content) == 1 &&
		strings.HasPrefix(resp.Result.Content[0].Text, "tool "+c.name()+" failed: unavailable"):
		r.defer1(KindUnavailable, c.svc.name, start, end, what+": "+clip(body))
	case resp.Result.IsError || len(resp.Result.Content) != 1 || resp.Result.Content[0].Text != c.want():
		r.record(KindWrong, fmt.Sprintf("%s: want text %q: %s", what, c.want(), clip(body)))
	case era == stateless && resp.Result.ResultType != "complete":
		r.record(KindWrong, fmt.Sprintf("%s: resultType %q, want complete: %s", what, resp.Result.ResultType, clip(body)))
	case c.tool == "add" && string(resp.Result.StructuredContent) != `{"sum":`+c.want()+`}`:
		r.record(KindWrong, fmt.Sprintf("%s: structuredContent %s, want sum %s", what, resp.Result.StructuredContent, c.want()))
	default:
		r.record(KindOK, "")
	}
}

// checkList checks a tools/list answer against every tool set some Portal
// and manifest version gives the route.
func (r *run) checkList(route, era, id string) {
	start := time.Now()
	body, status, err := r.post(route, era, "tools/list", "", id, "")
	end := time.Now()
	r.latency("list/"+era, end.Sub(start))
	what := fmt.Sprintf("%s tools/list on %s id %s", era, route, id)
	if err != nil {
		r.record(KindTransport, what+": "+err.Error())
		return
	}
	resp, bad := parse(body, id)
	if bad != "" && route == "gamma" {
		if nr, _ := parse(body, "null"); nr != nil && isNotReady(nr, status) {
			r.defer1(KindNotReady, "svc-c", start, end, what+": "+clip(body))
			return
		}
	}
	if bad != "" {
		r.record(KindWrong, fmt.Sprintf("%s: %s: HTTP %d %s", what, bad, status, clip(body)))
		return
	}
	if route == "gamma" && isNoRoute(resp, status, route) {
		r.record(KindNoRoute, "")
		return
	}
	if resp.Result == nil {
		r.record(KindWrong, fmt.Sprintf("%s: no result: HTTP %d %s", what, status, clip(body)))
		return
	}
	a, b, c := []string{"a_add", "a_echo"}, []string{"b_add", "b_echo"}, []string{"c_add", "c_echo"}
	var valid [][]string
	switch route {
	case "alpha":
		valid = [][]string{a, sorted(append(slices.Clone(a), c...))}
	case "beta":
		valid = [][]string{b, append(slices.Clone(b), "b_extra")}
	case "gamma":
		valid = [][]string{c}
	}
	got := resp.names()
	if !slices.ContainsFunc(valid, func(v []string) bool { return slices.Equal(v, got) }) {
		r.record(KindWrong, fmt.Sprintf("%s: tools %v, want one of %v", what, got, valid))
		return
	}
	if era == stateless && resp.Result.ResultType != "complete" {
		r.record(KindWrong, fmt.Sprintf("%s: resultType %q, want complete", what, resp.Result.ResultType))
		return
	}
	r.record(KindOK, "")
}

func sorted(s []string) []string { slices.Sort(s); return s }

// isNoRoute: the documented answer for a path that names no route (404,
// -32600 "no MCP route at PATH").
func isNoRoute(resp *rpcResponse, status int, route string) bool {
	return status == http.StatusNotFound && resp.Error != nil && resp.Error.Code == -32600 &&
		resp.Error.Message == "no MCP route at /mcp/"+route
}

// isNotReady: the answer for a listed route without a snapshot yet (503,
// -32603 "route not ready"; docs/metrics.md, outcome not_ready).
func isNotReady(resp *rpcResponse, status int) bool {
	return status == http.StatusServiceUnavailable && resp.Error != nil && resp.Error.Code == -32603 &&
		resp.Error.Message == "route not ready"
}

// isNotRouted: the data plane's catch-all 404 (xds/routes.go, notFoundBody),
// reached only when the extproc server did not answer.
func isNotRouted(resp *rpcResponse, status int) bool {
	return status == http.StatusNotFound && resp.Error != nil && resp.Error.Code == -32600 &&
		resp.Error.Message == "no MCP route at this path"
}

// defer1 keeps an answer that is right only near a fault of service.
func (r *run) defer1(kind, service string, start, end time.Time, example string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, pending{kind: kind, service: service, start: start, end: end, example: example})
}

func (r *run) record(kind, example string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[kind]++
	if example != "" {
		r.example(kind, kind+": "+example)
	}
}

// example keeps the first few examples of each kind (r.mu held).
func (r *run) example(kind, text string) {
	if r.perKind == nil {
		r.perKind = map[string]int{}
	}
	if r.perKind[kind] < 3 {
		r.perKind[kind]++
		r.examples = append(r.examples, text)
	}
}

func (r *run) latency(op string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat[op] = append(r.lat[op], d)
}

// finish judges the "unavailable" answers against the fault windows and
// fills the report.
func (r *run) finish(rep *Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pending {
		inWindow := slices.ContainsFunc(r.windows, func(w window) bool {
			return w.service == p.service && !p.end.Before(w.from) && !p.start.After(w.to)
		})
		kind := p.kind
		switch {
		case !inWindow && kind == KindUnavailable:
			kind = KindStrayUnavailable
		case !inWindow:
			kind = KindWrong
		}
		r.kinds[kind]++
		if kind != KindUnavailable && kind != KindNotReady {
			r.example(kind, fmt.Sprintf("%s at %.2fs: %s", kind, p.start.Sub(r.began).Seconds(), p.example))
		}
	}
	rep.Kinds = r.kinds
	rep.Examples = r.examples
	rep.Latency = map[string]Percentiles{}
	var all []time.Duration
	for op, ds := range r.lat {
		rep.Latency[op] = percentiles(ds)
		all = append(all, ds...)
		rep.Requests += int64(len(ds))
	}
	rep.Latency["all"] = percentiles(all)
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Percentiles{N: len(ds), P50: at(0.50), P99: at(0.99), Max: ds[len(ds)-1]}
}

// rpcResponse is the part of a JSON-RPC response the checks read.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		Tools   []struct{ Name string } `json:"tools"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
		ResultType        string          `json:"resultType"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r *rpcResponse) names() []string {
	var n []string
	for _, t := range r.Result.Tools {
		n = append(n, t.Name)
	}
	slices.Sort(n)
	return n
}

// parse decodes a JSON-RPC response and checks its frame: version, the
// request's id, exactly one of result and error.
func parse(body []byte, id string) (*rpcResponse, string) {
	var resp rpcResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, "not JSON: " + err.Error()
	}
	switch {
	case resp.JSONRPC != "2.0":
		return nil, "jsonrpc is not 2.0"
	case string(resp.ID) != id:
		return nil, fmt.Sprintf("id %s, want %s", resp.ID, id)
	case (resp.Result == nil) == (resp.Error == nil):
		return nil, "not exactly one of result and error"
	}
	return &resp, ""
}

// post sends one request in era and returns the JSON-RPC message of the
// answer (the last event of an event stream).
func (r *run) post(route, era, method, name, id, params string) ([]byte, int, error) {
	var body string
	if era == legacy {
		p := ""
		if params != "" {
			p = `,"params":{` + strings.TrimSuffix(params, ",") + `}`
		}
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"` + p + `}`
	} else {
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	}
	req, err := http.NewRequest(http.MethodPost, r.gw+"/mcp/"+route, strings.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json, text/event-stream")
	req.Header.Set("mcp-protocol-version", era)
	if era == stateless {
		req.Header.Set("mcp-method", method)
		if name != "" {
			req.Header.Set("mcp-name", name)
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				last = bytes.Clone(bytes.TrimSpace(d))
			}
		}
		b = last
	}
	return b, resp.StatusCode, nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
