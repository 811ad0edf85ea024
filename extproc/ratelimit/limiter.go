package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

// Call is what a limit keys on: data the gateway has once the call is
// authenticated and its tool resolved.
type Call struct {
	Route       string
	Tool        string
	Annotations json.RawMessage // the tool's annotations object as listed
	Caller      *identity.Caller
	Address     string // the client address (the downstream peer)
}

// Decision kinds, the decision label of toolmesh_ratelimit_decisions_total.
const (
	DecisionAllowed     = "allowed"
	DecisionLimited     = "limited"     // a rate (local or global) refused
	DecisionConcurrency = "concurrency" // too many in flight
	DecisionRLSAllowed  = "rls_error_allowed"
	DecisionRLSDenied   = "rls_error_denied"
)

// Decision is the outcome of Check. A refused call carries what the client
// is told.
type Decision struct {
	Allowed bool
	Kind    string // a Decision* value
	Limit   string // the refusing limit's name
	Global  bool
	// RetryAfter is when a retry may be admitted.
	RetryAfter time.Duration
	// Quota per Window is the refusing limit's policy (0 when unknown, as
	// for a concurrency limit); Reset is when its quota is whole again.
	Quota  int64
	Window time.Duration
	Reset  time.Duration
}

// Permit holds the in-flight slots a call took; Release returns them when
// the call ends (its ext_proc stream ends). The zero Permit holds nothing.
type Permit struct {
	held  [4]*bucket
	more  []*bucket
	count int
}

func (p *Permit) add(b *bucket) {
	if p.count < len(p.held) {
		p.held[p.count] = b
	} else {
		p.more = append(p.more, b)
	}
	p.count++
}

// Release returns the slots; a second Release does nothing.
func (p *Permit) Release() {
	for i := 0; i < p.count; i++ {
		if i < len(p.held) {
			p.held[i].inflight.Add(-1)
			p.held[i] = nil
		} else {
			p.more[i-len(p.held)].inflight.Add(-1)
		}
	}
	p.count, p.more = 0, nil
}

// limit is one compiled entry.
type limit struct {
	name        string
	scope       string // route key, or "" for a default limit
	tools       []string
	annotations []string
	by          []string
	rate        *rate
	concurrency int64
	global      bool
	table       *table // nil for a global limit without concurrency
	sig         string // what must be equal for a reload to keep the table
}

// Limiter checks calls against the configured limits. It is immutable;
// SIGHUP builds a new one (New with the one in force as old).
type Limiter struct {
	def    []*limit
	routes map[string][]*limit
	all    []*limit
	plans  sync.Map // route → *plan
	nplans atomic.Int64
	rls    *rlsClient
	m      *Metrics
	log    *slog.Logger
	seed   maphash.Seed
}

// maxPlans bounds the per-route caches; past it, a route's plan is built
// per call (routes come from the Portal, so this is far above real use).
const maxPlans = 10000

// New compiles cfg. old is the Limiter in force (or nil): a limit with the
// same route, name and parameters keeps its counters and in-flight calls,
// and an RLS client to the same address is reused. m may be nil.
func New(cfg *Config, old *Limiter, m *Metrics, log *slog.Logger) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{routes: map[string][]*limit{}, m: m, log: log, seed: maphash.MakeSeed()}
	if old != nil {
		l.seed = old.seed // the same keys hash alike, so inherited tables stay valid
	}
	if cfg == nil {
		return l, nil
	}
	maxKeys := cfg.MaxKeys
	if maxKeys == 0 {
		maxKeys = defaultMaxKeys
	}
	inherit := map[string]*table{}
	if old != nil {
		for _, o := range old.all {
			if o.table != nil {
				inherit[o.sig] = o.table
			}
		}
	}
	compile := func(scope string, ls []Limit) []*limit {
		out := make([]*limit, 0, len(ls))
		for _, c := range ls {
			x := &limit{name: c.Name, scope: scope, tools: c.Tools, annotations: c.Annotations, by: c.By,
				concurrency: c.Concurrency, global: c.Global}
			if c.Requests > 0 && !c.Global {
				w := units[c.Per]
				burst := c.Burst
				if burst == 0 {
					burst = c.Requests
				}
				iv := int64(w) / c.Requests
				x.rate = &rate{interval: iv, tau: iv * burst, requests: c.Requests, window: w}
			}
			x.sig = fmt.Sprintf("%s\x00%s\x00%q\x00%q\x00%q\x00%d/%s/%d\x00%d\x00%d", scope, c.Name, c.Tools, c.Annotations,
				c.By, c.Requests, c.Per, c.Burst, c.Concurrency, maxKeys)
			if x.rate != nil || x.concurrency > 0 {
				if t := inherit[x.sig]; t != nil {
					x.table = t
				} else {
					x.table = newTable(maxKeys)
				}
			}
			out = append(out, x)
			l.all = append(l.all, x)
		}
		return out
	}
	l.def = compile("", cfg.Default)
	for route, ls := range cfg.Routes {
		l.routes[route] = compile(route, ls)
	}
	if cfg.RLS != nil {
		var reuse *rlsClient
		if old != nil && old.rls != nil && old.rls.addr == cfg.RLS.Address {
			reuse = old.rls
		}
		c, err := newRLSClient(cfg.RLS, reuse, m, log)
		if err != nil {
			return nil, fmt.Errorf("rateLimits.rls.address: %w", err)
		}
		l.rls = c
	}
	return l, nil
}

