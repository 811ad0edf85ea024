package xds

// What the tests read of a Server, which the product does not use.

// Current returns the resources of the last pushed snapshot of every route
// (AllRoutesGroup), nil before the first push. Callers must not modify
// them.
func (s *Server) Current() *Resources { return s.current.Load() }

// Version returns the version of the last pushed snapshot of every route
// (AllRoutesGroup), "" before the first push.
func (s *Server) Version() string { return s.state.Load().version }
