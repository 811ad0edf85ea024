package app

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/extproc/ratelimit"
)

// checkRLSTimeout checks that an RLS call fits in Envoy's wait for the
// extproc server (rateLimits itself is checked by AccessConfig.Validate).
func (c *Config) checkRLSTimeout() error {
	if c.RateLimits != nil && c.RateLimits.RLS != nil && c.RateLimits.RLS.Timeout.D() >= c.MessageTimeout.D() && c.MessageTimeout > 0 {
		return fmt.Errorf("rateLimits.rls.timeout: %s must be below messageTimeout (%s): Envoy fails a request whose ext_proc answer takes longer",
			c.RateLimits.RLS.Timeout.D(), c.MessageTimeout.D())
	}
	return nil
}

// startRateLimits puts the configured limits in force in the extproc server.
func (a *app) startRateLimits(reg prometheus.Registerer) error {
	m, err := ratelimit.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("rate limits: %w", err)
	}
	a.rateLimitMetrics = m
	l, err := ratelimit.New(a.cfg.RateLimits, nil, m, a.log.With(slog.String("component", "ratelimit")))
	if err != nil {
		return err
	}
	a.extprocServer.SetRateLimiter(l)
	return nil
}

// reloadRateLimits puts the reloaded rateLimits block in force (SIGHUP):
// unchanged limits keep their counters and calls in flight; on error the
// limits in force stay and the error names the entry.
func (a *app) reloadRateLimits(cfg Config) {
	if a.extprocServer == nil {
		return
	}
	if err := errors.Join(cfg.RateLimits.Validate(), cfg.checkRLSTimeout()); err != nil {
		a.log.Error("rateLimits reload failed; the limits in force stay", slog.Any("error", err))
		return
	}
	old := a.extprocServer.RateLimiter()
	l, err := ratelimit.New(cfg.RateLimits, old, a.rateLimitMetrics, a.log.With(slog.String("component", "ratelimit")))
	if err != nil {
		a.log.Error("rateLimits reload failed; the limits in force stay", slog.Any("error", err))
		return
	}
	a.extprocServer.SetRateLimiter(l)
	old.Close(l)
	a.log.Info("rateLimits reloaded", slog.Int("limits", len(l.InForce())))
}
