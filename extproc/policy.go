package extproc

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Authorization (docs/authorization.md): one decision of the route's
// policies (package authz) governs both what a caller may call, read or get
// and what it is listed. A tool the caller may not call is not in its
// tools/list pages or search_tools shortlists, and calling it is answered
// exactly as an unknown tool is: the request goes through the same
// catalog, whose Resolve says ToolUnknown. A tool the caller sees but may
// not call with these arguments (a policy that reads args) gets an isError
// result naming the policy. Hidden resources and prompts are "not found".
//
// Listing a large route per caller stays a copy of pre-encoded pages: the
// filtered catalog (policyView) is computed once per snapshot, filter
// chain, policy set and policy-relevant identity (authz.Route.Key: only the
// caller attributes the route's policies read), and kept in a bounded cache
// per route. Its pages are cut from the visible tools alone, with cursors
// naming only the last tool the caller saw, so neither page sizes nor
// cursors tell hidden tools apart from absent ones.

// The filtered catalogs kept per route, one per distinct policy-relevant
// identity (e.g. per set of roles), not per token, are bounded in number
// and in the bytes of their pages (a view of a 10,000-tool route holds a
// copy of its visible part of the list, about 2 MB).
const (
	maxPolicyViews     = 256
	maxPolicyViewBytes = 64 << 20
)

// policyMethods are the methods with authorization decisions, the method
// label of toolmesh_authz_decisions_total.
var policyMethods = map[string]bool{
	"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true,
	"tools/list": true, "resources/list": true, "resources/templates/list": true, "prompts/list": true,
}

// Decision label of a list request that hid something from the caller.
const decisionFiltered = "filtered"

// policyState is one request's authorization state, on its request.
type policyState struct {
	started bool
	route   *authz.Route
	caller  *authz.Caller // prepared once per request
	view    *policyView   // the caller's view of the route, once needed

	// What the request's catalog saw: a hidden tool resolved (a call of
	// it is answered as unknown), lists served.
	hidden     string
	hiddenDec  policyMark
	listed     bool
	searched   bool // the list was a search_tools shortlist
	listHidden int
}

// policyMark is why a subject is hidden.
type policyMark struct{ decision, policy string }

// policyRoutes caches, per route, the policy data of its current snapshot.
type policyRoutes struct{ byRoute sync.Map } // route key → *policyRoute

// policyRoute is what one (snapshot, chain, policy set) of a route shares
// among callers: each tool prepared for evaluation and encoded once, and
// the per-identity views.
type policyRoute struct {
	snap  *registry.Snapshot
	chain *filters.Chain
	pol   *authz.Route

	once  sync.Once
	tools []policyTool // the tools the chain lets through, by name

	views sync.Map // authz key → *policyView
	n     atomic.Int64
	bytes atomic.Int64 // of the views' pages
}

type policyTool struct {
	t   *registry.Tool
	v   *authz.Tool
	enc []byte // the tool's element of a tools/list array
}

func (r *policyRoute) prepared() []policyTool {
	r.once.Do(func() {
		hides := r.chain.HidesTools()
		r.tools = make([]policyTool, 0, len(r.snap.Tools))
		for _, t := range r.snap.Tools {
			if hides && !r.chain.ToolAllowed(t.Name) {
				continue
			}
			one, _ := mcp.EncodeTools([]mcp.Tool{t.Tool}) // the registry checked every member
			r.tools = append(r.tools, policyTool{t: t, v: authz.NewTool(t.Name, t.Service, t.Title, t.Annotations),
				enc: one[1 : len(one)-1]})
		}
	})
	return r.tools
}

// route returns the shared policy data of a request's route.
func (p *policyRoutes) route(key string, snap *registry.Snapshot, chain *filters.Chain, pol *authz.Route) *policyRoute {
	if c, ok := p.byRoute.Load(key); ok {
		if r := c.(*policyRoute); r.snap == snap && r.chain == chain && r.pol == pol {
			return r
		}
	}
	r := &policyRoute{snap: snap, chain: chain, pol: pol}
	p.byRoute.Store(key, r) // a racing builder stores an equal value
	return r
}

