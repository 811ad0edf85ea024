package xds

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
)

// Tuning is one layer of cluster tuning for Tool Services, as the SRE
// override file writes it (under `defaults` or per service). Field names are
// the Portal's `cluster` names (docs/contracts/portal.md) plus the knobs the Portal contract
// v0.1 lacks. Every field is optional: nil means "not set in this layer", so
// an explicit 0 or false differs from an absent field and wins over the
// layers below (built-in defaults < Portal < override defaults < override
// per service). docs/sre.md lists every field with its default and the
// Envoy field it becomes.
type Tuning struct {
	// ConnectTimeout is cluster.connect_timeout (default 1s; > 0).
	ConnectTimeout *config.Duration `json:"connectTimeout,omitempty"`
	// RequestTimeout is the Tool Service route's timeout, covering every
	// retry (default 15s; 0 disables it, for long streamed replies).
	RequestTimeout *config.Duration `json:"requestTimeout,omitempty"`
	// IdleTimeout is the Tool Service route's stream idle timeout (default
	// unset: the listener's stream_idle_timeout, 5m in Envoy; on a federated
	// server's route, requestTimeout plus federatedIdleMargin, 5s; 0 disables).
	IdleTimeout *config.Duration `json:"idleTimeout,omitempty"`
	// ConnectionIdleTimeout closes upstream connections idle this long
	// (default 30s; > 0).
	ConnectionIdleTimeout *config.Duration `json:"connectionIdleTimeout,omitempty"`
	// MaxConnections, MaxPendingRequests and MaxRequests are the cluster's
	// circuit breakers (default 1024 each; >= 1).
	MaxConnections     *uint32 `json:"maxConnections,omitempty"`
	MaxPendingRequests *uint32 `json:"maxPendingRequests,omitempty"`
	MaxRequests        *uint32 `json:"maxRequests,omitempty"`
	// MaxRetries is how often one call is retried (default 3; 0 disables
	// retries). It is also the retries circuit breaker unless
	// MaxConcurrentRetries is set.
	MaxRetries *uint32 `json:"maxRetries,omitempty"`
	// MaxConcurrentRetries is the retries circuit breaker: retries in flight
	// across the cluster (default: the effective MaxRetries).
	MaxConcurrentRetries *uint32 `json:"maxConcurrentRetries,omitempty"`
	// PerTryTimeout bounds each attempt (default unset: every attempt may use
	// what is left of RequestTimeout; > 0 and not above RequestTimeout).
	PerTryTimeout *config.Duration `json:"perTryTimeout,omitempty"`
	// RetryOn are Envoy's retry conditions (default connect-failure,
	// refused-stream, reset-before-request: only failures where the Tool
	// Service cannot have seen the call). At least one.
	RetryOn []string `json:"retryOn,omitempty"`
	// OutlierDetection and HealthCheck turn passive and active health
	// checking on (an object, even {}) or off (enabled: false).
	OutlierDetection *OutlierTuning     `json:"outlierDetection,omitempty"`
	HealthCheck      *HealthCheckTuning `json:"healthCheck,omitempty"`
	// LBPolicy is cluster.lb_policy (default ROUND_ROBIN).
	LBPolicy *string `json:"lbPolicy,omitempty"`
	// HTTP2 speaks HTTP/2 to the Tool Service instead of HTTP/1.1.
	HTTP2 *bool `json:"http2,omitempty"`
	// SNI is the TLS server name sent to an https Tool Service and the name
	// its certificate must carry (default: the URL host when it is a DNS
	// name; none for IP literals). Per service only.
	SNI *string `json:"sni,omitempty"`
	// CAFile is the CA bundle, on Envoy's file system, an https Tool
	// Service's certificate is verified against (default
	// Options.UpstreamCAFile).
	CAFile *string `json:"caFile,omitempty"`
	// HealthyPanicThreshold is common_lb_config.healthy_panic_threshold in
	// percent (default 0: never panic, so a Tool Service whose only
	// endpoint is ejected or failing health checks is answered at once
	// with 503 no healthy upstream; Envoy's own default is 50; 0..100).
	HealthyPanicThreshold *float64 `json:"healthyPanicThreshold,omitempty"`
	// MaxRequestBytes lowers the largest request body Envoy accepts on the
	// routes that list this Tool Service: a route's limit is the largest of
	// its services' (default Options.MaxRequestBytes, which is also the
	// ceiling; >= 1).
	MaxRequestBytes *uint64 `json:"maxRequestBytes,omitempty"`
}