// Close closes the RLS connection unless next (the Limiter replacing l)
// reuses it.
func (l *Limiter) Close(next *Limiter) {
	if l == nil || l.rls == nil || (next != nil && next.rls != nil && next.rls.conn == l.rls.conn) {
		return
	}
	l.rls.close()
}

// plan is a route's limits with the tools they select, cached per tool.
type plan struct {
	route  string
	limits []*limit
	tools  atomic.Pointer[map[string]toolPlan]
	ntools atomic.Int64
}

type toolPlan struct {
	annotations string // the annotations the selection was made for
	idx         []int  // the limits that apply, in order
	global      bool   // one of them is global
}

const maxToolPlans = 10000

func (l *Limiter) planFor(route string) *plan {
	if p, ok := l.plans.Load(route); ok {
		return p.(*plan)
	}
	ls, ok := l.routes[route]
	if !ok {
		ls = l.def
	}
	p := &plan{route: route, limits: ls}
	m := map[string]toolPlan{}
	p.tools.Store(&m)
	if l.nplans.Load() < maxPlans {
		if q, loaded := l.plans.LoadOrStore(route, p); loaded {
			return q.(*plan)
		}
		l.nplans.Add(1)
	}
	return p
}

func (p *plan) forTool(name string, ann json.RawMessage) toolPlan {
	mp := p.tools.Load()
	m := *mp
	if tp, ok := m[name]; ok && tp.annotations == string(ann) {
		return tp
	}
	tp := toolPlan{annotations: string(ann)}
	var set map[string]bool
	for i, x := range p.limits {
		if x.selects(name, ann, &set) {
			tp.idx = append(tp.idx, i)
			tp.global = tp.global || x.global
		}
	}
	if p.ntools.Load() < maxToolPlans {
		// Copy on write: readers never lock. A lost race only means the
		// plan is computed again.
		n := make(map[string]toolPlan, len(m)+1)
		for k, v := range m {
			n[k] = v
		}
		n[name] = tp
		if p.tools.CompareAndSwap(mp, &n) {
			p.ntools.Store(int64(len(n)))
		}
	}
	return tp
}

