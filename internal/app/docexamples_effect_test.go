package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolmesh/toolmesh/internal/authtest"
	"github.com/toolmesh/toolmesh/internal/redistest"
	"github.com/toolmesh/toolmesh/internal/testpki"
	"github.com/toolmesh/toolmesh/internal/wasmtest"
)

// exampleCheck is one config example of docs/ (the one of page that
// contains marker) and what shows that it is in effect. An entry with a
// nil check is on the allow-list: why says where it is checked instead,
// or why it is not yet.
type exampleCheck struct {
	page, marker string
	check        func(t *testing.T, example string)
	why          string
}

// exampleChecks are all the config examples of docs/*.md. A new example
// fails TestDocConfigExamplesChecked until it gets an entry here, so the
// examples run through the server and the ones still unchecked stay in
// sight.
var exampleChecks = []exampleCheck{
	{page: "authorization.md", marker: "policies:", check: checkAuthorizationExample},
	{page: "identity.md", marker: "requireAccessTokenTyp", check: checkIdentityAuthExample},
	{page: "config.md", marker: "billing-token", check: checkUpstreamAuthExample},
	{page: "operators.md", marker: "approval:", check: checkApprovalExample},
	{page: "ratelimit.md", marker: "rateLimits:", check: checkRateLimitsExample},
	{page: "surface.md", marker: "surface:", check: checkSurfaceExample},
	{page: "filters.md", marker: "filters:", check: checkFiltersExample},
	{page: "operators.md", marker: "downstreamTLS:", check: checkDownstreamTLSExample},
	{page: "operators.md", marker: "controlTLS:", check: checkControlTLSExample},
	{page: "operators.md", marker: "tracing:", check: checkTracingExample},
	{page: "wasm-abi.md", marker: "filters:", check: checkWasmExample},
	{page: "identity.md", marker: "tokenUrl:", check: checkClientCredentialsExample},
	{page: "identity.md", marker: "clientSecret: gateway-secret", check: checkTokenExchangeExample},
	{page: "sre.md", marker: "nodes:", check: checkNodesExample},
	{page: "config.md", marker: "redis:", check: checkOverviewExample},
	{page: "identity.md", marker: "github-mcp:", check: checkDiscoveredOAuthExample},

	// Checked by tests of their own.
	{page: "config.md", marker: "listingBounds:", why: "TestListingBoundsExample"},
	{page: "config.md", marker: "embeddings:", why: "TestEmbeddingCredentialReachesTheService"},

	// The allow-list: examples not yet run through the server, and why.
}

