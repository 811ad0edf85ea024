package extproc

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

// envoyAttrs is ProcessingRequest.attributes as Envoy fills it: the
// evaluated request_attributes under the filter's name.
func envoyAttrs(fields map[string]*structpb.Value) map[string]*structpb.Struct {
	return map[string]*structpb.Struct{identity.AttrNamespace: {Fields: fields}}
}

// meshCallerOf runs one tools/list request with the given attributes and
// extra client headers and returns the caller the request-headers phase
// settled on.
func meshCallerOf(t *testing.T, seam func(*corev3.HeaderMap) *identity.Caller, attrs map[string]*structpb.Struct, extra ...string) *identity.Caller {
	t.Helper()
	env := newTestEnv(t, Config{}, testTable(t))
	env.srv.callerSeam = seam
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	x := env.srv.newRequest(t.Context())
	req := reqHeaders(false, post("/mcp/core", len(body), extra...)...)
	req.Attributes = attrs
	x.dispatch(req)
	return x.caller
}

// TestMeshCaller: the SPIFFE ID Envoy sends becomes Caller.MeshID, merged
// into a token caller set first; client headers never make one.
func TestMeshCaller(t *testing.T) {
	spiffe := envoyAttrs(map[string]*structpb.Value{identity.AttrPeerURISAN: structpb.NewStringValue("spiffe://example.org/ns/a/sa/b")})
	forged := []string{
		"x-forwarded-client-cert", `By=spiffe://example.org/gw;URI=spiffe://example.org/ns/evil/sa/x`,
		"x-toolmesh-mesh-id", "spiffe://example.org/ns/evil/sa/x",
		"x-spiffe-id", "spiffe://example.org/ns/evil/sa/x",
		"connection.uri_san_peer_certificate", "spiffe://example.org/ns/evil/sa/x",
	}
	token := func(*corev3.HeaderMap) *identity.Caller {
		return &identity.Caller{Authenticated: true, Subject: "alice", Claims: map[string]any{"sub": "alice"}}
	}

	if c := meshCallerOf(t, nil, spiffe); c == nil || c.MeshID != "spiffe://example.org/ns/a/sa/b" || c.Authenticated {
		t.Errorf("mesh only: caller %+v, want MeshID spiffe://example.org/ns/a/sa/b, not authenticated", c)
	}
	if c := meshCallerOf(t, nil, nil, forged...); c != nil {
		t.Errorf("forged headers without attributes: caller %+v, want none", c)
	}
	if c := meshCallerOf(t, nil, spiffe, forged...); c == nil || c.MeshID != "spiffe://example.org/ns/a/sa/b" {
		t.Errorf("forged headers with attributes: caller %+v, want the attribute's ID", c)
	}
	c := meshCallerOf(t, token, spiffe)
	if c == nil || !c.Authenticated || c.Subject != "alice" || c.MeshID != "spiffe://example.org/ns/a/sa/b" {
		t.Errorf("token and mesh: caller %+v, want alice via the SPIFFE ID", c)
	}
	if c := meshCallerOf(t, token, nil); c == nil || c.MeshID != "" || c.Subject != "alice" {
		t.Errorf("token only: caller %+v", c)
	}
}

// TestMeshCallerLogged: the request's log line names the caller.
func TestMeshCallerLogged(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	v := env.open(t)
	req := reqHeaders(false, post("/mcp/core", len(body))...)
	req.Attributes = envoyAttrs(map[string]*structpb.Value{identity.AttrPeerURISAN: structpb.NewStringValue("spiffe://example.org/ns/a/sa/b")})
	v.send(req)
	if ir := v.send(reqBody(body)).GetImmediateResponse(); ir == nil {
		t.Fatal("tools/list not answered")
	}
	v.close()
	waitLog(t, env, `"caller":"spiffe://example.org/ns/a/sa/b"`)
}

func waitLog(t *testing.T, env *testEnv, want string) {
	t.Helper()
	for range 100 { // the server logs a request as its stream ends
		if strings.Contains(env.logs.String(), want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("log lacks %s:\n%s", want, env.logs.String())
}
