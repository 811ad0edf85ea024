package extproc

import (
	"fmt"
	"maps"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/relay"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
)

// Runtime is the per-request configuration in force: everything a request
// reads that a reload may change. A stream captures it once, when it
// opens, so every phase of one request sees one generation even when a
// SIGHUP or an overrides change swaps it in between (ADR 0021). A Runtime
// never changes once SetRuntime or UpdateRuntime accepted it; a reload
// builds a new one.
type Runtime struct {
	// Auth authenticates callers and answers the protected-resource
	// metadata; nil: every route is open.
	Auth *authn.Profiles
	// Policies are the authorization policies; nil: none.
	Policies *authz.Set
	// Approval is the approval configuration; nil: no call needs approval.
	Approval *approval.Approver
	// RateLimits are the rate and concurrency limits; nil: none.
	RateLimits *ratelimit.Limiter
	// RelayKeys mint and open the ids of federated servers' requests to the
	// client; nil keeps the key the server generated at start (one replica
	// only).
	RelayKeys *relay.Keys
	// SessionKeys seal legacy clients' session tokens, derived from the
	// relay keys (clientsession.go); nil keeps the key generated at start.
	SessionKeys *session.Keys
	// UpstreamAuth is what calls to Tool Services carry (extproc/upstreamcred).
	UpstreamAuth upstreamcred.Auth
	// BodyLimits are the per-Tool-Service request body limits.
	BodyLimits BodyLimits
	// Filters gives each route's filter chain (docs/wasm-abi.md); a
	// filters.Set implements it. nil: the only policy is input-schema
	// validation, done inline.
	Filters Filters
}

// normalized validates rt and returns the copy the server keeps: maps
// copied (the caller may reuse its own), forwardClaims header names lower
// case (upstreamcred.Auth.Normalized). Errors name the configuration key to
// change.
func (rt *Runtime) normalized() (*Runtime, error) {
	u, err := rt.UpstreamAuth.Normalized()
	if err != nil {
		return nil, err
	}
	c := *rt
	c.UpstreamAuth = u
	for k, v := range rt.BodyLimits.Services {
		if v < 0 {
			return nil, fmt.Errorf("maxRequestBytes of Tool Service %s: %d is negative", k, v)
		}
	}
	c.BodyLimits = BodyLimits{Default: rt.BodyLimits.Default, Services: maps.Clone(rt.BodyLimits.Services)}
	return &c, nil
}

// SetRuntime validates rt and puts it in force for the streams that open
// from now on; on error the Runtime in force stays.
func (s *Server) SetRuntime(rt *Runtime) error {
	return s.UpdateRuntime(func(*Runtime) (*Runtime, error) { return rt, nil })
}

// UpdateRuntime builds the next Runtime from the one in force (never nil)
// and puts it in force; next must return a new value, not change cur. On
// error from next or from validation the Runtime in force stays. Updates
// are serialized, so two reload paths (SIGHUP, the overrides file) never
// lose each other's change.
func (s *Server) UpdateRuntime(next func(cur *Runtime) (*Runtime, error)) error {
	s.runtimeMu.Lock()
	defer s.runtimeMu.Unlock()
	cur := s.runtime.Load()
	rt, err := next(cur)
	if err != nil {
		return err
	}
	c, err := rt.normalized()
	if err != nil {
		return err
	}
	var prevAuth *upstreamcred.Auth
	if cur != nil {
		prevAuth = &cur.UpstreamAuth
	}
	if err := c.UpstreamAuth.BuildAfter(prevAuth); err != nil {
		return err
	}
	if c.RelayKeys == nil {
		c.RelayKeys = s.startKeys
	}
	if c.SessionKeys == nil {
		c.SessionKeys = s.startSessionKeys
	}
	s.runtime.Store(c)
	if cur == nil || cur.Policies != c.Policies {
		// The cached per-caller views belong to the previous set; a
		// request that captured one finishes with it.
		s.policyViews.Clear()
	}
	return nil
}

// Runtime is the Runtime in force (never nil); it must not be changed.
func (s *Server) Runtime() *Runtime { return s.runtime.Load() }

// bodyLimit returns the body limit of a Tool Service, 0 for none.
func (rt *Runtime) bodyLimit(service string) int64 {
	if v, ok := rt.BodyLimits.Services[service]; ok {
		return v
	}
	return rt.BodyLimits.Default
}
