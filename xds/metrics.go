package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cplog "github.com/envoyproxy/go-control-plane/pkg/log"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// metrics are the xDS server's Prometheus metrics (docs/sre.md lists them).
type metrics struct {
	pushes          *prometheus.CounterVec // by node group
	buildErrors     prometheus.Counter
	nacks           *prometheus.CounterVec // by resource type
	responses       *prometheus.CounterVec // by resource type
	streams         *prometheus.GaugeVec   // by protocol: sotw, delta
	connectedNodes  *prometheus.GaugeVec   // by node group
	buildSeconds    prometheus.Histogram
	overrideReloads *prometheus.CounterVec // by result: applied, rejected
}

// newMetrics makes the series and registers them with reg (nil: none). An
// xDS server already on reg shares its series; a conflict that cannot be
// shared is logged and leaves those series unexported, since NewServer has
// no error to return and metrics must never stop serving.
func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_xds_pushes_total",
			Help: "Snapshots with a new version set in the xDS cache, by node group.",
		}, []string{"group"}),
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
		connectedNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolmesh_xds_connected_nodes",
			Help: "Envoy nodes with at least one open xDS stream, by node group.",
		}, []string{"group"}),
		buildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolmesh_xds_build_duration_seconds",
			Help:    "Time of one Update or SetOverrides: translate, validate and set snapshots, or find that nothing changed.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms … ~131s
		}),
		overrideReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_xds_override_reloads_total",
			Help: "Override file changes seen by the watcher, by result: applied, or rejected (the last good overrides stay).",
		}, []string{"result"}),
	}
	var errs []error
	fail := func(err error) { errs = append(errs, err) }
	m.pushes = register(reg, m.pushes, fail)
	m.buildErrors = register(reg, m.buildErrors, fail)
	m.nacks = register(reg, m.nacks, fail)
	m.responses = register(reg, m.responses, fail)
	m.streams = register(reg, m.streams, fail)
	m.connectedNodes = register(reg, m.connectedNodes, fail)
	m.buildSeconds = register(reg, m.buildSeconds, fail)
	m.overrideReloads = register(reg, m.overrideReloads, fail)
	if err := errors.Join(errs...); err != nil {
		log.Error("xds metrics not exported", "err", err)
	}
	return m
}

// register is promreg.Register that hands its error to fail.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, fail func(error)) C {
	got, err := promreg.Register(reg, c)
	if err != nil {
		fail(err)
	}
	return got
}

// typeLabel shortens a type URL to its message name (Listener, Cluster, …).
func typeLabel(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

// callbacks count streams and responses, track each node's versions, ACKs
// and NACKs for NodeStatus, and log NACKs with the node that sent them and
// Envoy's error_detail message.
func (s *Server) callbacks() serverv3.Callbacks {
	open := func(protocol string) func(context.Context, int64, string) error {
		return func(_ context.Context, id int64, _ string) error {
			s.metrics.streams.WithLabelValues(protocol).Inc()
			s.nodes.open(id)
			return nil
		}
	}
	closed := func(protocol string) func(int64, *corev3.Node) {
		return func(id int64, _ *corev3.Node) {
			s.metrics.streams.WithLabelValues(protocol).Dec()
			s.nodes.close(id)
		}
	}
	request := func(id int64, node *corev3.Node, typeURL, nonce, detail string) requestInfo {
		r := s.nodes.request(id, node, typeURL, nonce, detail)
		switch {
		case detail != "":
			s.metrics.nacks.WithLabelValues(typeLabel(typeURL)).Inc()
			s.log.Warn("envoy rejected xds resources", "node", r.node, "group", r.group,
				"type", typeLabel(typeURL), "version", r.version, "nonce", nonce, "error", detail)
		case r.ack:
			s.log.Debug("xds ack", "node", r.node, "type", typeLabel(typeURL), "version", r.version)
		}
		return r
	}
	return serverv3.CallbackFuncs{
		StreamOpenFunc:        open("sotw"),
		StreamClosedFunc:      closed("sotw"),
		DeltaStreamOpenFunc:   open("delta"),
		DeltaStreamClosedFunc: closed("delta"),
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			r := request(id, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), nackMessage(req.GetErrorDetail()))
			if req.GetErrorDetail() != nil && r.version != "" {
				// A NACK carries the last version Envoy accepted, which the
				// cache would answer at once with the version Envoy just
				// rejected: a hot resend loop. Answer as if Envoy held the
				// rejected version, so the next push is the next change.
				req.VersionInfo = r.version
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			s.metrics.responses.WithLabelValues(typeLabel(resp.GetTypeUrl())).Inc()
			s.nodes.response(id, resp.GetTypeUrl(), resp.GetNonce(), resp.GetVersionInfo())
		},
		StreamDeltaRequestFunc: func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			request(id, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), nackMessage(req.GetErrorDetail()))
			return nil
		},
		StreamDeltaResponseFunc: func(id int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			s.metrics.responses.WithLabelValues(typeLabel(resp.GetTypeUrl())).Inc()
			s.nodes.response(id, resp.GetTypeUrl(), resp.GetNonce(), resp.GetSystemVersionInfo())
		},
	}
}

// nackMessage is Envoy's error_detail message, "" for an ACK or a plain
// request. A NACK without a message still reads as one.
func nackMessage(detail *status.Status) string {
	switch {
	case detail == nil:
		return ""
	case detail.GetMessage() == "":
		return "(no message, code " + strconv.Itoa(int(detail.GetCode())) + ")"
	}
	return detail.GetMessage()
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
