package app

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/extproc"
	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
)

// The extproc server's Runtime (extproc/runtime.go, ADR 0021) is built
// here, whole, from a validated Config: on start (startRuntime) and on
// SIGHUP (reloadRuntime). A block that does not build fails the whole
// Runtime, so a request never sees one block's new configuration next to
// another's old one; the Runtime in force stays and every failing block
// is logged, naming the key to change.

// blockError is a Runtime block that did not build, with the log message
// of its failed reload.
type blockError struct {
	msg string
	err error
}

func (e *blockError) Error() string { return e.err.Error() }
func (e *blockError) Unwrap() error { return e.err }

// runtimeParts are what a Runtime is built from besides the Config: the
// state that outlives a reload.
type runtimeParts struct {
	auth    *authn.Authenticator // key caches carry over
	limits  *ratelimit.Metrics
	filters extproc.Filters
	log     *slog.Logger
}

// buildRuntime turns a validated Config into the extproc Runtime. prev is
// the Runtime in force (nil on start): its body limits (they follow the
// overrides file, not the config), its rate limiter's counters and its
// relay keys, when the config names none, carry over.
func (a *app) buildRuntime(cfg *Config, prev *extproc.Runtime, p runtimeParts) (*extproc.Runtime, error) {
	rt := &extproc.Runtime{Filters: p.filters}
	var errs []error
	fail := func(msg string, err error) { errs = append(errs, &blockError{msg, err}) }
	var err error
	if rt.Policies, err = authz.Compile(cfg.Policies); err != nil {
		fail("policy reload failed; the policies in force stay", fmt.Errorf("policies: %w", err))
	}
	if rt.Approval, err = cfg.Approval.build(a.approvalLedger); err != nil {
		fail("approval reload failed; the approval configuration in force stays", err)
	}
	if rt.RelayKeys, err = buildRelayKeys(cfg.RelayKeys); err != nil {
		fail("relayKeys reload failed; the keys in force stay", err)
	} else if rt.SessionKeys, err = buildSessionKeys(cfg.RelayKeys); err != nil { // sessionkeys.go
		fail("relayKeys reload failed; the keys in force stay", err)
	}
	// The token clients of unchanged entries carry over from the ones in
	// force, which listings share (extproc/upstreamcred).
	if ua, err := upstreamcred.Build(cfg.UpstreamAuth, cfg.Credentials, a.upstreamAuth.Load()); err != nil {
		fail("upstreamAuth reload failed; the last good configuration stays in force", err)
	} else {
		rt.UpstreamAuth = *ua
	}
	if err := errors.Join(cfg.RateLimits.Validate(), cfg.checkRLSTimeout()); err != nil {
		fail("rateLimits reload failed; the limits in force stay", err)
	}
	if rt.Auth, err = p.auth.Compile(cfg.ResourceBase, cfg.Auth); err != nil {
		fail("auth reload failed; the configuration in force stays", fmt.Errorf("auth: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if prev != nil {
		rt.BodyLimits = prev.BodyLimits
		if rt.RelayKeys == nil {
			rt.RelayKeys = prev.RelayKeys // a removed key keeps the keys in force
		}
	}
	// Last: a Limiter may hold a connection to the rate limit service.
	var old *ratelimit.Limiter
	if prev != nil {
		old = prev.RateLimits
	}
	if rt.RateLimits, err = ratelimit.New(cfg.RateLimits, old, p.limits, p.log.With(slog.String("component", "ratelimit"))); err != nil {
		return nil, &blockError{"rateLimits reload failed; the limits in force stay", err}
	}
	return rt, nil
}

// runtimeParts are the app's parts of its Runtime.
func (a *app) runtimeParts() runtimeParts {
	p := runtimeParts{auth: a.auth, limits: a.rateLimitMetrics, log: a.log}
	if a.filters != nil { // never a typed nil in the interface
		p.filters = a.filters
	}
	return p
}

// startRuntime makes the parts that outlive reloads and builds the first
// Runtime, for extproc.Config.Runtime.
func (a *app) startRuntime(reg prometheus.Registerer) (*extproc.Runtime, error) {
	a.auth = authn.New(authn.Options{Log: a.log.With(slog.String("component", "authn"))})
	m, err := ratelimit.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("rate limits: %w", err)
	}
	a.rateLimitMetrics = m
	return a.buildRuntime(&a.cfg, nil, a.runtimeParts())
}

// reloadRuntime puts the Runtime of the reloaded configuration in force
// (SIGHUP); when any block fails, each failure is logged and the Runtime
// in force stays whole.
func (a *app) reloadRuntime(cfg Config) {
	if a.extprocServer == nil {
		return
	}
	var prev, next *extproc.Runtime
	err := a.extprocServer.UpdateRuntime(func(cur *extproc.Runtime) (*extproc.Runtime, error) {
		prev = cur
		var err error
		next, err = a.buildRuntime(&cfg, cur, a.runtimeParts())
		return next, err
	})
	if err != nil {
		if next != nil {
			next.RateLimits.Close(prev.RateLimits)
		}
		a.logBlockErrors(err)
		a.log.Error("SIGHUP: the runtime does not build; it keeps its last good configuration", slog.Any("error", err))
		return
	}
	prev.RateLimits.Close(next.RateLimits)
	u := next.UpstreamAuth
	a.upstreamAuth.Store(&u)
	a.log.Info("auth configuration reloaded")
	a.log.Info("authorization policies reloaded")
	a.log.Info("approval configuration reloaded", slog.Bool("enabled", next.Approval != nil))
	a.log.Info("rateLimits reloaded", slog.Int("limits", len(next.RateLimits.InForce())))
	if len(cfg.RelayKeys) > 0 {
		a.log.Info("relayKeys reloaded")
	}
	a.log.Info("SIGHUP: upstreamAuth reloaded", slog.Int("services", len(cfg.UpstreamAuth)))
}

// logBlockErrors logs each failed block of err with its own message.
func (a *app) logBlockErrors(err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var be *blockError
		if errors.As(e, &be) {
			a.log.Error(be.msg, slog.Any("error", be.err))
		}
	}
}
