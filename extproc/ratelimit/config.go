// Package ratelimit limits tools/call requests per route, tool and caller
// (docs/ratelimit.md, docs/decisions/0017-rate-limits.md): local limits are
// token buckets and in-flight counters in this process; global limits are
// asked of an Envoy rate limit service (envoy.service.ratelimit.v3) such as
// envoyproxy/ratelimit or Limitador. A Limiter is immutable once built; a
// reload builds a new one that inherits the counters of unchanged limits.
package ratelimit

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/internal/config"
)

// Config is the rateLimits block of the config file.
type Config struct {
	// Default are the limits of every route without an entry in Routes.
	Default []Limit `json:"default,omitempty"`
	// Routes gives a route its own limits, replacing Default as a whole
	// (an empty list: none).
	Routes map[string][]Limit `json:"routes,omitempty"`
	// MaxKeys bounds the keys (callers, tools ...) each local limit tracks
	// in this process (default 100000); past it, idle keys are evicted and
	// new keys share one bucket until room is free.
	MaxKeys int `json:"maxKeys,omitempty"`
	// RLS is the global rate limit service; required when a limit is global.
	RLS *RLSConfig `json:"rls,omitempty"`
}

// RLSConfig says how to reach the rate limit service.
type RLSConfig struct {
	// Address is the service's gRPC host:port (plaintext).
	Address string `json:"address"`
	// Domain is the RateLimitRequest domain (default toolmesh).
	Domain string `json:"domain,omitempty"`
	// Timeout bounds one ShouldRateLimit call (default 100ms, at most 10s).
	Timeout config.Duration `json:"timeout,omitempty"`
	// FailureMode is what a call gets when the service fails or times out:
	// allow (default) or deny.
	FailureMode string `json:"failureMode,omitempty"`
	// LogInterval: a failing service is logged at most once per interval
	// (default 1m).
	LogInterval config.Duration `json:"logInterval,omitempty"`
}

