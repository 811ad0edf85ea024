package main

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// component is one part of the process as the admin endpoints see it.
type component struct {
	name  string
	state func() (ready bool, state string)
}

// healthDoc is the /health answer.
type healthDoc struct {
	Status     string            `json:"status"` // "ready", "not ready" or "stopping"
	Version    string            `json:"version"`
	Mode       string            `json:"mode"`
	Components map[string]string `json:"components"`
	Registry   registry.Health   `json:"registry"`
	XDS        *xdsHealth        `json:"xds,omitempty"`
}

// xdsHealth is the xDS part of /health: snapshot groups, every node's last
// pushed, ACKed and NACKed version, and the SRE override file's state.
type xdsHealth struct {
	Groups    []xds.GroupStatus    `json:"groups"`
	Nodes     []xds.NodeStatus     `json:"nodes"`
	Overrides *xds.OverridesStatus `json:"overrides,omitempty"`
}

// newMetricsRegistry is the process's own Prometheus registry (not the global
// one, so nothing registers behind its back), with Go and process metrics.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "toolmesh_build_info",
			Help:        "Always 1; the version label says which toolmesh is running.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return reg
}

// adminHandler serves the admin endpoints:
//
//	/healthz  200 "ok" while the process runs (liveness)
//	/readyz   200 when every component is ready, else 503 (readiness)
//	/health   the health detail, JSON
//	/metrics  Prometheus metrics
func (a *app) adminHandler(metrics *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		doc := a.health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if doc.Status != "ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, doc.Status+"\n")
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.health())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{Registry: metrics}))
	return mux
}

// health collects the state of every component.
func (a *app) health() healthDoc {
	doc := healthDoc{
		Status:     "ready",
		Version:    version,
		Mode:       a.mode.String(),
		Components: make(map[string]string, len(a.components)),
		Registry:   a.reg.Health(),
	}
	if a.xdsServer != nil {
		doc.XDS = &xdsHealth{Groups: a.xdsServer.Groups(), Nodes: a.xdsServer.NodeStatus()}
		if a.cfg.Overrides != "" {
			st := a.xdsServer.OverridesStatus()
			doc.XDS.Overrides = &st
		}
	}
	for _, c := range a.components {
		ok, state := c.state()
		doc.Components[c.name] = state
		if !ok {
			doc.Status = "not ready"
		}
	}
	if a.stopping.Load() {
		doc.Status = "stopping"
	}
	return doc
}