// OutlierTuning is the outlierDetection object of a Tuning layer.
type OutlierTuning struct {
	// Enabled false turns outlier detection off; absent or true turns it on.
	Enabled            *bool            `json:"enabled,omitempty"`
	Consecutive5xx     *uint32          `json:"consecutive5xx,omitempty"`     // default 5; >= 1
	Interval           *config.Duration `json:"interval,omitempty"`           // default 10s; > 0
	BaseEjectionTime   *config.Duration `json:"baseEjectionTime,omitempty"`   // default 30s; > 0
	MaxEjectionPercent *uint32          `json:"maxEjectionPercent,omitempty"` // default 10; 1..100
}

// HealthCheckTuning is the healthCheck object of a Tuning layer (active
// HTTP health checks).
type HealthCheckTuning struct {
	// Enabled false turns health checks off; absent or true turns them on.
	Enabled            *bool            `json:"enabled,omitempty"`
	Path               *string          `json:"path,omitempty"`               // default /healthz
	Interval           *config.Duration `json:"interval,omitempty"`           // default 5s; > 0
	Timeout            *config.Duration `json:"timeout,omitempty"`            // default 1s; > 0
	HealthyThreshold   *uint32          `json:"healthyThreshold,omitempty"`   // default 1; >= 1
	UnhealthyThreshold *uint32          `json:"unhealthyThreshold,omitempty"` // default 3; >= 1
}

// Built-in defaults of the knobs the Portal contract does not have. The
// Portal's own defaults are registry.Default*.
const (
	// DefaultConnectionIdleTimeout is below the keep-alive timeout of most
	// servers, so Envoy seldom reuses a connection the Tool Service just
	// closed; the reset-before-request retry covers the remaining race.
	DefaultConnectionIdleTimeout = 30 * time.Second
	// DefaultHealthyPanicThreshold turns Envoy's panic mode off. Envoy's
	// default (50%) load-balances over every host once fewer than half are
	// healthy (LoadBalancerBase::recalculatePerPriorityPanic in
	// source/common/upstream/load_balancer_impl.cc), so a Tool Service with
	// one endpoint keeps getting calls while it is ejected or unhealthy, and
	// outlier detection and health checks never fail fast. At 0% an
	// unhealthy service is answered at once with 503 no healthy upstream.
	DefaultHealthyPanicThreshold = 0.0
)

// DefaultRetryOn are the retry conditions of a Tool Service route. Tool
// calls are not assumed idempotent, so only failures where Envoy knows the
// Tool Service cannot have seen the call are retried (reset-before-request
// needs Envoy >= 1.31). Plain "reset" and 5xx could replay a call that ran.
var DefaultRetryOn = []string{"connect-failure", "refused-stream", "reset-before-request"}

// retryConditions are the HTTP retry_on values Envoy knows and toolmesh can
// use: retriable-status-codes and retriable-headers need route fields
// toolmesh does not set, and gRPC conditions do not apply to HTTP Tool
// Services.
var retryConditions = []string{
	"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure",
	"envoy-ratelimited", "retriable-4xx", "refused-stream", "http3-post-connect-failure",
}

// settings are a Tool Service's effective cluster settings: every layer
// merged and every default filled in.
type settings struct {
	connectTimeout       time.Duration
	requestTimeout       time.Duration // 0: no route timeout
	idleTimeout          *time.Duration
	connIdleTimeout      time.Duration
	maxConnections       uint32
	maxPendingRequests   uint32
	maxRequests          uint32
	maxRetries           uint32
	maxConcurrentRetries uint32
	perTryTimeout        time.Duration // 0: unset
	retryOn              string        // comma-separated, as Envoy takes it
	outlier              *registry.OutlierDetection
	health               *registry.HealthCheck
	lbPolicy             string
	http2                bool
	sni                  *string // nil: derived from the URL host
	caFile               string
	maxRequestBytes      uint64
	panicThreshold       float64 // percent
}