// Limit is one limit entry: which calls it counts, how it keys them, and
// the rate and/or concurrency it allows.
type Limit struct {
	// Name identifies the limit in metrics, headers, errors and RLS
	// descriptors; unique per route (A-Z a-z 0-9 _ - .).
	Name string `json:"name"`
	// Tools are tool name patterns (path.Match); Annotations are tool
	// annotations that must be true (any of them). Both unset: every tool.
	// Both set: a tool matching either.
	Tools       []string `json:"tools,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
	// By are the parts of the key, one bucket per distinct value: caller,
	// tool, mesh, address, claim:NAME. Unset: one bucket for the route.
	By []string `json:"by,omitempty"`
	// Requests per Per (second, minute, hour, day) with a Burst (default
	// Requests) is the rate; unset for a concurrency-only or global limit.
	Requests int64  `json:"requests,omitempty"`
	Per      string `json:"per,omitempty"`
	Burst    int64  `json:"burst,omitempty"`
	// Concurrency bounds the calls in flight per key (always local).
	Concurrency int64 `json:"concurrency,omitempty"`
	// Global sends the limit to the rate limit service as a descriptor; its
	// rate is configured there.
	Global bool `json:"global,omitempty"`
}

// Key parts of Limit.By.
const (
	ByCaller  = "caller"  // issuer+subject, else the mesh identity, else the client address
	ByTool    = "tool"    // the tool's name
	ByMesh    = "mesh"    // the mesh identity (SPIFFE ID), empty when none
	ByAddress = "address" // the client address
	byClaim   = "claim:"  // claim:NAME, a claim of the token (empty when absent)
)

// Failure modes.
const (
	FailureAllow = "allow"
	FailureDeny  = "deny"
)

const (
	defaultMaxKeys     = 100000
	defaultDomain      = "toolmesh"
	defaultRLSTimeout  = 100 * time.Millisecond
	maxRLSTimeout      = 10 * time.Second
	defaultLogInterval = time.Minute
	maxNameLen         = 64
)

var units = map[string]time.Duration{
	"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
}

// Validate checks the whole block; every error names its entry
// (rateLimits.routes.ROUTE[i] (name N).field).
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	var errs []error
	global := false
	check := func(where string, ls []Limit) {
		seen := map[string]bool{}
		for i, l := range ls {
			at := fmt.Sprintf("%s[%d]", where, i)
			if l.Name != "" {
				at += " (name " + l.Name + ")"
				if seen[l.Name] {
					errs = append(errs, fmt.Errorf("%s: name: repeated in %s", at, where))
				}
				seen[l.Name] = true
			}
			errs = append(errs, l.problems(at)...)
			global = global || l.Global
		}
	}
	check("rateLimits.default", c.Default)
	for route, ls := range c.Routes {
		check("rateLimits.routes."+route, ls)
	}
	if c.MaxKeys < 0 || c.MaxKeys > 10_000_000 {
		errs = append(errs, fmt.Errorf("rateLimits.maxKeys: %d is outside 1..10000000", c.MaxKeys))
	}
	if c.RLS != nil {
		errs = append(errs, c.RLS.problems("rateLimits.rls")...)
	} else if global {
		errs = append(errs, errors.New("rateLimits.rls: required because a limit is global"))
	}
	return errors.Join(errs...)
}

// problems are l's errors, each prefixed with at.
func (l *Limit) problems(at string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{at}, args...)...))
	}
	if l.Name == "" {
		bad("name: required")
	} else if len(l.Name) > maxNameLen || strings.TrimLeft(l.Name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.") != "" {
		bad("name: %q must be 1..%d of A-Z a-z 0-9 _ - .", l.Name, maxNameLen)
	}
	for _, p := range l.Tools {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			bad("tools: %q is not a path.Match pattern", p)
		}
	}
	for _, a := range l.Annotations {
		if a == "" {
			bad("annotations: empty name")
		}
	}
	for _, b := range l.By {
		switch {
		case b == ByCaller, b == ByTool, b == ByMesh, b == ByAddress:
		case strings.HasPrefix(b, byClaim) && len(b) > len(byClaim):
		default:
			bad("by: %q is not one of caller, tool, mesh, address, claim:NAME", b)
		}
	}
	rate := l.Requests != 0 || l.Per != "" || l.Burst != 0
	switch {
	case l.Global && rate:
		bad("requests: a global limit's rate is configured in the rate limit service, not here")
	case rate:
		per, ok := units[l.Per]
		if !ok {
			bad("per: %q is not second, minute, hour or day", l.Per)
		}
		if l.Requests < 1 || l.Requests > 1_000_000_000 {
			bad("requests: %d is outside 1..1000000000", l.Requests)
		} else if ok && per/time.Duration(l.Requests) < 1 {
			bad("requests: %d per %s is finer than a nanosecond", l.Requests, l.Per)
		}
		if l.Burst < 0 || l.Burst > 1_000_000_000 {
			bad("burst: %d is outside 1..1000000000", l.Burst)
		}
	}
	if l.Concurrency < 0 {
		bad("concurrency: %d is negative", l.Concurrency)
	}
	if !rate && l.Concurrency == 0 && !l.Global {
		bad("limits nothing: set requests and per, concurrency, or global")
	}
	return errs
}

func (r *RLSConfig) problems(at string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s."+format, append([]any{at}, args...)...))
	}
	if _, _, err := net.SplitHostPort(r.Address); err != nil || r.Address == "" {
		bad("address: %q is not host:port", r.Address)
	}
	if t := r.Timeout.D(); t < 0 || t > maxRLSTimeout {
		bad("timeout: %s is outside 0..%s", t, maxRLSTimeout)
	}
	switch r.FailureMode {
	case "", FailureAllow, FailureDeny:
	default:
		bad("failureMode: %q is not allow or deny", r.FailureMode)
	}
	if r.LogInterval.D() < 0 {
		bad("logInterval: negative")
	}
	return errs
}

func (r *RLSConfig) domain() string {
	if r.Domain == "" {
		return defaultDomain
	}
	return r.Domain
}

func (r *RLSConfig) timeout() time.Duration {
	if r.Timeout == 0 {
		return defaultRLSTimeout
	}
	return r.Timeout.D()
}

func (r *RLSConfig) logInterval() time.Duration {
	if r.LogInterval == 0 {
		return defaultLogInterval
	}
	return r.LogInterval.D()
}
