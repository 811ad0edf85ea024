package extproc

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/catalog"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Authorization (docs/authorization.md): one decision of the route's
// policies (package authz) governs both what a caller may call, read or get
// and what it is listed. What the caller is listed, and that a hidden tool
// resolves as unknown, is the request's catalog (package catalog); this
// file decides calls and items, and audits both. A tool the caller sees
// but may not call with these arguments (a policy that reads args) gets an
// isError result naming the policy.

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
	view    *catalog.View // the caller's view of the route, once needed
	audit   catalog.Audit // what the request's catalog hid
}

// catalog returns the request's catalog, preparing its caller's policy
// view: authentication has set x.caller by then (request-headers phase).
func (x *request) catalog() *catalog.Catalog {
	var vis *catalog.Visible
	if x.rt.Filters != nil {
		// One chain for the whole request; tools it refuses by name are
		// neither listed nor resolvable.
		x.chain = x.rt.Filters.Chain(x.routeKey)
		vis = x.s.visible.Tools(x.routeKey, x.snap, x.chain)
	}
	x.startPolicies()
	var view *catalog.View
	if x.pol.route != nil {
		view = x.view(x.chain)
	}
	var traced context.Context
	if x.tr.Started() {
		traced = x.ctx
	}
	x.cat = catalog.Make(x.snap, vis, view, &x.pol.audit, traced)
	return &x.cat
}

// view returns the request's view of its route, building it on first use.
func (x *request) view(chain *filters.Chain) *catalog.View {
	st := &x.pol
	if st.view != nil {
		return st.view
	}
	r := x.s.policyViews.Route(x.routeKey, x.snap, chain, st.route)
	era, kind := x.listEra()
	st.view = r.View(st.route.Key(x.caller, era, kind), func() *authz.Input {
		return &authz.Input{Caller: x.policyCaller(), Era: era, EraKind: kind}
	})
	return st.view
}

// listEra is the era lists are decided in: the request's protocol version
// header (a list request carries no version of its own in the legacy era).
func (x *request) listEra() (version, kind string) {
	v := strings.TrimSpace(x.req.ProtocolVersion)
	return v, mcp.EraOf(v).String()
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
	return !x.view(chain).Hidden(name)
}

// authorizeCall decides a visible tool's call with its arguments; a
// denied call is answered with an isError result naming the policy, and
// nothing is routed.
func (x *request) authorizeCall(call *mcp.Call, t *registry.Tool) *extprocv3.ProcessingResponse {
	pol := x.pol.route
	if pol == nil {
		return nil
	}
	d := catalog.DecideCall(pol, x.policyCaller, x.pol.view, call, t)
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

// authorizeItem decides resources/read, prompts/get and completion of a
// federated item; false means answer as if it did not exist.
func (x *request) authorizeItem(f *mcp.Forward, prompt bool) bool {
	pol := x.pol.route
	if pol == nil {
		return true
	}
	attr := "resource"
	if prompt {
		attr = "prompt"
	}
	d := catalog.DecideItem(pol, x.policyCaller, f, prompt)
	x.auditPolicy(f.Method, slog.String(attr, clipName(f.Name)), d.Decision, d.Policy, d.Err)
	return d.Allowed
}

// auditAfterHandle records what the request's catalog decided: a call of
// a hidden tool (answered as unknown), or a list it filtered.
func (x *request) auditAfterHandle(method string) {
	st, a := &x.pol, &x.pol.audit
	switch {
	case st.route == nil:
	case a.Hidden != "":
		x.auditPolicy("tools/call", slog.String("tool", a.Hidden), a.HiddenMark.Decision, a.HiddenMark.Policy, nil)
	case a.Listed:
		d := authz.DecisionAllow
		if a.ListHidden > 0 {
			d = decisionFiltered
		}
		subject := slog.Int("hidden", a.ListHidden)
		if a.Searched { // one event: the shortlist is the list
			subject = slog.Group("", slog.String("tool", mcp.MetaToolSearch), subject)
		}
		x.auditPolicy(method, subject, d, "", nil)
	}
}

// auditPolicy logs one authorization decision and counts it.
func (x *request) auditPolicy(method string, subject slog.Attr, decision, policy string, err error) {
	label := method
	if !policyMethods[label] {
		label = metrics.MethodOther
	}
	x.s.metrics.Authz.WithLabelValues(x.routeKey, label, decision).Inc()
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
