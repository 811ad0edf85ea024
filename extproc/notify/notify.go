// Package notify serves toolmesh's change-notification streams
// (docs/decisions/0012-change-notification-streams.md): the server-sent
// event streams of a 2026-07-28 subscriptions/listen request and of a legacy
// GET on the MCP endpoint. Envoy's ext_proc filter cannot hold a long-lived
// response, so the extproc server routes such requests, like a tool call, to
// the cluster of this HTTP server (wire.NotificationsCluster); it runs
// in the extproc process and writes the streams itself.
//
// A stream sends notifications/tools/list_changed whenever its route's
// snapshot version changes, and prompts or resources list_changed when those
// lists changed, each only when the client opted into it. Changes come from
// one registry subscription (Source.Subscribe); the server turns each wake-up
// into a new generation, so the refresher never waits on a listener and a
// listener costs nothing until its route changes.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Defaults of Options' zero fields.
const (
	DefaultKeepAlive           = 15 * time.Second
	DefaultMaxStreams          = 10000
	DefaultMaxStreamsPerClient = 32
)

// Source is where routes and their snapshots come from: the registry.
type Source interface {
	// Subscribe returns a channel that receives a value (coalesced) when
	// any route or snapshot changed, and a func that ends the subscription.
	Subscribe() (<-chan struct{}, func())
	Routes() []registry.Route
	Snapshot(key string) *registry.Snapshot
}

// Options configure a Server.
type Options struct {
	// KeepAlive is the interval of the SSE comment written on an idle
	// stream, so intermediaries (Envoy's stream_idle_timeout, 5 minutes by
	// default) do not cut it. Zero means DefaultKeepAlive.
	KeepAlive time.Duration
	// MaxStreams bounds the open streams of this server; one more is 503.
	MaxStreams int
	// MaxStreamsPerClient bounds the open streams of one client: the
	// authenticated caller when the extproc server named one
	// (wire.CallerHeader), else the downstream address; one more is 429.
	MaxStreamsPerClient int
	Logger              *slog.Logger
	// Registerer takes the metrics; nil keeps them unexported.
	Registerer prometheus.Registerer
	// Upstreams, when set, lets a legacy GET stream carry what the
	// client's own upstream sessions' servers send outside a call
	// (follow.go); nil: list_changed only.
	Upstreams *Upstreams
}

// Server is the notifications HTTP handler. Run must be running for
// changes to reach streams.
type Server struct {
	src  Source
	opts Options
	log  *slog.Logger
	m    *metrics
	fol  *followers // nil: legacy clients' upstream sessions are not followed

	// routes is the per-route change state, replaced whole by scan; a
	// listener compares its route's generations with the ones it saw.
	routes  atomic.Pointer[map[string]*routeState]
	changed atomic.Pointer[chan struct{}] // closed (and replaced) at every scan
	scanMu  sync.Mutex                    // serializes scans

	mu        sync.Mutex // guards the counts below; taken at open and close only
	total     int
	perClient map[string]int
	draining  bool
	drain     chan struct{} // closed by Drain
	streams   sync.WaitGroup
}

// routeState is what a listener of a route compares: the snapshot version
// and a generation per list kind, raised when that list changed.
type routeState struct {
	snap                      *registry.Snapshot
	tools, prompts, resources uint64
}

// New returns a Server over src.
func New(src Source, opts Options) (*Server, error) {
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxStreamsPerClient <= 0 {
		opts.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	s := &Server{src: src, opts: opts, log: opts.Logger, m: m, fol: newFollowers(opts.Upstreams),
		perClient: make(map[string]int), drain: make(chan struct{})}
	empty := map[string]*routeState{}
	s.routes.Store(&empty)
	ch := make(chan struct{})
	s.changed.Store(&ch)
	return s, nil
}

// Run follows the source until ctx ends: every wake-up rescans the routes
// and wakes the listeners whose route changed.
func (s *Server) Run(ctx context.Context) {
	sub, unsubscribe := s.src.Subscribe()
	defer unsubscribe()
	s.scan()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub:
			s.scan()
		}
	}
}

// scan compares every route's snapshot with the last one seen, publishes
// the new state and then wakes every listener (closing the generation
// channel never blocks).
func (s *Server) scan() {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	old := *s.routes.Load()
	next := make(map[string]*routeState, len(old))
	for _, rt := range s.src.Routes() {
		snap := s.src.Snapshot(rt.Key)
		prev := old[rt.Key]
		switch {
		case prev == nil:
			next[rt.Key] = &routeState{snap: snap}
		case snap == nil || prev.snap == snap || (prev.snap != nil && prev.snap.Version == snap.Version):
			next[rt.Key] = prev
		default:
			st := *prev
			st.snap = snap
			st.tools++ // every version change: the tool list is what the version covers
			if prev.snap == nil || !sameItems(prev.snap.Prompts, snap.Prompts) {
				st.prompts++
			}
			if prev.snap == nil || !sameItems(prev.snap.Resources, snap.Resources) ||
				!sameItems(prev.snap.ResourceTemplates, snap.ResourceTemplates) {
				st.resources++
			}
			next[rt.Key] = &st
		}
	}
	s.routes.Store(&next)
	ch := make(chan struct{})
	old1 := s.changed.Swap(&ch)
	close(*old1)
}

