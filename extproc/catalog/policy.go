package catalog

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Authorization (docs/authorization.md): one decision of the route's
// policies (package authz) governs both what a caller may call, read or get
// and what it is listed. A tool the caller may not call is not in its
// tools/list pages or search_tools shortlists, and its Resolve says
// ToolUnknown, so calling it is answered exactly as an unknown tool is.
// Hidden resources and prompts are "not found".
//
// Listing a large route per caller stays a copy of pre-encoded pages: the
// filtered catalog (View) is computed once per snapshot, filter chain,
// policy set and policy-relevant identity (authz.Route.Key: only the
// caller attributes the route's policies read), and kept in a bounded cache
// per route. Its pages are cut from the visible tools alone, with cursors
// naming only the last tool the caller saw, so neither page sizes nor
// cursors tell hidden tools apart from absent ones.

// The filtered catalogs kept per route, one per distinct policy-relevant
// identity (e.g. per set of roles), not per token, are bounded in number
// (MaxViews) and in the bytes of their pages (a view of a 10,000-tool route
// holds a copy of its visible part of the list, about 2 MB).
const (
	MaxViews     = 256
	maxViewBytes = 64 << 20
)

// Mark is why a subject is hidden: the decision and the policy that made it.
type Mark struct{ Decision, Policy string }

// Views caches, per route, the policy data of its current snapshot; the
// zero value is empty and ready.
type Views struct{ byRoute sync.Map } // route key → *Route

// Clear drops every cached view: they belong to a policy set no longer in
// force. A request that captured one finishes with it.
func (p *Views) Clear() { p.byRoute.Clear() }

// Route returns the shared policy data of a route's (snapshot, chain,
// policy set).
func (p *Views) Route(key string, snap *registry.Snapshot, chain *filters.Chain, pol *authz.Route) *Route {
	if c, ok := p.byRoute.Load(key); ok {
		if r := c.(*Route); r.snap == snap && r.chain == chain && r.pol == pol {
			return r
		}
	}
	r := &Route{snap: snap, chain: chain, pol: pol}
	p.byRoute.Store(key, r) // a racing builder stores an equal value
	return r
}

// Cached is the route's current policy data, nil when none is cached.
func (p *Views) Cached(key string) *Route {
	if c, ok := p.byRoute.Load(key); ok {
		return c.(*Route)
	}
	return nil
}

// Route is what one (snapshot, chain, policy set) of a route shares among
// callers: each tool prepared for evaluation and encoded once, and the
// per-identity views.
type Route struct {
	snap  *registry.Snapshot
	chain *filters.Chain
	pol   *authz.Route

	once  sync.Once
	tools []policyTool // the tools the chain lets through, by name

	views sync.Map // authz key → *View
	n     atomic.Int64
	bytes atomic.Int64 // of the views' pages
}

type policyTool struct {
	t   *registry.Tool
	v   *authz.Tool
	enc []byte // the tool's element of a tools/list array
}

// Policies is the policy set the route's views were decided by.
func (r *Route) Policies() *authz.Route { return r.pol }

// Size is how many views the route keeps and the bytes of their pages.
func (r *Route) Size() (views, bytes int64) { return r.n.Load(), r.bytes.Load() }

