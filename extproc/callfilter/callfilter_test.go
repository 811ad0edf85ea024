package callfilter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

// TestFilterCaller: the filter chain's request carries the caller that
// authentication and the mesh established, never its token.
func TestFilterCaller(t *testing.T) {
	if caller(nil) != nil {
		t.Error("no caller: want nil")
	}
	id := &identity.Caller{Authenticated: true, Issuer: "https://idp", Subject: "alice", MeshID: "spiffe://mesh/a",
		Scopes: []string{"mcp:tools"}, Claims: map[string]any{"team": "x"}, Token: "secret"}
	c := caller(id)
	if c == nil || !c.Authenticated || c.Issuer != "https://idp" || c.Subject != "alice" || c.MeshID != "spiffe://mesh/a" ||
		len(c.Scopes) != 1 || c.Claims["team"] != "x" {
		t.Errorf("filter caller %+v", c)
	}
	if strings.Contains(fmt.Sprintf("%+v", *c), "secret") {
		t.Error("the token reached the filters")
	}
}
