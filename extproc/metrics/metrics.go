// Package metrics holds the ext_proc server's Prometheus series and the
// fixed sets their labels take values from (methods, the bounded tool
// label): a client chooses methods and tool names, and must not be able to
// grow the series. Which value a request gets is the stream handler's
// (package extproc) to decide.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// Metrics are the server's Prometheus series. Label values come from small
// fixed sets (methods, eras, outcomes) or from the route snapshot (route keys,
// tool names of resolved tools, at most Config.ToolLabels per route), never
// from raw client input.
type Metrics struct {
	Requests  *prometheus.CounterVec   // route, method, era, outcome
	Duration  *prometheus.HistogramVec // route, method
	ToolCalls *prometheus.CounterVec   // route, tool, outcome
	Tools     *ToolLabels              // bounds the tool label of ToolCalls
	Approvals *prometheus.CounterVec   // route, decision
	Auth      *prometheus.CounterVec   // route, result (authn.Result* values)
	Authz     *prometheus.CounterVec   // route, method, decision

	series sync.Map // requestLabels → *RequestSeries (series.go)
}

// New makes the series and registers them with reg (nil: kept but not
// exported); toolLabels is how many tools of a route get their own tool
// label (ToolLabels).
func New(reg prometheus.Registerer, toolLabels int) (*Metrics, error) {
	m := &Metrics{Tools: &ToolLabels{max: int64(toolLabels)},
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_extproc_requests_total",
			Help: "MCP requests seen by the extproc server, by route (empty for a path that names no route), JSON-RPC method, protocol era and outcome.",
		}, []string{"route", "method", "era", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolmesh_extproc_request_duration_seconds",
			Help: "Lifetime of one ext_proc stream (one HTTP request), including the Tool Service for routed calls.",
			// 0.5 ms … ~16 s: local answers take well under a millisecond,
			// routed calls last as long as the Tool Service.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_tool_calls_total",
			Help: "Resolved tools/call requests, by route, tool (at most toolLabelsPerRoute distinct tools per route by name, the first called; the rest as \"(other)\") and outcome.",
		}, []string{"route", "tool", "outcome"}),
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_approvals_total",
			Help: "Decisions of the gateway's approval step on tools/call requests that need a person's approval, by route and decision (requested, granted, declined, refused, unsupported).",
		}, []string{"route", "decision"}),
		Auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_auth_requests_total",
			Help: "Requests to routes that authenticate, by route and result (ok, anonymous, missing_token, invalid_token, insufficient_scope, invalid_request, unavailable).",
		}, []string{"route", "result"}),
		Authz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_authz_decisions_total",
			Help: "Authorization decisions of routes with policies, by route, method and decision (allow, deny, error; filtered for a list that hid something).",
		}, []string{"route", "method", "decision"}),
	}
	// A second Server on the same registry shares the series.
	var err error
	if m.Requests, err = promreg.Register(reg, m.Requests); err != nil {
		return nil, err
	}
	if m.Duration, err = promreg.Register(reg, m.Duration); err != nil {
		return nil, err
	}
	if m.ToolCalls, err = promreg.Register(reg, m.ToolCalls); err != nil {
		return nil, err
	}
	if m.Approvals, err = promreg.Register(reg, m.Approvals); err != nil {
		return nil, err
	}
	if m.Auth, err = promreg.Register(reg, m.Auth); err != nil {
		return nil, err
	}
	if m.Authz, err = promreg.Register(reg, m.Authz); err != nil {
		return nil, err
	}
	return m, nil
}
