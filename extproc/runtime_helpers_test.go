package extproc

import (
	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/relay"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
)

// The tests change one part of the Runtime at a time; production builds
// it whole (internal/app).

func (s *Server) with(set func(*Runtime)) error {
	return s.UpdateRuntime(func(cur *Runtime) (*Runtime, error) {
		n := *cur
		set(&n)
		return &n, nil
	})
}

func (s *Server) SetApproval(a *approval.Approver) { _ = s.with(func(r *Runtime) { r.Approval = a }) }
func (s *Server) SetPolicies(p *authz.Set)         { _ = s.with(func(r *Runtime) { r.Policies = p }) }
func (s *Server) SetRateLimiter(l *ratelimit.Limiter) {
	_ = s.with(func(r *Runtime) { r.RateLimits = l })
}
func (s *Server) SetBodyLimits(l BodyLimits) { _ = s.with(func(r *Runtime) { r.BodyLimits = l }) }
func (s *Server) SetRelayKeys(k *relay.Keys) {
	if k != nil {
		_ = s.with(func(r *Runtime) { r.RelayKeys = k })
	}
}
func (s *Server) SetUpstreamAuth(u upstreamcred.Auth) error {
	return s.with(func(r *Runtime) { r.UpstreamAuth = u })
}
func (s *Server) Approval() *approval.Approver    { return s.Runtime().Approval }
func (s *Server) Policies() *authz.Set            { return s.Runtime().Policies }
func (s *Server) RateLimiter() *ratelimit.Limiter { return s.Runtime().RateLimits }

// runtimeOf is cfg's initial Runtime, made when cfg has none.
func runtimeOf(cfg *Config) *Runtime {
	if cfg.Runtime == nil {
		cfg.Runtime = &Runtime{}
	}
	return cfg.Runtime
}