func (r *Route) prepared() []policyTool {
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

// View returns the view of the callers whose policy-relevant identity is
// key (authz.Route.Key), building it on first use from in, which is called
// only then.
func (r *Route) View(key string, in func() *authz.Input) *View {
	if v, ok := r.views.Load(key); ok {
		v := v.(*View)
		v.used.Store(true)
		return v
	}
	v := newView(r, in())
	for r.n.Load() >= MaxViews || (r.n.Load() > 0 && r.bytes.Load()+v.bytes > maxViewBytes) {
		if !r.evict() {
			break
		}
	}
	if old, loaded := r.views.LoadOrStore(key, v); loaded {
		v = old.(*View)
	} else {
		r.n.Add(1)
		r.bytes.Add(v.bytes)
	}
	return v
}

// evict drops one view: the first not used since the last sweep (a second
// chance, as CLOCK does), else the first seen. false: there was none.
func (r *Route) evict() bool {
	var victim any
	r.views.Range(func(k, v any) bool {
		if victim == nil {
			victim = k
		}
		if v.(*View).used.Swap(false) {
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
		r.bytes.Add(-v.(*View).bytes)
	}
	return true
}

// View is a route as callers of one policy-relevant identity see it.
type View struct {
	r      *Route
	hidden map[string]Mark // hidden tool names
	used   atomic.Bool     // for eviction: seen since the last sweep
	bytes  int64           // of its pages, for the cache's bound

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

func newView(r *Route, in *authz.Input) *View {
	v := &View{r: r, hidden: map[string]Mark{}}
	if r.pol.Governs(authz.KindTool) {
		tools := r.prepared()
		visible := make([]int, 0, len(tools))
		in.Method = "tools/call"
		for i := range tools {
			in.Tool = tools[i].v
			d := r.pol.Visible(authz.KindTool, in)
			if !d.Allowed {
				v.hidden[tools[i].t.Name] = Mark{d.Decision, d.Policy}
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

// Hidden reports whether the view hides the tool name.
func (v *View) Hidden(name string) bool {
	_, hidden := v.hidden[name]
	return hidden
}

// Tool is t as prepared for evaluation by the view, nil when t is not one
// of the view's tools.
func (v *View) Tool(t *registry.Tool) *authz.Tool {
	tools := v.r.prepared()
	i := sort.Search(len(tools), func(i int) bool { return tools[i].t.Name >= t.Name })
	if i < len(tools) && tools[i].t == t {
		return tools[i].v
	}
	return nil
}

// listMethods are the methods whose decision lists of each item kind show.
var listMethods = [3]string{"resources/read", "resources/read", "prompts/get"}

// DecideCall decides a visible tool's call with its arguments by pol (not
// nil). caller is called only when a policy governs tools; view, when not
// nil, has t prepared for evaluation.
func DecideCall(pol *authz.Route, caller func() *authz.Caller, view *View, call *mcp.Call, t *registry.Tool) authz.Decision {
	d := authz.Decision{Allowed: true, Decision: authz.DecisionAllow}
	if !pol.Governs(authz.KindTool) {
		return d
	}
	in := authz.Input{Caller: caller(), Method: "tools/call", Era: call.Version, EraKind: call.Era.String()}
	var tl *authz.Tool
	if view != nil {
		tl = view.Tool(t)
	}
	if tl != nil {
		in.Tool = tl
	} else {
		in.Tool = authz.NewTool(t.Name, t.Service, t.Title, t.Annotations)
	}
	if pol.UsesArgs() {
		args, err := authz.Args(call.Arguments)
		if err != nil { // Handle checked it is an object; fail closed all the same
			return authz.Decision{Decision: authz.DecisionError, Err: err}
		}
		in.Args = args
	}
	return pol.Decide(authz.KindTool, &in)
}

// DecideItem decides resources/read, prompts/get or completion of a
// federated item by pol (not nil); caller is called only when a policy
// governs the item's kind.
func DecideItem(pol *authz.Route, caller func() *authz.Caller, f *mcp.Forward, prompt bool) authz.Decision {
	kind := authz.KindResource
	if prompt {
		kind = authz.KindPrompt
	}
	if !pol.Governs(kind) {
		return authz.Decision{Allowed: true, Decision: authz.DecisionAllow}
	}
	in := authz.Input{Caller: caller(), Era: f.Version, EraKind: f.Era.String()}
	return itemDecision(pol, kind, &in, f.Method, f.Name)
}

// itemDecision decides one resource (by URI or template) or prompt for
// method; in is restored as it was.
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
func (v *View) page(tools []policyTool, visible []int, size int) {
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
func (v *View) toolsPage(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
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
func (v *View) withoutHidden(list []byte) ([]byte, int) {
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
