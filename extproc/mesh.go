package extproc

import "github.com/toolmesh/toolmesh/extproc/identity"

// Mesh identity (docs/decisions/0010-caller-identity-and-upstream-credentials.md):
// behind mTLS, Envoy hands the downstream peer certificate's SPIFFE ID to
// ext_proc as a request attribute (identity.MeshID).

// meshCaller sets x.caller.MeshID from the request attributes when they
// carry a SPIFFE ID. A token-derived caller set before keeps its fields;
// otherwise a caller with only the mesh identity is created.
func (x *request) meshCaller() {
	if x.caller == nil && x.s.callerSeam != nil {
		x.caller = x.s.callerSeam(x.headers)
	}
	id := identity.MeshID(x.attributes)
	if id == "" {
		return
	}
	if x.caller == nil {
		x.caller = &identity.Caller{MeshID: id}
		return
	}
	// A Caller is never mutated once set: copy.
	c := *x.caller
	c.MeshID = id
	x.caller = &c
}