var defaultRetryOn = strings.Join(DefaultRetryOn, ",")

// resolveSettings merges, lowest first: built-in defaults, the Portal's
// cluster object (its zero fields mean unset), then each override layer
// (nil layers are skipped).
func resolveSettings(portal *registry.ClusterSettings, opts Options, layers ...*Tuning) settings {
	s := settings{
		connectTimeout:     registry.DefaultConnectTimeout,
		requestTimeout:     registry.DefaultRequestTimeout,
		connIdleTimeout:    DefaultConnectionIdleTimeout,
		maxConnections:     registry.DefaultMaxConnections,
		maxPendingRequests: registry.DefaultMaxPendingRequests,
		maxRequests:        registry.DefaultMaxRequests,
		maxRetries:         registry.DefaultMaxRetries,
		retryOn:            defaultRetryOn,
		lbPolicy:           registry.DefaultLBPolicy,
		caFile:             opts.UpstreamCAFile,
		maxRequestBytes:    opts.MaxRequestBytes,
		panicThreshold:     DefaultHealthyPanicThreshold,
	}
	if portal != nil {
		p := portal.WithDefaults()
		s.connectTimeout = p.ConnectTimeout.D()
		s.requestTimeout = p.RequestTimeout.D()
		s.maxConnections = p.MaxConnections
		s.maxPendingRequests = p.MaxPendingRequests
		s.maxRequests = p.MaxRequests
		s.maxRetries = p.MaxRetries
		s.lbPolicy = p.LBPolicy
		s.http2 = p.HTTP2
		s.outlier = p.OutlierDetection
		s.health = p.HealthCheck
	}
	var concurrentRetries *uint32
	for _, t := range layers {
		if t == nil {
			continue
		}
		setD(&s.connectTimeout, t.ConnectTimeout)
		setD(&s.requestTimeout, t.RequestTimeout)
		if t.IdleTimeout != nil {
			d := t.IdleTimeout.D()
			s.idleTimeout = &d
		}
		setD(&s.connIdleTimeout, t.ConnectionIdleTimeout)
		set(&s.maxConnections, t.MaxConnections)
		set(&s.maxPendingRequests, t.MaxPendingRequests)
		set(&s.maxRequests, t.MaxRequests)
		set(&s.maxRetries, t.MaxRetries)
		if t.MaxConcurrentRetries != nil {
			concurrentRetries = t.MaxConcurrentRetries
		}
		setD(&s.perTryTimeout, t.PerTryTimeout)
		if t.RetryOn != nil {
			s.retryOn = strings.Join(t.RetryOn, ",")
		}
		s.outlier = applyOutlier(s.outlier, t.OutlierDetection)
		s.health = applyHealthCheck(s.health, t.HealthCheck)
		set(&s.lbPolicy, t.LBPolicy)
		set(&s.http2, t.HTTP2)
		if t.SNI != nil {
			s.sni = t.SNI
		}
		set(&s.caFile, t.CAFile)
		set(&s.maxRequestBytes, t.MaxRequestBytes)
		set(&s.panicThreshold, t.HealthyPanicThreshold)
	}
	s.maxConcurrentRetries = s.maxRetries
	if concurrentRetries != nil {
		s.maxConcurrentRetries = *concurrentRetries
	}
	return s
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func setD(dst *time.Duration, v *config.Duration) {
	if v != nil {
		*dst = v.D()
	}
}

// applyOutlier lays t over the outlier detection in force (nil: off). A
// layer that enables it starts from the defaults when it was off.
func applyOutlier(cur *registry.OutlierDetection, t *OutlierTuning) *registry.OutlierDetection {
	if t == nil {
		return cur
	}
	if t.Enabled != nil && !*t.Enabled {
		return nil
	}
	var od registry.OutlierDetection
	if cur != nil {
		od = *cur
	} else {
		od = *(registry.ClusterSettings{OutlierDetection: &od}).WithDefaults().OutlierDetection
	}
	set(&od.Consecutive5xx, t.Consecutive5xx)
	set(&od.Interval, t.Interval)
	set(&od.BaseEjectionTime, t.BaseEjectionTime)
	set(&od.MaxEjectionPercent, t.MaxEjectionPercent)
	return &od
}

// applyHealthCheck is applyOutlier for active health checks.
func applyHealthCheck(cur *registry.HealthCheck, t *HealthCheckTuning) *registry.HealthCheck {
	if t == nil {
		return cur
	}
	if t.Enabled != nil && !*t.Enabled {
		return nil
	}
	var hc registry.HealthCheck
	if cur != nil {
		hc = *cur
	} else {
		hc = *(registry.ClusterSettings{HealthCheck: &hc}).WithDefaults().HealthCheck
	}
	set(&hc.Path, t.Path)
	set(&hc.Interval, t.Interval)
	set(&hc.Timeout, t.Timeout)
	set(&hc.HealthyThreshold, t.HealthyThreshold)
	set(&hc.UnhealthyThreshold, t.UnhealthyThreshold)
	return &hc
}

// check returns the problems of the fields set in t, each starting with the
// field's path so the caller can prefix where t comes from. inDefaults
// rejects what only makes sense for one service.
func (t *Tuning) check(inDefaults bool) []error {
	var errs []error
	add := func(field string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	add("connectTimeout", positive(t.ConnectTimeout))
	add("requestTimeout", nonNegative(t.RequestTimeout))
	add("idleTimeout", nonNegative(t.IdleTimeout))
	add("connectionIdleTimeout", positive(t.ConnectionIdleTimeout))
	add("maxConnections", atLeastOne(t.MaxConnections))
	add("maxPendingRequests", atLeastOne(t.MaxPendingRequests))
	add("maxRequests", atLeastOne(t.MaxRequests))
	add("perTryTimeout", positive(t.PerTryTimeout))
	if t.RetryOn != nil {
		if len(t.RetryOn) == 0 {
			add("retryOn", errors.New("must name at least one condition (maxRetries: 0 disables retries)"))
		}
		for i, c := range t.RetryOn {
			field := fmt.Sprintf("retryOn[%d]", i)
			switch {
			case !slices.Contains(retryConditions, c):
				add(field, fmt.Errorf("%q is not a retry condition toolmesh can use (%s)", c, strings.Join(retryConditions, ", ")))
			case slices.Index(t.RetryOn, c) < i:
				add(field, fmt.Errorf("%q is listed twice", c))
			}
		}
	}
	if od := t.OutlierDetection; od != nil {
		add("outlierDetection.consecutive5xx", atLeastOne(od.Consecutive5xx))
		add("outlierDetection.interval", positive(od.Interval))
		add("outlierDetection.baseEjectionTime", positive(od.BaseEjectionTime))
		if p := od.MaxEjectionPercent; p != nil && (*p < 1 || *p > 100) {
			add("outlierDetection.maxEjectionPercent", fmt.Errorf("%d is not in 1..100", *p))
		}
	}
	if hc := t.HealthCheck; hc != nil {
		if hc.Path != nil {
			add("healthCheck.path", checkHealthPath(*hc.Path))
		}
		add("healthCheck.interval", positive(hc.Interval))
		add("healthCheck.timeout", positive(hc.Timeout))
		add("healthCheck.healthyThreshold", atLeastOne(hc.HealthyThreshold))
		add("healthCheck.unhealthyThreshold", atLeastOne(hc.UnhealthyThreshold))
	}
	if p := t.LBPolicy; p != nil {
		if _, ok := lbPolicies[*p]; !ok {
			add("lbPolicy", fmt.Errorf("%q is not one of ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV", *p))
		}
	}
	if t.SNI != nil {
		switch sni := *t.SNI; {
		case inDefaults:
			add("sni", errors.New("names one server, so it is set per service, not in defaults"))
		case net.ParseIP(sni) != nil:
			add("sni", fmt.Errorf("%q is an IP address; SNI must be a DNS name (RFC 6066 §3)", sni))
		case !validHostname(sni):
			add("sni", fmt.Errorf("%q is not a DNS name", sni))
		}
	}
	if t.CAFile != nil {
		add("caFile", checkCAFile(*t.CAFile))
	}
	if p := t.HealthyPanicThreshold; p != nil && !(*p >= 0 && *p <= 100) {
		add("healthyPanicThreshold", fmt.Errorf("%g is not a percentage in 0..100", *p))
	}
	if b := t.MaxRequestBytes; b != nil && *b == 0 {
		add("maxRequestBytes", errors.New("must be at least 1"))
	}
	return errs
}

// checkPortal returns the problems of a Portal cluster object that the
// translator cannot take, each starting with its field path. They match
// the registry's own rules, so a listing the registry accepted passes.
func checkPortal(c *registry.ClusterSettings) []error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.LBPolicy != "" {
		if _, ok := lbPolicies[c.LBPolicy]; !ok {
			errs = append(errs, fmt.Errorf("lbPolicy: %q is not one of ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV", c.LBPolicy))
		}
	}
	if od := c.OutlierDetection; od != nil && od.MaxEjectionPercent > 100 {
		errs = append(errs, fmt.Errorf("outlierDetection.maxEjectionPercent: %d is over 100", od.MaxEjectionPercent))
	}
	if hc := c.HealthCheck; hc != nil && hc.Path != "" {
		if err := checkHealthPath(hc.Path); err != nil {
			errs = append(errs, fmt.Errorf("healthCheck.path: %w", err))
		}
	}
	for _, d := range []struct {
		field string
		v     config.Duration
	}{
		{"connectTimeout", c.ConnectTimeout}, {"requestTimeout", c.RequestTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative", d.field, d.v.D()))
		}
	}
	return errs
}

// crossCheck returns the problems of a service's effective settings that
// no single layer shows, naming where each involved field was set (origin
// maps a field name to its layer).
func (s settings) crossCheck(opts Options, origin func(field string) string) []error {
	var errs []error
	if s.perTryTimeout > 0 && s.requestTimeout > 0 && s.perTryTimeout > s.requestTimeout {
		errs = append(errs, fmt.Errorf("perTryTimeout: %s (from %s) is longer than requestTimeout %s (from %s), so no retry could ever start",
			s.perTryTimeout, origin("perTryTimeout"), s.requestTimeout, origin("requestTimeout")))
	}
	if s.maxRequestBytes > opts.MaxRequestBytes {
		// The extproc server enforces the deployment-wide limit too (cmd
		// gives both the same value), so a larger one could never apply.
		errs = append(errs, fmt.Errorf("maxRequestBytes: %d (from %s) is over the deployment-wide limit %d (Options.MaxRequestBytes), which the extproc server enforces as well; raise that instead",
			s.maxRequestBytes, origin("maxRequestBytes"), opts.MaxRequestBytes))
	}
	return errs
}

func positive(d *config.Duration) error {
	if d != nil && *d <= 0 {
		return fmt.Errorf("%s must be positive", d.D())
	}
	return nil
}

func nonNegative(d *config.Duration) error {
	if d != nil && *d < 0 {
		return fmt.Errorf("%s is negative", d.D())
	}
	return nil
}

func atLeastOne(n *uint32) error {
	if n != nil && *n == 0 {
		return errors.New("must be at least 1")
	}
	return nil
}

// checkHealthPath applies the registry's rules for a path sent on the wire.
func checkHealthPath(p string) error {
	switch {
	case !utf8.ValidString(p):
		return errors.New("not valid UTF-8")
	case p == "" || p[0] != '/':
		return fmt.Errorf("%q must start with /", p)
	case strings.Contains(p, ".."):
		return fmt.Errorf(`%q must not contain ".."`, p)
	case strings.ContainsRune(p, '#'):
		return fmt.Errorf("%q must not contain a fragment", p)
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q must not contain blanks or control characters", p)
		}
	}
	return nil
}

func checkCAFile(p string) error {
	switch {
	case !utf8.ValidString(p):
		return errors.New("not valid UTF-8")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q must be an absolute path on Envoy's file system", p)
	}
	for _, c := range p {
		if c < ' ' || c == 0x7f {
			return fmt.Errorf("%q must not contain control characters", p)
		}
	}
	return nil
}