// TestDocConfigExamplesChecked: every config example of the docs has
// exactly one entry in exampleChecks, and every entry names one example.
func TestDocConfigExamplesChecked(t *testing.T) {
	used := make([]int, len(exampleChecks))
	for _, ex := range configExamples(t) {
		var found []int
		for i, c := range exampleChecks {
			if strings.Contains(ex.where, "/docs/"+c.page+":") && strings.Contains(ex.body, c.marker) {
				found = append(found, i)
				used[i]++
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: %d entries of exampleChecks name this config example, want 1: check it in effect, or put it on the allow-list with why", ex.where, len(found))
		}
	}
	for i, c := range exampleChecks {
		if used[i] != 1 {
			t.Errorf("exampleChecks entry docs/%s %q names %d config examples, want 1", c.page, c.marker, used[i])
		}
		if c.check == nil && c.why == "" {
			t.Errorf("exampleChecks entry docs/%s %q has neither a check nor a why", c.page, c.marker)
		}
	}
}

// TestDocConfigExampleEffects runs `toolmesh run` with each checked config
// example of the docs (placeholders replaced by loopback addresses and
// temporary files) and checks that what the example configures is in
// effect.
func TestDocConfigExampleEffects(t *testing.T) {
	for _, c := range exampleChecks {
		if c.check == nil {
			continue
		}
		t.Run(strings.TrimSuffix(c.page, ".md")+"_"+strings.TrimSuffix(c.marker, ":"), func(t *testing.T) {
			t.Parallel()
			c.check(t, docExample(t, c.page, c.marker, strings.NewReplacer()))
		})
	}
}

// exampleService is a Tool Service with the given tools (a name ending in
// "!" is destructive, one ending in "." read-only, a JSON object a tool of
// the manifest as written); each answers at once and is recorded with the
// Authorization it got.
type exampleService struct {
	url   string
	mu    sync.Mutex
	calls []string // tool|Authorization
}

func startExampleService(t *testing.T, tools ...string) *exampleService {
	t.Helper()
	s := &exampleService{}
	var list []string
	for _, name := range tools {
		if strings.HasPrefix(name, "{") { // a tool as the manifest lists it
			list = append(list, name)
			continue
		}
		ann := ""
		if n, ok := strings.CutSuffix(name, "!"); ok {
			name, ann = n, `,"annotations":{"destructiveHint":true}`
		} else if n, ok := strings.CutSuffix(name, "."); ok {
			name, ann = n, `,"annotations":{"readOnlyHint":true}`
		}
		list = append(list, `{"name":"`+name+`","description":"A tool of the example.","inputSchema":{"type":"object"},"path":"/tools/`+name+`"`+ann+`}`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[`+strings.Join(list, ",")+`]}`)
	})
	mux.HandleFunc("POST /tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls = append(s.calls, r.PathValue("name")+"|"+r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"done"}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *exampleService) invoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// runExample runs `toolmesh run` with the config example and a Portal of
// routes, each "key=name@URL[,name@URL...]": a route and its Tool Services.
func runExample(t *testing.T, example string, routes ...string) *process {
	t.Helper()
	return runExampleAs(t, "run", example, routes...)
}

// runExampleAs is runExample with another command, such as extproc.
func runExampleAs(t *testing.T, cmd, example string, routes ...string) *process {
	t.Helper()
	var rs []string
	for _, r := range routes {
		key, svcs, _ := strings.Cut(r, "=")
		var ss []string
		for _, s := range strings.Split(svcs, ",") {
			name, url, _ := strings.Cut(s, "@")
			ss = append(ss, `{"name":"`+name+`","url":"`+url+`"}`)
		}
		rs = append(rs, `{"key":"`+key+`","toolServices":[`+strings.Join(ss, ",")+`]}`)
	}
	dir := t.TempDir()
	portal := writeFile(t, dir, "portal.json", `{"routes":[`+strings.Join(rs, ",")+`]}`)
	return startProcess(t, cmd, "--portal", portal, "--config", writeFile(t, dir, "toolmesh.yaml", example))
}

// exampleCall is a 2025-11-25 tools/call of tool on route through the data
// plane, with extra header lines.
func exampleCall(t *testing.T, p *process, route, tool string, headers ...string) rawReply {
	t.Helper()
	return exampleCallArgs(t, p, route, tool, `{}`, headers...)
}

// exampleCallArgs is exampleCall with the call's arguments.
func exampleCallArgs(t *testing.T, p *process, route, tool, args string, headers ...string) rawReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	return rawPost(t, p.addrs["dataplane"], "/mcp/"+route, append(clientHeaders(3), headers...), body, 0)
}

// rpcError is the JSON-RPC error of a reply, if any.
func rpcError(r rawReply) (code float64, message string) {
	var doc map[string]any
	_ = json.Unmarshal(r.body, &doc)
	code, _ = dig(doc, "error", "code").(float64)
	message, _ = dig(doc, "error", "message").(string)
	return code, message
}

// checkAuthorizationExample: a call without a token gets 401 with the
// example's scope in the challenge; as the page's table says, a dev (whom
// staff-only admits) calls get_customer but not, by admins-only-destructive,
// delete_customer, which does not exist for them; a caller of another role
// calls nothing.
func checkAuthorizationExample(t *testing.T, example string) {
	key := authtest.NewRSAKey(t, "k1")
	issuer := authtest.NewIssuer(t, "/realms/tools", key).URL
	svc := startExampleService(t, "get_customer.", "delete_customer!")
	p := runExample(t, strings.ReplaceAll(example, "https://idp.example.com/realms/tools", issuer), "core=db@"+svc.url)

	r := exampleCall(t, p, "core", "get_customer")
	const challenge = `Bearer scope="mcp:tools", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/core"`
	if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != challenge {
		t.Errorf("no token: %d WWW-Authenticate %q, want 401 %q", r.status, r.header.Get("WWW-Authenticate"), challenge)
	}
	token := func(roles ...string) string {
		return "Authorization: Bearer " + key.Sign(t, map[string]any{"iss": issuer, "sub": "alice", "aud": "https://mcp.example.com/mcp/core",
			"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools", "roles": roles})
	}
	if r := exampleCall(t, p, "core", "get_customer", token("dev")); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
		t.Errorf("dev calls get_customer: %d %s, want it routed", r.status, r.body)
	}
	if code, msg := rpcError(exampleCall(t, p, "core", "delete_customer", token("dev"))); code != -32602 || !strings.Contains(msg, "unknown tool") {
		t.Errorf("dev calls delete_customer: error %v %q, want -32602 unknown tool", code, msg)
	}
	if code, msg := rpcError(exampleCall(t, p, "core", "get_customer", token("sales"))); code != -32602 || !strings.Contains(msg, "unknown tool") {
		t.Errorf("sales calls get_customer: error %v %q, want -32602 unknown tool (staff-only)", code, msg)
	}
	if got := svc.invoked(); len(got) != 1 || !strings.HasPrefix(got[0], "get_customer|") {
		t.Errorf("Tool Service invocations %q, want the dev's get_customer only", got)
	}
}

// checkIdentityAuthExample: the public route is open, the core route's
// entry replaces the default as a whole (no scopes in its challenge), and
// any other route takes the default (its scopes in the challenge).
func checkIdentityAuthExample(t *testing.T, example string) {
	issuer := authtest.NewIssuer(t, "/realms/tools", authtest.NewRSAKey(t, "k1")).URL
	login := authtest.NewIssuer(t, "/login", authtest.NewRSAKey(t, "k2")).URL
	svc := startExampleService(t, "t")
	example = strings.NewReplacer("https://idp.example.com/realms/tools", issuer, "https://login.example.org", login).Replace(example)
	p := runExample(t, example, "public=db@"+svc.url, "core=db@"+svc.url, "other=db@"+svc.url)

	if r := exampleCall(t, p, "public", "t"); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
		t.Errorf("public route without a token: %d %s, want it routed", r.status, r.body)
	}
	meta := func(route string) string {
		return `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/` + route + `"`
	}
	for route, challenge := range map[string]string{
		"core":  `Bearer ` + meta("core"),
		"other": `Bearer scope="mcp:tools", ` + meta("other"),
	} {
		if r := exampleCall(t, p, route, "t"); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != challenge {
			t.Errorf("%s route without a token: %d WWW-Authenticate %q, want 401 %q", route, r.status, r.header.Get("WWW-Authenticate"), challenge)
		}
	}
	if got := svc.invoked(); len(got) != 1 {
		t.Errorf("Tool Service invocations %q, want the public route's one", got)
	}
}