// policyView is a route as callers of one policy-relevant identity see it.
type policyView struct {
	r      *policyRoute
	hidden map[string]policyMark // hidden tool names
	used   atomic.Bool           // for eviction: seen since the last sweep
	bytes  int64                 // of its pages, for the cache's bound

	// tools/list, full mode: the visible tools, paged.
	names []string
	pages []*mcp.SharedItems
	offs  [][]int
	nexts []string
	size  int

	items [3]viewItems // resources, resource templates, prompts (mcp.ItemKind)
}

type viewItems struct {
	governed bool
	list     []*registry.FederatedItem
	hidden   int
}

// view returns the request's view of its route, building it on first use.
func (x *request) view(chain *filters.Chain) *policyView {
	st := &x.pol
	if st.view != nil {
		return st.view
	}
	r := x.s.policyRoutes.route(x.routeKey, x.snap, chain, st.route)
	era, kind := x.listEra()
	key := st.route.Key(x.caller, era, kind)
	if v, ok := r.views.Load(key); ok {
		st.view = v.(*policyView)
		st.view.used.Store(true)
		return st.view
	}
	v := newPolicyView(r, &authz.Input{Caller: x.policyCaller(), Era: era, EraKind: kind})
	for r.n.Load() >= maxPolicyViews || (r.n.Load() > 0 && r.bytes.Load()+v.bytes > maxPolicyViewBytes) {
		if !r.evict() {
			break
		}
	}
	if old, loaded := r.views.LoadOrStore(key, v); loaded {
		v = old.(*policyView)
	} else {
		r.n.Add(1)
		r.bytes.Add(v.bytes)
	}
	st.view = v
	return v
}

// evict drops one view: the first not used since the last sweep (a second
// chance, as CLOCK does), else the first seen. false: there was none.
func (r *policyRoute) evict() bool {
	var victim any
	r.views.Range(func(k, v any) bool {
		if victim == nil {
			victim = k
		}
		if v.(*policyView).used.Swap(false) {
			return true
		}
		victim = k
		return false
	})
	if victim == nil {
		return false
	}
	if v, ok := r.views.LoadAndDelete(victim); ok {
		r.n.Add(-1)
		r.bytes.Add(-v.(*policyView).bytes)
	}
	return true
}

// listEra is the era lists are decided in: the request's protocol version
// header (a list request carries no version of its own in the legacy era).
func (x *request) listEra() (version, kind string) {
	v := strings.TrimSpace(x.req.ProtocolVersion)
	return v, mcp.EraOf(v).String()
}

func newPolicyView(r *policyRoute, in *authz.Input) *policyView {
	v := &policyView{r: r, hidden: map[string]policyMark{}}
	if r.pol.Governs(authz.KindTool) {
		tools := r.prepared()
		visible := make([]int, 0, len(tools))
		in.Method = "tools/call"
		for i := range tools {
			in.Tool = tools[i].v
			d := r.pol.Visible(authz.KindTool, in)
			if !d.Allowed {
				v.hidden[tools[i].t.Name] = policyMark{d.Decision, d.Policy}
				continue
			}
			visible = append(visible, i)
		}
		in.Tool = nil
		v.page(tools, visible, r.snap.PageSize())
	}

	for k, kind := range []authz.Kind{authz.KindResource, authz.KindResource, authz.KindPrompt} {
		all := r.snap.Items(mcp.ItemKind(k))
		vi := &v.items[k]
		if vi.governed = r.pol.Governs(kind); !vi.governed {
			continue
		}
		for _, it := range all {
			if itemDecision(r.pol, kind, in, listMethods[k], it.Key).Allowed {
				vi.list = append(vi.list, it)
			} else {
				vi.hidden++
			}
		}
	}
	return v
}

// listMethods are the methods whose decision lists of each item kind show.
var listMethods = [3]string{"resources/read", "resources/read", "prompts/get"}

// itemDecision decides one resource (by URI or template) or prompt.
func itemDecision(pol *authz.Route, kind authz.Kind, in *authz.Input, method, key string) authz.Decision {
	in.Method = method
	if kind == authz.KindPrompt {
		in.Prompt = authz.NewPrompt(key)
		defer func() { in.Prompt = nil }()
	} else {
		in.Resource = authz.NewResource(key)
		defer func() { in.Resource = nil }()
	}
	return pol.Decide(kind, in)
}

