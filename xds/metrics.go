package xds

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cplog "github.com/envoyproxy/go-control-plane/pkg/log"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the xDS server's Prometheus metrics.
type metrics struct {
	pushes       prometheus.Counter
	buildErrors  prometheus.Counter
	nacks        *prometheus.CounterVec // by resource type
	responses    *prometheus.CounterVec // by resource type
	streams      *prometheus.GaugeVec   // by protocol: sotw, delta
	buildSeconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pushes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolmesh_xds_pushes_total",
			Help: "Snapshots with a new version set in the xDS cache.",
		}),
		buildErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolmesh_xds_build_errors_total",
			Help: "Updates that failed to translate, validate or form a consistent snapshot (the last good snapshot stays).",
		}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_xds_nacks_total",
			Help: "Discovery requests that rejected (NACKed) a response, by resource type.",
		}, []string{"type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_xds_responses_total",
			Help: "Discovery responses sent, by resource type.",
		}, []string{"type"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolmesh_xds_streams",
			Help: "Open xDS streams, by protocol (sotw, delta).",
		}, []string{"protocol"}),
		buildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolmesh_xds_build_duration_seconds",
			Help:    "Time of one Update: translate, validate and set a snapshot, or find that nothing changed.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms … ~131s
		}),
	}
	if reg != nil {
		reg.MustRegister(m.pushes, m.buildErrors, m.nacks, m.responses, m.streams, m.buildSeconds)
	}
	return m
}

// typeLabel shortens a type URL to its message name (Listener, Cluster, …).
func typeLabel(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

// callbacks count streams, responses and NACKs and log NACKs with the node
// that sent them (Envoy sends its node only on a stream's first request).
func (s *Server) callbacks() serverv3.Callbacks {
	var nodes nodeIDs
	open := func(protocol string) func(context.Context, int64, string) error {
		return func(context.Context, int64, string) error {
			s.metrics.streams.WithLabelValues(protocol).Inc()
			return nil
		}
	}
	closed := func(protocol string) func(int64, *corev3.Node) {
		return func(id int64, _ *corev3.Node) {
			s.metrics.streams.WithLabelValues(protocol).Dec()
			nodes.forget(id)
		}
	}
	nack := func(node, typeURL, version, nonce, detail string) {
		s.metrics.nacks.WithLabelValues(typeLabel(typeURL)).Inc()
		s.log.Warn("envoy rejected xds resources", "node", node,
			"type", typeLabel(typeURL), "version", version, "nonce", nonce, "error", detail)
	}
	return serverv3.CallbackFuncs{
		StreamOpenFunc:        open("sotw"),
		StreamClosedFunc:      closed("sotw"),
		DeltaStreamOpenFunc:   open("delta"),
		DeltaStreamClosedFunc: closed("delta"),
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			node := nodes.remember(id, req.GetNode())
			if d := req.GetErrorDetail(); d != nil {
				nack(node, req.GetTypeUrl(), req.GetVersionInfo(), req.GetResponseNonce(), d.GetMessage())
			} else if req.GetResponseNonce() != "" {
				s.log.Debug("xds ack", "node", node, "type", typeLabel(req.GetTypeUrl()), "version", req.GetVersionInfo())
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			s.metrics.responses.WithLabelValues(typeLabel(resp.GetTypeUrl())).Inc()
		},
		StreamDeltaRequestFunc: func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			node := nodes.remember(id, req.GetNode())
			if d := req.GetErrorDetail(); d != nil {
				nack(node, req.GetTypeUrl(), "", req.GetResponseNonce(), d.GetMessage())
			}
			return nil
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			s.metrics.responses.WithLabelValues(typeLabel(resp.GetTypeUrl())).Inc()
		},
	}
}

// nodeIDs remembers the node id of each open stream for log lines.
type nodeIDs struct {
	mu sync.Mutex
	m  map[int64]string
}

// remember records node's id for the stream when node is set and returns
// the stream's node id.
func (n *nodeIDs) remember(stream int64, node *corev3.Node) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id := node.GetId(); id != "" {
		if n.m == nil {
			n.m = map[int64]string{}
		}
		n.m[stream] = id
		return id
	}
	return n.m[stream]
}

func (n *nodeIDs) forget(stream int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, stream)
}

// controlPlaneLogger adapts slog to go-control-plane's printf-style logger.
// Its debug chatter (one line per watch) stays at debug level.
func controlPlaneLogger(l *slog.Logger) cplog.Logger {
	at := func(level slog.Level) func(string, ...any) {
		return func(format string, args ...any) {
			if l.Enabled(context.Background(), level) {
				l.Log(context.Background(), level, fmt.Sprintf(format, args...), "component", "go-control-plane")
			}
		}
	}
	return cplog.LoggerFuncs{
		DebugFunc: at(slog.LevelDebug),
		InfoFunc:  at(slog.LevelDebug), // per-stream chatter; toolmesh logs what matters itself
		WarnFunc:  at(slog.LevelWarn),
		ErrorFunc: at(slog.LevelError),
	}
}