// checkUpstreamAuthExample: billing gets the credential's value after the
// prefix, reports the client's own Authorization, which no other service
// gets.
func checkUpstreamAuthExample(t *testing.T, example string) {
	dir := t.TempDir()
	secret := writeFile(t, dir, "billing-token", "billing-secret\n")
	billing, reports, other := startExampleService(t, "bill"), startExampleService(t, "report"), startExampleService(t, "misc")
	p := runExample(t, strings.ReplaceAll(example, "/run/secrets/billing-token", secret),
		"r=billing@"+billing.url+",reports@"+reports.url+",other@"+other.url)
	for _, tool := range []string{"bill", "report", "misc"} {
		if r := exampleCall(t, p, "r", tool, "Authorization: Bearer client-token"); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
			t.Fatalf("call %s: %d %s", tool, r.status, r.body)
		}
	}
	for _, c := range []struct {
		svc  *exampleService
		want string
	}{{billing, "bill|Bearer billing-secret"}, {reports, "report|Bearer client-token"}, {other, "misc|"}} {
		if got := c.svc.invoked(); len(got) != 1 || got[0] != c.want {
			t.Errorf("Tool Service got %q, want %q", got, c.want)
		}
	}
}

// checkApprovalExample: on route core, a tool not declared read-only asks
// for approval and is not called.
func checkApprovalExample(t *testing.T, example string) {
	dir := t.TempDir()
	example = strings.NewReplacer("/run/secrets/approval-k2", writeFile(t, dir, "k2", approvalSecretA+"\n"),
		"/run/secrets/approval-k1", writeFile(t, dir, "k1", approvalSecretB+"\n")).Replace(example)
	svc := startExampleService(t, "drop!")
	p := runExample(t, example, "core=db@"+svc.url)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop","arguments":{},` + approvalMeta + `}}`
	code, out := rpc(t, "http://"+p.addrs["dataplane"], "core", body, map[string]string{
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "drop"})
	if code != 200 || dig(out, "result", "resultType") != "input_required" ||
		dig(out, "result", "inputRequests", "toolmesh_approval", "method") != "elicitation/create" {
		t.Errorf("drop on core: %d %v, want an approval asked", code, out)
	}
	if got := svc.invoked(); len(got) != 0 {
		t.Errorf("Tool Service invocations %q before any approval", got)
	}
}