// page cuts the visible tools into pages of size (0: one page).
func (v *policyView) page(tools []policyTool, visible []int, size int) {
	n := len(visible)
	if size <= 0 || size > n {
		size = max(n, 1)
	}
	v.size = size
	v.names = make([]string, n)
	for start := 0; start < n || start == 0; start += size {
		end := min(start+size, n)
		var b []byte
		offs := make([]int, 0, end-start)
		b = append(b, '[')
		for i, j := range visible[start:end] {
			if i > 0 {
				b = append(b, ',')
			}
			offs = append(offs, len(b))
			b = append(b, tools[j].enc...)
			v.names[start+i] = tools[j].t.Name
		}
		b = append(b, ']')
		v.pages = append(v.pages, mcp.NewSharedItems(b))
		v.bytes += int64(len(b))
		v.offs = append(v.offs, offs)
		next := ""
		if end < n {
			next = viewCursor(v.names[end-1])
		}
		v.nexts = append(v.nexts, next)
		if n == 0 {
			break
		}
	}
}

// A view's tools/list cursor names the last tool of the page served,
// which the caller saw; the next page starts after it in name order, so a
// walk continues across snapshots, reloads and identities the way
// snapshot cursors do (registry/page.go), and never names a hidden tool.
const viewCursorFormat = 0x76

func viewCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{viewCursorFormat}, last...))
}

func decodeViewCursor(c string) (string, bool) {
	if len(c) > 200 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != viewCursorFormat || !mcp.ValidToolName(string(b[1:])) {
		return "", false
	}
	return string(b[1:]), true
}

// toolsPage is the view's tools/list page after cursor; the view's pages
// are shared.
func (v *policyView) toolsPage(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
	if cursor == "" {
		return v.pages[0].JSON, v.pages[0], v.nexts[0], true
	}
	last, ok := decodeViewCursor(cursor)
	if !ok {
		return nil, nil, "", false
	}
	n := len(v.names)
	start := sort.SearchStrings(v.names, last)
	if start < n && v.names[start] == last {
		start++
	}
	if start >= n {
		return []byte("[]"), nil, "", true
	}
	p, k := start/v.size, start%v.size
	if k > 0 {
		return append([]byte{'['}, v.pages[p].JSON[v.offs[p][k]:]...), nil, v.nexts[p], true
	}
	return v.pages[p].JSON, v.pages[p], v.nexts[p], true
}

// withoutHidden is a search_tools shortlist without the hidden tools, and
// how many it left out.
func (v *policyView) withoutHidden(list []byte) ([]byte, int) {
	if len(v.hidden) == 0 {
		return list, 0
	}
	var all []json.RawMessage
	if json.Unmarshal(list, &all) != nil {
		return []byte("[]"), 0 // never pass on what could not be checked
	}
	kept, hid := all[:0], 0
	for _, t := range all {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) == nil {
			if _, hidden := v.hidden[named.Name]; !hidden {
				kept = append(kept, t)
				continue
			}
		}
		hid++
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return []byte("[]"), hid
	}
	return out, hid
}

// startPolicies captures the route's policies and prepares the caller,
// once: authentication has set x.caller by then (request-headers phase).
func (x *request) startPolicies() {
	if x.pol.started {
		return
	}
	x.pol.started = true
	x.pol.route = x.rt.Policies.Route(x.routeKey)
}

// policyCaller is the request's caller prepared for evaluation, once:
// a list served from a cached view needs only its key.
func (x *request) policyCaller() *authz.Caller {
	if x.pol.caller == nil {
		x.pol.caller = authz.NewCaller(x.caller)
	}
	return x.pol.caller
}

// mayRouteEarly reports whether a stateless call named in Mcp-Name may be
// routed in the request-headers phase: never a tool hidden from the caller,
// which the body phase answers as unknown, as it does a tool that does not
// exist.
func (x *request) mayRouteEarly(name string) bool {
	x.startPolicies()
	if !x.pol.route.Governs(authz.KindTool) {
		return true
	}
	var chain *filters.Chain
	if x.rt.Filters != nil {
		chain = x.rt.Filters.Chain(x.routeKey)
	}
	_, hidden := x.view(chain).hidden[name]
	return !hidden
}

