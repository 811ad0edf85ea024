package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// A legacy client with upstream sessions of its own (ADR 0022) hears, on
// its GET stream, what those servers send outside a call
// (docs/decisions/0025-legacy-get-stream.md): the extproc server that took
// the GET seals a follow ticket (extproc/session) with each session and
// its headers; this server, on any replica, opens it and holds one GET
// stream per session upstream, for as long as the client's stream lives.

// Defaults of Upstreams' zero fields.
const (
	DefaultMaxUpstreamStreams = 10000
	DefaultUpstreamQueue      = 16
	DefaultMaxEventBytes      = 64 << 10
	DefaultMaxQueuedBytes     = 64 << 20
	// DefaultRelistInterval is the shortest time between two re-listings
	// of one route that servers' list_changed notifications ask for.
	DefaultRelistInterval = time.Second
)

// Upstreams configures following legacy clients' upstream sessions.
type Upstreams struct {
	// Keys are the current session keys, which open follow tickets
	// (reloaded on SIGHUP: a func).
	Keys func() *session.Keys
	// Client opens the GET streams upstream.
	Client *upstream.Client
	// MaxStreams bounds the upstream streams this server holds; past it a
	// client's stream carries the gateway's list_changed only (logged,
	// counted). Zero: DefaultMaxUpstreamStreams.
	MaxStreams int
	// Queue bounds the server messages that wait for one client stream;
	// past it they are dropped (counted): a slow client does not hold the
	// server's stream or memory. Zero: DefaultUpstreamQueue.
	Queue int
	// MaxEventBytes bounds one event of an upstream stream; a larger one
	// ends that stream. Zero: DefaultMaxEventBytes.
	MaxEventBytes int
	// MaxQueuedBytes bounds the bytes waiting in all streams' queues
	// together; past it messages are dropped (counted). Zero:
	// DefaultMaxQueuedBytes.
	MaxQueuedBytes int64
	// Relist, when set, re-lists a route now: a server's list_changed
	// asks for it, at most once per RelistInterval per route, and the
	// gateway's own list_changed then follows from the new snapshot.
	Relist         func(ctx context.Context, route string) error
	RelistInterval time.Duration
}

// upMsg is a followed server's notification, with its metric label.
type upMsg struct {
	kind string
	msg  []byte
}

// followers is the state of following upstreams, shared by the streams.
type followers struct {
	Upstreams
	open   atomic.Int64 // upstream streams
	queued atomic.Int64 // bytes in the streams' queues
	relist sync.Map     // route → *atomic.Int64 (unix nanoseconds of the last re-list)
}

func newFollowers(u *Upstreams) *followers {
	if u == nil || u.Keys == nil || u.Client == nil {
		return nil
	}
	f := &followers{Upstreams: *u}
	if f.MaxStreams <= 0 {
		f.MaxStreams = DefaultMaxUpstreamStreams
	}
	if f.Queue <= 0 {
		f.Queue = DefaultUpstreamQueue
	}
	if f.MaxEventBytes <= 0 {
		f.MaxEventBytes = DefaultMaxEventBytes
	}
	if f.MaxQueuedBytes <= 0 {
		f.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if f.RelistInterval <= 0 {
		f.RelistInterval = DefaultRelistInterval
	}
	return f
}

// follow starts following the ticket's upstream sessions for st until ctx
// ends. Their messages arrive on st.up; st.upGone is closed when one of
// them ended for good, so the client re-opens its stream (and gets a new
// ticket, with fresh credentials) or initializes again.
func (s *Server) follow(ctx context.Context, st *stream, ticket string) {
	f := s.fol
	if f == nil {
		return
	}
	keys := f.Keys()
	if keys == nil {
		return
	}
	t, err := keys.OpenFollow(ticket, st.route)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "GET stream: the follow ticket does not open; the client's servers are not followed",
			slog.String("route", st.route), slog.String("error", err.Error()))
		return
	}
	st.up = make(chan upMsg, f.Queue)
	st.upGone = make(chan struct{})
	var once sync.Once
	gone := func() { once.Do(func() { close(st.upGone) }) }
	for _, u := range t.Upstreams {
		if f.open.Add(1) > int64(f.MaxStreams) {
			f.open.Add(-1)
			s.m.rejected.WithLabelValues(rejectUpstream).Inc()
			s.log.LogAttrs(ctx, slog.LevelWarn, "GET stream: too many upstream streams; a server is not followed",
				slog.String("route", st.route), slog.String("service", u.Service), slog.Int("max", f.MaxStreams))
			continue
		}
		st.followers.Go(func() {
			defer f.open.Add(-1)
			if s.followOne(ctx, st, u) {
				gone()
			}
		})
	}
}