// checkRateLimitsExample: on route core, records_delete takes 10 calls a
// minute of one caller and refuses the 11th with 429; the global limit's
// RLS is unreachable, and its failureMode allow lets the calls through.
func checkRateLimitsExample(t *testing.T, example string) {
	svc := startExampleService(t, "records_delete")
	p := runExample(t, strings.ReplaceAll(example, "ratelimit.mesh.svc:8081", "127.0.0.1:1"), "core=db@"+svc.url)
	for i := range 10 {
		if r := exampleCall(t, p, "core", "records_delete"); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
			t.Fatalf("call %d: %d %s, want it routed", i+1, r.status, r.body)
		}
	}
	if r := exampleCall(t, p, "core", "records_delete"); r.status != http.StatusTooManyRequests {
		t.Errorf("call 11: %d %s, want 429", r.status, r.body)
	}
	if got := svc.invoked(); len(got) != 10 {
		t.Errorf("Tool Service got %d calls, want 10", len(got))
	}
}

// checkSurfaceExample: core's pinning enforces with quarantineNew, so
// records_delete, seen for the first time, is held back: not listed and
// refused by its virtual name.
func checkSurfaceExample(t *testing.T, example string) {
	// The arguments the example's virtual tool fixes, hides and bounds.
	svc := startExampleService(t, `{"name":"records_delete","description":"Deletes records.","path":"/tools/records_delete",
		"inputSchema":{"type":"object","properties":{"tenant":{"type":"string"},"force":{"type":"boolean"},
		"limit":{"type":"integer"},"region":{"type":"string"}}}}`)
	p := runExample(t, example, "core=db@"+svc.url)
	r := rawPost(t, p.addrs["dataplane"], "/mcp/core", clientHeaders(3), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0)
	if r.status != http.StatusOK || strings.Contains(string(r.body), "delete") {
		t.Errorf("tools/list of core: %d %s, want records_delete held back", r.status, r.body)
	}
	if code, msg := rpcError(exampleCall(t, p, "core", "delete_record")); code != -32602 || !strings.Contains(msg, "tool held for review") {
		t.Errorf("call delete_record: error %v %q, want -32602 tool held for review", code, msg)
	}
	if got := svc.invoked(); len(got) != 0 {
		t.Errorf("Tool Service invocations %q of a held tool", got)
	}
}

// checkFiltersExample: the default chain's acl refuses a *_admin tool,
// which the lab route, dropping acl, calls.
func checkFiltersExample(t *testing.T, example string) {
	svc := startExampleService(t, "user_admin")
	p := runExample(t, example, "core=db@"+svc.url, "lab=db@"+svc.url)
	if r := exampleCall(t, p, "core", "user_admin"); !strings.Contains(string(r.body), `"error"`) && !strings.Contains(string(r.body), `"isError":true`) {
		t.Errorf("core calls user_admin: %d %s, want the acl filter to refuse it", r.status, r.body)
	}
	if r := exampleCall(t, p, "lab", "user_admin"); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
		t.Errorf("lab calls user_admin: %d %s, want it routed", r.status, r.body)
	}
	if got := svc.invoked(); len(got) != 1 {
		t.Errorf("Tool Service invocations %q, want lab's one", got)
	}
}

// withTestPKI is example with the tls.crt, tls.key and ca.crt of dir
// replaced by the files of a server pair and of a new test CA.
func withTestPKI(t *testing.T, example, dir, server string) (string, *testpki.CA) {
	ca := testpki.NewCA(t, "mesh")
	pair := ca.Server(server)
	return strings.NewReplacer(dir+"tls.crt", pair.CertFile, dir+"tls.key", pair.KeyFile, dir+"ca.crt", ca.CertFile).Replace(example), ca
}