// authorizeCall decides a visible tool's call with its arguments; a
// denied call is answered with an isError result naming the policy, and
// nothing is routed.
func (x *request) authorizeCall(call *mcp.Call, t *registry.Tool) *extprocv3.ProcessingResponse {
	pol := x.pol.route
	if pol == nil {
		return nil
	}
	d := authz.Decision{Allowed: true, Decision: authz.DecisionAllow}
	if pol.Governs(authz.KindTool) {
		in := authz.Input{Caller: x.policyCaller(), Method: "tools/call", Era: call.Version, EraKind: call.Era.String()}
		if tl := x.policyTool(t); tl != nil {
			in.Tool = tl
		} else {
			in.Tool = authz.NewTool(t.Name, t.Service, t.Title, t.Annotations)
		}
		if pol.UsesArgs() {
			args, err := authz.Args(call.Arguments)
			if err != nil { // Handle checked it is an object; fail closed all the same
				d = authz.Decision{Decision: authz.DecisionError, Err: err}
			}
			in.Args = args
		}
		if d.Err == nil {
			d = pol.Decide(authz.KindTool, &in)
		}
	}
	x.auditPolicy("tools/call", slog.String("tool", t.Name), d.Decision, d.Policy, d.Err)
	if d.Allowed {
		return nil
	}
	x.callOutcome = callDenied
	text := "denied by policy"
	if d.Policy != "" {
		text += " " + strconv.Quote(d.Policy)
	}
	return x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, mcp.ToolFailed(t.Name, text))},
		outcomeDenied, detailsDenied)
}

// policyTool is t as prepared for evaluation by the request's view.
func (x *request) policyTool(t *registry.Tool) *authz.Tool {
	v := x.pol.view
	if v == nil {
		return nil
	}
	tools := v.r.prepared()
	i := sort.Search(len(tools), func(i int) bool { return tools[i].t.Name >= t.Name })
	if i < len(tools) && tools[i].t == t {
		return tools[i].v
	}
	return nil
}

// authorizeItem decides resources/read, prompts/get and completion of a
// federated item; false means answer as if it did not exist.
func (x *request) authorizeItem(f *mcp.Forward, prompt bool) bool {
	pol := x.pol.route
	if pol == nil {
		return true
	}
	kind, attr := authz.KindResource, "resource"
	if prompt {
		kind, attr = authz.KindPrompt, "prompt"
	}
	d := authz.Decision{Allowed: true, Decision: authz.DecisionAllow}
	if pol.Governs(kind) {
		in := authz.Input{Caller: x.policyCaller(), Era: f.Version, EraKind: f.Era.String()}
		d = itemDecision(pol, kind, &in, f.Method, f.Name)
	}
	x.auditPolicy(f.Method, slog.String(attr, clipName(f.Name)), d.Decision, d.Policy, d.Err)
	return d.Allowed
}

// auditAfterHandle records what the request's catalog decided: a call of
// a hidden tool (answered as unknown), or a list it filtered.
func (x *request) auditAfterHandle(method string) {
	st := &x.pol
	switch {
	case st.route == nil:
	case st.hidden != "":
		x.auditPolicy("tools/call", slog.String("tool", st.hidden), st.hiddenDec.decision, st.hiddenDec.policy, nil)
	case st.listed:
		d := authz.DecisionAllow
		if st.listHidden > 0 {
			d = decisionFiltered
		}
		subject := slog.Int("hidden", st.listHidden)
		if st.searched { // one event: the shortlist is the list
			subject = slog.Group("", slog.String("tool", mcp.MetaToolSearch), subject)
		}
		x.auditPolicy(method, subject, d, "", nil)
	}
}

// auditPolicy logs one authorization decision and counts it.
func (x *request) auditPolicy(method string, subject slog.Attr, decision, policy string, err error) {
	label := method
	if !policyMethods[label] {
		label = methodOther
	}
	x.s.metrics.authz.WithLabelValues(x.routeKey, label, decision).Inc()
	attrs := []slog.Attr{
		slog.String("event", "authorization"),
		slog.String("caller", x.caller.String()), // never the token
		slog.String("route", x.routeKey),
		slog.String("method", method),
		subject,
		slog.String("decision", decision),
		slog.String("policy", policy),
		slog.String("request_id", x.requestID),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "audit", attrs...)
}