// selects reports whether the limit counts calls of the tool. set caches
// the tool's true annotations across the limits of one plan.
func (x *limit) selects(name string, ann json.RawMessage, set *map[string]bool) bool {
	if len(x.tools) == 0 && len(x.annotations) == 0 {
		return true
	}
	for _, p := range x.tools {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	if len(x.annotations) == 0 || len(ann) == 0 {
		return false
	}
	if *set == nil {
		*set = map[string]bool{}
		var m map[string]any
		if json.Unmarshal(ann, &m) == nil {
			for k, v := range m {
				if b, ok := v.(bool); ok && b {
					(*set)[k] = true
				}
			}
		}
	}
	for _, a := range x.annotations {
		if (*set)[a] {
			return true
		}
	}
	return false
}

// Check decides a call: local limits in their configured order, then the
// global ones in one RLS request. An allowed call's Permit must be released
// when the call ends; a refused call holds nothing.
func (l *Limiter) Check(ctx context.Context, c *Call) (Decision, Permit) {
	var permit Permit
	if l == nil || (len(l.all) == 0) {
		return Decision{Allowed: true, Kind: DecisionAllowed}, permit
	}
	p := l.planFor(c.Route)
	tp := p.forTool(c.Tool, c.Annotations)
	if len(tp.idx) == 0 {
		return Decision{Allowed: true, Kind: DecisionAllowed}, permit
	}
	now := time.Now().UnixNano()
	for _, i := range tp.idx {
		x := p.limits[i]
		if x.table == nil {
			continue
		}
		h := l.hash(x, c)
		var d Decision
		x.table.with(h, now, func(b *bucket) {
			if x.concurrency > 0 {
				if b.inflight.Add(1) > x.concurrency {
					b.inflight.Add(-1)
					d = Decision{Kind: DecisionConcurrency, Limit: x.name, RetryAfter: time.Second}
					return
				}
			}
			if x.rate != nil {
				ok, wait, _, reset := x.rate.take(b, now)
				if !ok {
					if x.concurrency > 0 {
						b.inflight.Add(-1)
					}
					d = Decision{Kind: DecisionLimited, Limit: x.name, RetryAfter: wait,
						Quota: x.rate.requests, Window: x.rate.window, Reset: reset}
					return
				}
			}
			if x.concurrency > 0 {
				permit.add(b)
			}
			d.Allowed = true
		})
		if !d.Allowed {
			permit.Release()
			l.m.count(p.route, x.name, d.Kind)
			return d, Permit{}
		}
	}
	if tp.global && l.rls != nil {
		d := l.rls.check(ctx, p, tp, c, l)
		if !d.Allowed {
			permit.Release()
			l.m.count(p.route, d.Limit, d.Kind)
			return d, Permit{}
		}
		if d.Kind == DecisionRLSAllowed {
			l.m.count(p.route, "", d.Kind)
		}
	}
	l.m.allowed(p.route)
	return Decision{Allowed: true, Kind: DecisionAllowed}, permit
}

// hash is the key of c under x: the route and the values of x.By.
func (l *Limiter) hash(x *limit, c *Call) uint64 {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(c.Route)
	for _, b := range x.by {
		h.WriteByte(0)
		if b != ByCaller {
			h.WriteString(keyPart(b, c))
			continue
		}
		// keyPart's caller key without building the string.
		switch {
		case c.Caller != nil && c.Caller.Authenticated:
			h.WriteString("sub:")
			h.WriteString(c.Caller.Issuer)
			h.WriteByte('#')
			h.WriteString(c.Caller.Subject)
		case c.Caller != nil && c.Caller.MeshID != "":
			h.WriteString("mesh:")
			h.WriteString(c.Caller.MeshID)
		default:
			h.WriteString("addr:")
			h.WriteString(c.Address)
		}
	}
	return h.Sum64()
}

// keyPart is the value of one By part for c.
func keyPart(by string, c *Call) string {
	switch by {
	case ByTool:
		return c.Tool
	case ByAddress:
		return c.Address
	case ByMesh:
		if c.Caller == nil {
			return ""
		}
		return c.Caller.MeshID
	case ByCaller:
		switch {
		case c.Caller != nil && c.Caller.Authenticated:
			return "sub:" + c.Caller.Issuer + "#" + c.Caller.Subject
		case c.Caller != nil && c.Caller.MeshID != "":
			return "mesh:" + c.Caller.MeshID
		default:
			return "addr:" + c.Address
		}
	}
	if name, ok := strings.CutPrefix(by, byClaim); ok && c.Caller != nil {
		switch v := c.Caller.Claims[name].(type) {
		case string:
			return v
		case nil:
			return ""
		default:
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	return ""
}

// InForce describes the limits in force, for the console: one row per
// limit and route scope ("" for the default).
type InForce struct {
	Scope       string `json:"scope"` // route key; "" for rateLimits.default
	Name        string `json:"name"`
	Tools       string `json:"tools"` // patterns and annotations, "*" for every tool
	By          string `json:"by"`
	Rate        string `json:"rate,omitempty"`
	Concurrency int64  `json:"concurrency,omitempty"`
	Global      bool   `json:"global,omitempty"`
	Keys        int    `json:"keys"` // keys the local limit holds in this process
}

// InForce lists the limits, defaults first, then routes by key.
func (l *Limiter) InForce() []InForce {
	if l == nil {
		return nil
	}
	all := slices.Clone(l.all)
	slices.SortStableFunc(all, func(a, b *limit) int { return strings.Compare(a.scope, b.scope) })
	var out []InForce
	for _, x := range all {
		out = append(out, x.inForce())
	}
	return out
}

// Route lists the limits in force on route (its own entry, else the
// default) in configured order; empty, never nil, when it has none.
func (l *Limiter) Route(route string) []InForce {
	out := []InForce{}
	if l == nil {
		return out
	}
	ls, ok := l.routes[route]
	if !ok {
		ls = l.def
	}
	for _, x := range ls {
		out = append(out, x.inForce())
	}
	return out
}

func (x *limit) inForce() InForce {
	r := InForce{Scope: x.scope, Name: x.name, By: strings.Join(x.by, ","), Concurrency: x.concurrency, Global: x.global}
	sel := append(append([]string{}, x.tools...), x.annotations...)
	r.Tools = strings.Join(sel, ",")
	if r.Tools == "" {
		r.Tools = "*"
	}
	if x.rate != nil {
		r.Rate = fmt.Sprintf("%d per %s, burst %d", x.rate.requests, x.rate.window, x.rate.tau/x.rate.interval)
	}
	if x.table != nil {
		r.Keys = x.table.keys()
	}
	return r
}