// sameItems reports whether two item lists (sorted by key) are equal.
func sameItems(a, b []*registry.FederatedItem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Service != b[i].Service || !bytes.Equal(a[i].Raw, b[i].Raw) {
			return false
		}
	}
	return true
}

// route returns the route's state and the channel the next scan closes,
// read in that order so a change published after the read wakes the caller.
func (s *Server) route(key string) (*routeState, <-chan struct{}) {
	ch := *s.changed.Load()
	return (*s.routes.Load())[key], ch
}

// Listeners is the number of open streams.
func (s *Server) Listeners() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Drain ends every stream (a 2026-07-28 stream with its completion result,
// as a graceful end) and refuses new ones, then waits until the handlers
// returned or ctx ends. Call it before shutting the HTTP server down: an
// open stream would otherwise hold http.Server.Shutdown until its deadline.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		close(s.drain)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("notify: %d streams still open: %w", s.Listeners(), ctx.Err())
	}
}

// Stream kinds, as the extproc server lists them in wire.NotifyHeader.
const (
	KindTools     = wire.NotifyTools
	KindPrompts   = wire.NotifyPrompts
	KindResources = wire.NotifyResources
)

// stream is one open change-notification stream.
type stream struct {
	route                     string
	id                        []byte // subscription id (JSON); nil: legacy GET stream
	tools, prompts, resources bool
	w                         http.ResponseWriter
	rc                        *http.ResponseController
	buf                       []byte
	// up carries the followed servers' notifications (follow.go); upGone
	// is closed when one of their streams ended for good. Both nil when
	// nothing is followed.
	up        chan upMsg
	upGone    chan struct{}
	followers sync.WaitGroup
}

// ServeHTTP serves one stream on wire.NotificationsPath.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wire.NotificationsPath {
		writeError(w, http.StatusNotFound, nil, "no notifications endpoint at this path")
		return
	}
	st := &stream{route: r.Header.Get(wire.RouteHeader), w: w, rc: http.NewResponseController(w)}
	if v := r.Header.Get(wire.SubscriptionHeader); v != "" {
		if !validID(v) {
			writeError(w, http.StatusBadRequest, nil, "invalid subscription id")
			return
		}
		st.id = []byte(v)
	}
	for k := range strings.SplitSeq(r.Header.Get(wire.NotifyHeader), ",") {
		switch strings.TrimSpace(k) {
		case KindTools:
			st.tools = true
		case KindPrompts:
			st.prompts = true
		case KindResources:
			st.resources = true
		}
	}
	rs, _ := s.route(st.route)
	if rs == nil && st.route != "" && s.src.Snapshot(st.route) != nil {
		s.scan() // a route this server has not scanned yet
		rs, _ = s.route(st.route)
	}
	if rs == nil || rs.snap == nil {
		s.m.rejected.WithLabelValues(rejectNoRoute).Inc()
		writeError(w, http.StatusNotFound, st.id, "no route "+strconv.Quote(st.route)+" with a snapshot on this replica")
		return
	}
	client := clientKey(r)
	if status, reason, msg := s.admit(client); status != 0 {
		s.m.rejected.WithLabelValues(reason).Inc()
		w.Header().Set("retry-after", "1")
		writeError(w, status, st.id, msg)
		return
	}
	defer s.release(client)
	era := mcp.EraLegacy.Label()
	if st.id != nil {
		era = mcp.EraStateless.Label()
	}
	g := s.m.listeners.WithLabelValues(era)
	g.Inc()
	defer g.Dec()
	ctx := r.Context()
	if t := followTicket(r); t != "" && st.id == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer s.unfollow(st, cancel)
		s.follow(ctx, st, t)
	}
	s.serve(ctx, st, rs)
}

// admit counts a new stream of client, or says why it is refused.
func (s *Server) admit(client string) (status int, reason, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return http.StatusServiceUnavailable, rejectDraining, "the gateway is shutting down; open the stream again"
	case s.total >= s.opts.MaxStreams:
		return http.StatusServiceUnavailable, rejectTotal,
			"too many notification streams on this replica (notificationsMaxStreams " + strconv.Itoa(s.opts.MaxStreams) + ")"
	case s.perClient[client] >= s.opts.MaxStreamsPerClient:
		return http.StatusTooManyRequests, rejectClient,
			"too many notification streams for this client (notificationsMaxStreamsPerClient " + strconv.Itoa(s.opts.MaxStreamsPerClient) + ")"
	}
	s.total++
	s.perClient[client]++
	s.streams.Add(1)
	return 0, "", ""
}

func (s *Server) release(client string) {
	s.mu.Lock()
	s.total--
	if s.perClient[client]--; s.perClient[client] <= 0 {
		delete(s.perClient, client)
	}
	s.mu.Unlock()
	s.streams.Done()
}