// followOne holds the GET stream of one upstream session and passes its
// server notifications to st; it reports whether the stream ended for
// good while the client's stream lives (not for a server that offers no
// GET stream, which is only never followed).
func (s *Server) followOne(ctx context.Context, st *stream, u session.FollowUpstream) bool {
	f := s.fol
	snap := s.src.Snapshot(st.route)
	if snap == nil {
		return false
	}
	svc, _, ok := snap.MCPService(u.Service)
	if !ok {
		return false
	}
	h := http.Header{}
	for k, v := range u.Headers {
		h.Set(k, v)
	}
	h.Set(mcp.HeaderProtocolVersion, u.Version)
	h.Set(mcp.HeaderSessionID, u.Session)
	if svc.AllowSameOriginRedirects {
		ctx = upstream.AllowSameOriginRedirects(ctx)
	}
	s.m.upstreams.Inc()
	defer s.m.upstreams.Dec()
	err := f.Client.Listen(ctx, svc.URL, h, f.MaxEventBytes, func(msg []byte) bool {
		s.pass(ctx, st, u.Service, msg)
		return true
	})
	switch {
	case ctx.Err() != nil:
		return false
	case errors.Is(err, upstream.ErrNoStream):
		s.log.LogAttrs(ctx, slog.LevelDebug, "GET stream: the server offers none", slog.String("route", st.route), slog.String("service", u.Service))
		return false
	case err != nil:
		s.log.LogAttrs(ctx, slog.LevelInfo, "GET stream: a server's stream ended", slog.String("route", st.route),
			slog.String("service", u.Service), slog.String("error", err.Error()))
	}
	return true
}

// pass queues one message of service's stream for st, when it is a
// notification the client may see: resources/updated of a URI this
// service serves on the route (a server cannot speak for another's
// resources), or a log message. A server's list_changed re-lists the
// route instead: the gateway's own list_changed follows from the new
// snapshot, which is what the client's next list returns.
func (s *Server) pass(ctx context.Context, st *stream, service string, msg []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			URI string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil || m.ID != nil {
		return // a request of the server's (sampling ...) needs a call's stream, not this one
	}
	kind := ""
	switch m.Method {
	case "notifications/resources/updated":
		snap := s.src.Snapshot(st.route)
		if snap == nil {
			return
		}
		if it, ambiguous := snap.ResourceOwner(m.Params.URI); it == nil || ambiguous || it.Service != service {
			return
		}
		kind = kindUpdated
	case "notifications/message":
		kind = kindLog
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		s.relist(ctx, st.route)
		return
	default:
		return
	}
	// Compact: a server's line breaks between tokens would end the SSE
	// data line and let it write fields of its own.
	var b bytes.Buffer
	if json.Compact(&b, msg) != nil {
		return
	}
	n := int64(b.Len())
	if s.fol.queued.Add(n) > s.fol.MaxQueuedBytes {
		s.fol.queued.Add(-n)
		s.m.dropped.WithLabelValues(kind).Inc()
		return
	}
	select {
	case st.up <- upMsg{kind: kind, msg: b.Bytes()}:
	default:
		s.fol.queued.Add(-n)
		s.m.dropped.WithLabelValues(kind).Inc()
	}
}

// unfollow ends st's upstream streams (cancel) and, once they returned,
// gives back what its queue held.
func (s *Server) unfollow(st *stream, cancel context.CancelFunc) {
	cancel()
	st.followers.Wait()
	for {
		select {
		case m := <-st.up:
			s.fol.took(m)
		default:
			return
		}
	}
}

// took notes that a queued message left its queue.
func (f *followers) took(m upMsg) { f.queued.Add(-int64(len(m.msg))) }

// relist re-lists route in the background, at most once per
// RelistInterval.
func (s *Server) relist(ctx context.Context, route string) {
	f := s.fol
	if f.Relist == nil {
		return
	}
	v, _ := f.relist.LoadOrStore(route, new(atomic.Int64))
	last := v.(*atomic.Int64)
	now, prev := time.Now().UnixNano(), last.Load()
	if now-prev < int64(f.RelistInterval) || !last.CompareAndSwap(prev, now) {
		return
	}
	go func() {
		// The stream's ctx may end first; the re-listing is the route's.
		if err := f.Relist(context.WithoutCancel(ctx), route); err != nil {
			s.log.LogAttrs(ctx, slog.LevelInfo, "re-listing after a server's list_changed failed", slog.String("route", route), slog.String("error", err.Error()))
		}
	}()
}

// followTicket is the follow ticket of a legacy stream request.
func followTicket(r *http.Request) string { return r.Header.Get(wire.FollowHeader) }