// checkDownstreamTLSExample: the local data plane serves mTLS with the
// example's files: a client with a certificate of the trust bundle is
// answered, one without a certificate is not.
func checkDownstreamTLSExample(t *testing.T, example string) {
	example, ca := withTestPKI(t, example, "/etc/envoy/tls/", "envoy")
	svc := startExampleService(t, "t")
	p := runExample(t, example, "core=db@"+svc.url)
	list := func(certs ...tls.Certificate) (int, error) {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs}}}
		defer client.CloseIdleConnections()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+p.addrs["dataplane"]+"/mcp/core",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := list(ca.Client("agent", "spiffe://cluster.local/ns/app/sa/agent").TLS); err != nil || code != http.StatusOK {
		t.Errorf("tools/list with a client certificate: %d %v, want 200", code, err)
	}
	if code, err := list(); err == nil {
		t.Errorf("tools/list without a client certificate: %d, want the handshake refused", code)
	}
}

// checkControlTLSExample: `toolmesh extproc` serves its gRPC listener with
// the example's files: the allowed SAN gets through, another identity of
// the same trust bundle and a plaintext client do not.
func checkControlTLSExample(t *testing.T, example string) {
	example, ca := withTestPKI(t, example, "/etc/toolmesh-tls/", "toolmesh")
	svc := startExampleService(t, "t")
	addr := runExampleAs(t, "extproc", example, "core=db@"+svc.url).addrs["extproc"]
	creds := func(id string) credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1",
			Certificates: []tls.Certificate{ca.Client("c", id).TLS}})
	}
	if err := grpcHealth(t, addr, creds("spiffe://cluster.local/ns/mesh/sa/envoy")); err != nil {
		t.Errorf("the allowed SAN refused: %v", err)
	}
	if err := grpcHealth(t, addr, creds("spiffe://cluster.local/ns/app/sa/intruder")); err == nil {
		t.Error("a SAN outside allowedSANs accepted")
	}
	if err := grpcHealth(t, addr, insecure.NewCredentials()); err == nil {
		t.Error("a plaintext client accepted")
	}
}

// traceCollector is an OTLP/gRPC trace collector that keeps what it gets.
type traceCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	got []*collectortrace.ExportTraceServiceRequest
}

func (c *traceCollector) Export(_ context.Context, r *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, r)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// environments are the deployment.environment resource attributes of the
// spans of trace id.
func (c *traceCollector) environments(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.got {
		for _, rs := range r.GetResourceSpans() {
			env := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "deployment.environment" {
					env = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					if hex.EncodeToString(sp.GetTraceId()) == id {
						out = append(out, env)
					}
				}
			}
		}
	}
	return out
}

// checkTracingExample: a call whose traceparent is sampled (the request's
// own context decides, whatever samplingRatio says) is traced to the
// example's OTLP/gRPC endpoint, with its resource attributes; the spans are
// flushed at shutdown.
func checkTracingExample(t *testing.T, example string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &traceCollector{}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, col)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	svc := startExampleService(t, "t")
	p := runExample(t, strings.ReplaceAll(example, "otel-collector.observability:4317", lis.Addr().String()), "core=db@"+svc.url)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	if r := exampleCall(t, p, "core", "t", "traceparent: 00-"+traceID+"-00f067aa0ba902b7-01"); r.status != http.StatusOK {
		t.Fatalf("call: %d %s", r.status, r.body)
	}
	p.stop(t) // flushes the spans
	envs := col.environments(traceID)
	if len(envs) == 0 || slices.ContainsFunc(envs, func(e string) bool { return e != "prod" }) {
		t.Errorf("spans of the sampled trace at the collector, by deployment.environment: %q; want some, all prod", envs)
	}
}

// checkWasmExample: the example's module (the deny-argument example guest,
// which reads the prefix from the config the example hands it) refuses a
// delete_file of a path under /etc/ and passes one elsewhere.
func checkWasmExample(t *testing.T, example string) {
	example = strings.ReplaceAll(example, "/etc/toolmesh/policy.wasm", wasmtest.Module(t, "deny-argument"))
	svc := startExampleService(t, "delete_file")
	p := runExample(t, example, "r=files@"+svc.url)
	if r := exampleCallArgs(t, p, "r", "delete_file", `{"path":"/etc/passwd"}`); !strings.Contains(string(r.body), "path under /etc/ is not allowed") {
		t.Errorf("delete_file /etc/passwd: %d %s, want the guest's denial", r.status, r.body)
	}
	if r := exampleCallArgs(t, p, "r", "delete_file", `{"path":"/tmp/x"}`); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
		t.Errorf("delete_file /tmp/x: %d %s, want it routed", r.status, r.body)
	}
	if got := svc.invoked(); len(got) != 1 {
		t.Errorf("Tool Service invocations %q, want the /tmp/x one", got)
	}
}