// serve writes the stream until the client goes, a write fails, or Drain.
func (s *Server) serve(ctx context.Context, st *stream, seen *routeState) {
	h := st.w.Header()
	h.Set("content-type", "text/event-stream")
	h.Set("cache-control", "no-cache")
	// Streamable HTTP: reverse proxies such as nginx must not buffer events.
	h.Set("x-accel-buffering", "no")
	st.w.WriteHeader(http.StatusOK)
	if st.id != nil {
		if !st.send(st.acknowledged()) {
			return
		}
	} else if !st.flush() {
		return
	}
	tick := time.NewTicker(s.opts.KeepAlive)
	defer tick.Stop()
	for {
		cur, changed := s.route(st.route)
		if cur != nil && cur != seen {
			ok := true
			if st.tools && cur.tools != seen.tools {
				ok = s.notify(st, KindTools)
			}
			if ok && st.prompts && cur.prompts != seen.prompts {
				ok = s.notify(st, KindPrompts)
			}
			if ok && st.resources && cur.resources != seen.resources {
				ok = s.notify(st, KindResources)
			}
			if !ok {
				return
			}
			seen = cur
		}
		select {
		case <-ctx.Done():
			return
		case <-s.drain:
			if st.id != nil {
				st.send(st.completed())
			}
			return
		case <-tick.C:
			// An SSE comment: clients ignore it, intermediaries see traffic.
			st.buf = append(st.buf[:0], ":\n\n"...)
			if !st.write() {
				return
			}
		case <-changed:
		case m := <-st.up:
			s.fol.took(m)
			if !st.send(m.msg) {
				return
			}
			s.m.sent.WithLabelValues(m.kind).Inc()
		case <-st.upGone:
			return // the client opens its stream again, with a new ticket
		}
	}
}

func (s *Server) notify(st *stream, kind string) bool {
	if !st.send(st.listChanged(kind)) {
		return false
	}
	s.m.sent.WithLabelValues(kind).Inc()
	return true
}

// send writes one JSON-RPC message as an SSE event and flushes it.
func (st *stream) send(msg []byte) bool {
	st.buf = append(append(append(st.buf[:0], "event: message\ndata: "...), msg...), "\n\n"...)
	return st.write()
}

func (st *stream) write() bool {
	if _, err := st.w.Write(st.buf); err != nil {
		return false
	}
	return st.flush()
}

func (st *stream) flush() bool { return st.rc.Flush() == nil }

// metaID is the _meta object naming the subscription.
func (st *stream) metaID(b []byte) []byte {
	b = append(b, `"_meta":{"io.modelcontextprotocol/subscriptionId":`...)
	b = append(b, st.id...)
	return append(b, '}')
}

// acknowledged is notifications/subscriptions/acknowledged with the filter
// the server honours (basic/patterns/subscriptions, "Acknowledgment").
func (st *stream) acknowledged() []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{`)
	b = st.metaID(b)
	b = append(b, `,"notifications":{`...)
	sep := ""
	for _, f := range []struct {
		on   bool
		name string
	}{{st.tools, "toolsListChanged"}, {st.prompts, "promptsListChanged"}, {st.resources, "resourcesListChanged"}} {
		if f.on {
			b = append(b, sep+`"`+f.name+`":true`...)
			sep = ","
		}
	}
	return append(b, "}}}"...)
}

// listChanged is notifications/{kind}/list_changed, tagged with the
// subscription id on a 2026-07-28 stream.
func (st *stream) listChanged(kind string) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/` + kind + `/list_changed"`)
	if st.id != nil {
		b = append(b, `,"params":{`...)
		b = st.metaID(b)
		b = append(b, '}')
	}
	return append(b, '}')
}

// completed is the response to subscriptions/listen that ends a stream
// gracefully ("Graceful Closure").
func (st *stream) completed() []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, st.id...)
	b = append(b, `,"result":{"resultType":"complete",`...)
	b = st.metaID(b)
	return append(b, "}}"...)
}

// validID accepts a JSON string or number, the id types JSON-RPC allows
// for a request (the extproc server copied it from a checked request).
func validID(v string) bool {
	if !json.Valid([]byte(v)) {
		return false
	}
	c := v[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// clientKey is who a stream is counted against: the authenticated caller
// the extproc server named, else the downstream address Envoy appended to
// x-forwarded-for (use_remote_address), else the peer of this connection.
func clientKey(r *http.Request) string {
	if c := r.Header.Get(wire.CallerHeader); c != "" {
		return "caller:" + c
	}
	if xff := r.Header.Values("x-forwarded-for"); len(xff) > 0 {
		last := xff[len(xff)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		if a := strings.TrimSpace(last); a != "" {
			return "addr:" + a
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// writeError answers with a JSON-RPC error (id null for a legacy stream).
func writeError(w http.ResponseWriter, status int, id []byte, msg string) {
	if id == nil {
		id = []byte("null")
	}
	m, _ := json.Marshal(msg)
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":%s}}`, id, m)
}
