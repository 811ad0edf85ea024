package extproc

// Full-path tests: a client, the local data plane (package envoy, which
// stands in for Envoy and speaks only the ext_proc protocol to this
// server), this server and real Tool Services on 127.0.0.1 that record the
// headers they receive. The data plane is programmed with the xDS
// translator's own resources.

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"

	"github.com/toolmesh/toolmesh/envoy/dataplane"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/testpki"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// recordingService is a native Tool Service with one tool, tool, that
// records the request headers of each call.
type recordingService struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newRecordingService(t *testing.T) *recordingService {
	rs := &recordingService{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rs.mu.Lock()
		rs.seen = append(rs.seen, r.Header.Clone())
		rs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordingService) last(t *testing.T) http.Header {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.seen) == 0 {
		t.Fatal("the Tool Service got no call")
	}
	return rs.seen[len(rs.seen)-1]
}

// stack is the running path.
type stack struct {
	srv   *Server
	logs  *lockedBuffer
	front *httptest.Server // the data plane's listener
}

// newStack serves route "core" whose Tool Services are services (name →
// URL), each with one tool named after it; with tlsOpts the listener is
// mTLS-only.
func newStack(t *testing.T, services map[string]string, tlsOpts *xds.DownstreamTLS) *stack {
	t.Helper()
	route := registry.Route{Key: "core", PublicPath: "/mcp/core"}
	manifests := map[string]*registry.Manifest{}
	for _, name := range slices.Sorted(maps.Keys(services)) {
		route.ToolServices = append(route.ToolServices, registry.ToolService{Name: name, URL: services[name]})
		manifests[name] = &registry.Manifest{Tools: []registry.ManifestTool{{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	}
	env := newTestEnv(t, Config{}, testRoutes{"/mcp/core": {key: "core", snap: buildSnapshot(t, route, manifests)}})
	front := serveThroughDataPlane(t, env, route, xds.Options{DownstreamTLS: tlsOpts})
	return &stack{srv: env.srv, logs: env.logs, front: front}
}

// serveThroughDataPlane serves env's extproc server on 127.0.0.1 and, in
// front of it, the local data plane programmed with route under opts: the
// returned listener is TLS when opts.DownstreamTLS is set.
func serveThroughDataPlane(t *testing.T, env *testEnv, route registry.Route, opts xds.Options) *httptest.Server {
	t.Helper()
	return serveThroughDataPlaneEdited(t, env, route, opts, nil)
}

// serveThroughDataPlaneEdited is serveThroughDataPlane with the translated
// resources changed by edit before the data plane gets them (nil: as
// translated).
func serveThroughDataPlaneEdited(t *testing.T, env *testEnv, route registry.Route, opts xds.Options, edit func(*xds.Resources)) *httptest.Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(env.srv.GRPCServerOptions()...)
	env.srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	res, err := xds.Translate([]registry.Route{route}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(res)
	}
	dp, err := dataplane.New(dataplane.Options{ExtProcTarget: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	if err := dp.Apply(res.ByType()); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(dp)
	if opts.DownstreamTLS != nil {
		front.TLS = dp.TLSConfig()
		front.StartTLS()
	} else {
		front.Start()
	}
	t.Cleanup(front.Close)
	return front
}

// call sends a tools/call of tool through the data plane and returns the
// HTTP status and body.
func (s *stack) call(t *testing.T, client *http.Client, tool string, hdr map[string]string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.front.URL+"/mcp/core", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = s.front.Client()
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUpstreamCredentialsThroughDataPlane: what real Tool Services receive
// for a client that sends its own token and its own x-caller-* headers.
func TestUpstreamCredentialsThroughDataPlane(t *testing.T) {
	svcs := map[string]*recordingService{}
	urls := map[string]string{}
	for _, n := range []string{"plain", "static", "claims", "token"} {
		svcs[n] = newRecordingService(t)
		urls[n] = svcs[n].URL
	}
	s := newStack(t, urls, nil)
	t.Setenv("TOOLMESH_TEST_STATIC", "static-secret")
	if err := s.srv.SetUpstreamAuth(upstreamcred.Auth{
		Services: map[string]upstreamcred.ServiceAuth{
			"static": {Credential: "static", Prefix: "Bearer "},
			"claims": {ForwardClaims: map[string]string{"x-caller-sub": "sub", "x-caller-email": "email",
				"x-caller-level": "level", "x-caller-note": "note", "x-caller-roles": "roles"}},
			"token": {ForwardToken: true},
		},
		Credentials: map[string]config.CredentialSource{"static": {Env: "TOOLMESH_TEST_STATIC"}},
	}); err != nil {
		t.Fatal(err)
	}
	// Stands in for token authentication: the client's token made this
	// caller, whose "note" claim tries a header injection.
	s.srv.callerSeam = func(*corev3.HeaderMap) *identity.Caller {
		return &identity.Caller{Authenticated: true, Subject: "alice", Token: "client-token", Claims: map[string]any{
			"sub": "alice", "email": "alice@example.org", "level": float64(2),
			"note": "hi\r\nx-injected: yes", "roles": []any{"admin"}}}
	}
	client := map[string]string{"Authorization": "Bearer client-token", "X-Caller-Note": "forged", "X-Caller-Roles": "admin"}

	for _, tc := range []struct {
		tool string
		want map[string]string // header → value; "" means absent
	}{
		{tool: "plain", want: map[string]string{"Authorization": ""}},
		{tool: "static", want: map[string]string{"Authorization": "Bearer static-secret"}},
		{tool: "claims", want: map[string]string{"Authorization": "", "X-Caller-Sub": "alice", "X-Caller-Email": "alice@example.org",
			"X-Caller-Level": "2", "X-Caller-Note": "", "X-Caller-Roles": "", "X-Injected": ""}},
		{tool: "token", want: map[string]string{"Authorization": "Bearer client-token"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			if code, body := s.call(t, nil, tc.tool, client); code != 200 || strings.Contains(body, `"isError":true`) {
				t.Fatalf("tools/call = %d %s", code, body)
			}
			got := svcs[tc.tool].last(t)
			for k, want := range tc.want {
				if v := got.Get(k); v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
			for k, vs := range got {
				for _, v := range vs {
					if strings.ContainsAny(v, "\r\n\x00") {
						t.Errorf("%s carries a line break: %q", k, v)
					}
				}
			}
		})
	}
}

// TestMeshIdentityThroughDataPlane: a client certificate with a SPIFFE ID,
// presented to an mTLS listener, becomes the request's caller; a client
// header claiming another identity changes nothing.
func TestMeshIdentityThroughDataPlane(t *testing.T) {
	ca := testpki.NewCA(t, "mesh")
	server := ca.Server("envoy")
	svc := newRecordingService(t)
	s := newStack(t, map[string]string{"plain": svc.URL}, &xds.DownstreamTLS{
		CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.CertFile})
	clientCert := ca.Client("a-b", "spiffe://example.org/ns/a/sa/b")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: ca.Pool, Certificates: []tls.Certificate{clientCert.TLS}}}}
	t.Cleanup(client.CloseIdleConnections)

	code, body := s.call(t, client, "plain", map[string]string{
		"X-Forwarded-Client-Cert": "By=spiffe://example.org/gw;URI=spiffe://example.org/ns/evil/sa/x",
		"X-Toolmesh-Mesh-Id":      "spiffe://example.org/ns/evil/sa/x",
	})
	if code != 200 {
		t.Fatalf("tools/call = %d %s", code, body)
	}
	waitLogFor(t, s.logs, `"caller":"spiffe://example.org/ns/a/sa/b"`)
	if strings.Contains(s.logs.String(), "ns/evil") && strings.Contains(s.logs.String(), `"caller":"spiffe://example.org/ns/evil`) {
		t.Errorf("a client header became the caller:\n%s", s.logs.String())
	}

	// Without a client certificate the handshake fails: nothing is served.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	t.Cleanup(anon.CloseIdleConnections)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.front.URL+"/mcp/core", strings.NewReader("{}"))
	if resp, err := anon.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %d", resp.StatusCode)
	}
}

func waitLogFor(t *testing.T, logs *lockedBuffer, want string) {
	t.Helper()
	env := &testEnv{logs: logs}
	waitLog(t, env, want)
}