// checkClientCredentialsExample: a call to reports carries the token the
// example's token endpoint issued for client credentials, which toolmesh
// asked for with a private_key_jwt assertion under the example's key id
// and scope.
func checkClientCredentialsExample(t *testing.T, example string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := writeFile(t, t.TempDir(), "gateway-key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	var mu sync.Mutex
	var asked []string
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		parts := strings.Split(r.PostForm.Get("client_assertion"), ".")
		var jh struct{ Kid string }
		var jc struct{ Sub string }
		if len(parts) == 3 {
			h, _ := base64.RawURLEncoding.DecodeString(parts[0])
			c, _ := base64.RawURLEncoding.DecodeString(parts[1])
			_, _ = json.Unmarshal(h, &jh), json.Unmarshal(c, &jc)
		}
		mu.Lock()
		asked = append(asked, r.URL.Path+" "+r.PostForm.Get("grant_type")+" "+r.PostForm.Get("scope")+" "+
			r.PostForm.Get("client_assertion_type")+" kid="+jh.Kid+" sub="+jc.Sub)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"reports-at","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(as.Close)
	example = strings.NewReplacer("https://idp.example.com", as.URL, "/run/secrets/oauth-gateway-key.pem", keyFile).Replace(example)
	svc := startExampleService(t, "report")
	p := runExample(t, example, "r=reports@"+svc.url)
	if r := exampleCall(t, p, "r", "report"); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
		t.Fatalf("call report: %d %s", r.status, r.body)
	}
	if got := svc.invoked(); len(got) != 1 || got[0] != "report|Bearer reports-at" {
		t.Errorf("Tool Service got %q, want the issued token", got)
	}
	mu.Lock()
	defer mu.Unlock()
	const want = "/oauth2/token client_credentials reports urn:ietf:params:oauth:client-assertion-type:jwt-bearer kid=gw-2026-12 sub=toolmesh-gateway"
	if len(asked) != 1 || asked[0] != want {
		t.Errorf("token endpoint asked %q, want %q", asked, want)
	}
}

