package extproc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/promreg"
)

// metrics are the server's Prometheus series. Label values come from small
// fixed sets (methods, eras, outcomes) or from the route snapshot (route keys,
// tool names of resolved tools, at most Config.ToolLabels per route), never
// from raw client input.
type metrics struct {
	requests  *prometheus.CounterVec   // route, method, era, outcome
	duration  *prometheus.HistogramVec // route, method
	toolCalls *prometheus.CounterVec   // route, tool, outcome
	tools     *toolLabels              // bounds the tool label of toolCalls
	approvals *prometheus.CounterVec   // route, decision (approval.go)
	auth      *prometheus.CounterVec   // route, result (authn.Result* values)
	authz     *prometheus.CounterVec   // route, method, decision
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_extproc_requests_total",
			Help: "MCP requests seen by the extproc server, by route (empty for a path that names no route), JSON-RPC method, protocol era and outcome.",
		}, []string{"route", "method", "era", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolmesh_extproc_request_duration_seconds",
			Help: "Lifetime of one ext_proc stream (one HTTP request), including the Tool Service for routed calls.",
			// 0.5 ms … ~16 s: local answers take well under a millisecond,
			// routed calls last as long as the Tool Service.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_tool_calls_total",
			Help: "Resolved tools/call requests, by route, tool (at most toolLabelsPerRoute distinct tools per route by name, the first called; the rest as \"(other)\") and outcome.",
		}, []string{"route", "tool", "outcome"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_approvals_total",
			Help: "Decisions of the gateway's approval step on tools/call requests that need a person's approval, by route and decision (requested, granted, declined, refused, unsupported).",
		}, []string{"route", "decision"}),
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_auth_requests_total",
			Help: "Requests to routes that authenticate, by route and result (ok, anonymous, missing_token, invalid_token, insufficient_scope, invalid_request, unavailable).",
		}, []string{"route", "result"}),
		authz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_authz_decisions_total",
			Help: "Authorization decisions of routes with policies, by route, method and decision (allow, deny, error; filtered for a list that hid something).",
		}, []string{"route", "method", "decision"}),
	}
	// A second Server on the same registry shares the series.
	var err error
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = promreg.Register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.toolCalls, err = promreg.Register(reg, m.toolCalls); err != nil {
		return nil, err
	}
	if m.approvals, err = promreg.Register(reg, m.approvals); err != nil {
		return nil, err
	}
	if m.auth, err = promreg.Register(reg, m.auth); err != nil {
		return nil, err
	}
	if m.authz, err = promreg.Register(reg, m.authz); err != nil {
		return nil, err
	}
	// The token clients of every upstreamAuth configuration count into
	// one process-wide counter (extproc/upstreamcred), registered with the
	// first registry that asks.
	if _, err = promreg.Register(reg, upstreamcred.Collector()); err != nil {
		return nil, err
	}
	return m, nil
}
