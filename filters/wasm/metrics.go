package wasm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// metrics are shared by every module of a Host; each module curries its own
// label values once so the hot path does no label lookups.
type metrics struct {
	calls     *prometheus.CounterVec
	denials   *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	instances *prometheus.GaugeVec
	discards  *prometheus.CounterVec
	reloads   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "toolmesh", "wasm_filter"
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "Calls into a WebAssembly filter.",
		}, []string{"filter"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "denials_total",
			Help: "Calls a WebAssembly filter answered with deny.",
		}, []string{"filter"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "errors_total",
			Help: "Failed calls into a WebAssembly filter, by kind (timeout, trap, guest, abi, busy, too_large, closed).",
		}, []string{"filter", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "call_duration_seconds",
			Help:    "Duration of one call into a WebAssembly filter, including the wait for an instance.",
			Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 25e-3, 100e-3, 1},
		}, []string{"filter"}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "instances",
			Help: "Live instances of a WebAssembly filter (idle and busy).",
		}, []string{"filter"}),
		discards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "instance_discards_total",
			Help: "Instances thrown away, by reason (error: the call failed; recycle: RecycleAfter reached; retire: the module was reloaded or closed).",
		}, []string{"filter", "reason"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "reloads_total",
			Help: "Module reloads, by result (ok, error).",
		}, []string{"filter", "result"}),
	}
	// Several Hosts can share one registry: they share the series.
	var err error
	if m.calls, err = promreg.Register(reg, m.calls); err != nil {
		return nil, err
	}
	if m.denials, err = promreg.Register(reg, m.denials); err != nil {
		return nil, err
	}
	if m.errors, err = promreg.Register(reg, m.errors); err != nil {
		return nil, err
	}
	if m.latency, err = promreg.Register(reg, m.latency); err != nil {
		return nil, err
	}
	if m.instances, err = promreg.Register(reg, m.instances); err != nil {
		return nil, err
	}
	if m.discards, err = promreg.Register(reg, m.discards); err != nil {
		return nil, err
	}
	if m.reloads, err = promreg.Register(reg, m.reloads); err != nil {
		return nil, err
	}
	return m, nil
}

// moduleMetrics are one module's curried series.
type moduleMetrics struct {
	calls, denials prometheus.Counter
	latency        prometheus.Observer
	instances      prometheus.Gauge
	errTimeout     prometheus.Counter
	errTrap        prometheus.Counter
	errGuest       prometheus.Counter
	errABI         prometheus.Counter
	errBusy        prometheus.Counter
	errTooLarge    prometheus.Counter
	errClosed      prometheus.Counter
	discardError   prometheus.Counter
	discardRecycle prometheus.Counter
	discardRetire  prometheus.Counter
	reloadOK       prometheus.Counter
	reloadError    prometheus.Counter
}

func (m *metrics) forModule(name string) *moduleMetrics {
	e := func(kind string) prometheus.Counter { return m.errors.WithLabelValues(name, kind) }
	d := func(reason string) prometheus.Counter { return m.discards.WithLabelValues(name, reason) }
	return &moduleMetrics{
		calls:          m.calls.WithLabelValues(name),
		denials:        m.denials.WithLabelValues(name),
		latency:        m.latency.WithLabelValues(name),
		instances:      m.instances.WithLabelValues(name),
		errTimeout:     e("timeout"),
		errTrap:        e("trap"),
		errGuest:       e("guest"),
		errABI:         e("abi"),
		errBusy:        e("busy"),
		errTooLarge:    e("too_large"),
		errClosed:      e("closed"),
		discardError:   d("error"),
		discardRecycle: d("recycle"),
		discardRetire:  d("retire"),
		reloadOK:       m.reloads.WithLabelValues(name, "ok"),
		reloadError:    m.reloads.WithLabelValues(name, "error"),
	}
}

func (mm *moduleMetrics) countError(err error) {
	switch {
	case errors.Is(err, ErrTimeout):
		mm.errTimeout.Inc()
	case errors.Is(err, ErrTrap):
		mm.errTrap.Inc()
	case errors.Is(err, ErrGuest):
		mm.errGuest.Inc()
	case errors.Is(err, ErrBusy):
		mm.errBusy.Inc()
	case errors.Is(err, ErrTooLarge):
		mm.errTooLarge.Inc()
	case errors.Is(err, ErrClosed):
		mm.errClosed.Inc()
	default:
		mm.errABI.Inc()
	}
}