// checkTokenExchangeExample: with an auth block of the test added (the
// page's "A caller authenticated at the route"), a call to orders carries
// the token the example's authorization server (found by discovery at
// the example's issuer) exchanged for the caller's, asked for with the
// example's audience, resource and scope and the gateway's own token as
// actor.
func checkTokenExchangeExample(t *testing.T, example string) {
	callerKey := authtest.NewRSAKey(t, "c1")
	callers := authtest.NewIssuer(t, "/callers", callerKey).URL
	var mu sync.Mutex
	var asked []string
	mux := http.NewServeMux()
	as := httptest.NewServer(mux)
	t.Cleanup(as.Close)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/realms/tools", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"issuer":"`+as.URL+`/realms/tools","token_endpoint":"`+as.URL+`/token"}`)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		user, pass, _ := r.BasicAuth()
		f := r.PostForm
		mu.Lock()
		asked = append(asked, strings.Join([]string{user + ":" + pass, f.Get("grant_type"), f.Get("subject_token"), f.Get("audience"),
			f.Get("resource"), f.Get("scope"), f.Get("actor_token")}, " "))
		mu.Unlock()
		token := "actor-at"
		if f.Get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange" {
			token = "exchanged-at"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","expires_in":3600,`+
			`"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`)
	})
	secret := writeFile(t, t.TempDir(), "gateway-secret", "s3cret\n")
	example = strings.NewReplacer("https://idp.example.com", as.URL, "/run/secrets/oauth-gateway-secret", secret).Replace(example) +
		"resourceBase: https://mcp.example.com\nauth:\n  default: {mode: required, issuers: [{issuer: " + callers + "}]}\n"
	svc := startExampleService(t, "order")
	p := runExample(t, example, "r=orders@"+svc.url)
	caller := callerKey.Sign(t, map[string]any{"iss": callers, "sub": "alice", "aud": "https://mcp.example.com/mcp/r",
		"exp": time.Now().Add(time.Hour).Unix()})
	if r := exampleCall(t, p, "r", "order", "Authorization: Bearer "+caller); r.status != http.StatusOK || strings.Contains(string(r.body), `"error"`) {
		t.Fatalf("call order: %d %s", r.status, r.body)
	}
	if got := svc.invoked(); len(got) != 1 || got[0] != "order|Bearer exchanged-at" {
		t.Errorf("Tool Service got %q, want the exchanged token", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "toolmesh-gateway:s3cret urn:ietf:params:oauth:grant-type:token-exchange " + caller +
		" https://orders.example.com https://orders.example.com/mcp orders:read actor-at"
	if !slices.Contains(asked, want) {
		t.Errorf("token endpoint asked\n%q\nwant among them\n%q", asked, want)
	}
}

// checkNodesExample: `toolmesh xds` with the example serves an Envoy of
// cluster billing-sidecar the clusters of the billing route only, and a
// gateway (gw-*) those of every route.
func checkNodesExample(t *testing.T, example string) {
	svc := startExampleService(t, "t")
	addr := runExampleAs(t, "xds", example, "billing=bill@"+svc.url, "core=crm@"+svc.url).addrs["xds"]
	clusters := func(node *corev3.Node) []string {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.ClusterType}); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range resp.GetResources() {
			var c clusterv3.Cluster
			if err := r.UnmarshalTo(&c); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(c.GetName(), "toolsvc_") {
				names = append(names, c.GetName())
			}
		}
		slices.Sort(names)
		return names
	}
	if got := clusters(&corev3.Node{Id: "billing-7", Cluster: "billing-sidecar"}); !slices.Equal(got, []string{"toolsvc_bill"}) {
		t.Errorf("billing-sidecar clusters %q, want the billing route's only", got)
	}
	if got := clusters(&corev3.Node{Id: "gw-1", Cluster: "gateways"}); !slices.Equal(got, []string{"toolsvc_bill", "toolsvc_crm"}) {
		t.Errorf("gateway clusters %q, want every route's", got)
	}
}

// checkOverviewExample: the overview of docs/config.md, with a local
// Portal file, a Redis of the test and the example's other files made
// here: route core asks approval for delete_* and runs the acl filter,
// which refuses admin.* there.
func checkOverviewExample(t *testing.T, example string) {
	dir := t.TempDir()
	svc := startExampleService(t, "delete_rows", "admin.reset")
	portal := writeFile(t, dir, "portal.json", `{"routes":[{"key":"core","toolServices":[{"name":"db","url":"`+svc.url+`"}]}]}`)
	example = strings.NewReplacer(
		"https://portal.example.com", portal,
		"rediss://:secret@redis.example.com:6380/0", "redis://"+redistest.Start(t).Options().Addr+"/0",
		"/etc/toolmesh/policy.wasm", wasmtest.Module(t, "deny-argument"),
		"/etc/toolmesh/overrides.yaml", writeFile(t, dir, "overrides.yaml", "{}\n"),
		"/run/secrets/approval-k2", writeFile(t, dir, "k2", approvalSecretA+"\n"),
		"/run/secrets/approval-k1", writeFile(t, dir, "k1", approvalSecretB+"\n"),
		"otel-collector.observability:4317", "127.0.0.1:1",
	).Replace(example)
	p := startProcess(t, "run", "--config", writeFile(t, dir, "toolmesh.yaml", example))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_rows","arguments":{},` + approvalMeta + `}}`
	code, out := rpc(t, "http://"+p.addrs["dataplane"], "core", body, map[string]string{
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "delete_rows"})
	if code != 200 || dig(out, "result", "resultType") != "input_required" {
		t.Errorf("delete_rows on core: %d %v, want an approval asked", code, out)
	}
	if r := exampleCall(t, p, "core", "admin.reset"); !strings.Contains(string(r.body), `"error"`) && !strings.Contains(string(r.body), `"isError":true`) {
		t.Errorf("core calls admin.reset: %d %s, want the acl filter to refuse it", r.status, r.body)
	}
	if got := svc.invoked(); len(got) != 0 {
		t.Errorf("Tool Service invocations %q, want none", got)
	}
}
