package app

import (
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/authtest"
)

// Grant types of the token endpoint (RFC 6749 section 4.4, RFC 8693).
const (
	grantClientCredentials = "client_credentials"
	grantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// assertionTokenEndpoint is the token endpoint of a test authorization
// server whose client authenticates with private_key_jwt (RFC 7523): it
// issues opaque tokens for client credentials and token exchange, and only
// to a request whose client assertion is signed by key with iss and sub
// clientID and aud audience. It records what it was asked.
type assertionTokenEndpoint struct {
	clientID, audience string
	key                crypto.PublicKey

	mu      sync.Mutex
	asked   []string        // grant subject_token audience resource, of the requests it issued a token to
	refused []string        // why it refused the others
	issued  map[string]bool // the tokens it issued
}

func (e *assertionTokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f := r.PostForm
	fail := func(status int, code string, err error) {
		e.mu.Lock()
		e.refused = append(e.refused, f.Get("grant_type")+": "+err.Error())
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":"`+code+`"}`)
	}
	if err := e.verifyAssertion(f); err != nil {
		fail(http.StatusUnauthorized, "invalid_client", err)
		return
	}
	grant, issuedType := f.Get("grant_type"), ""
	switch grant {
	case grantClientCredentials:
	case grantTokenExchange:
		if f.Get("subject_token") == "" {
			fail(http.StatusBadRequest, "invalid_request", errors.New("no subject_token"))
			return
		}
		issuedType = `,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"`
	default:
		fail(http.StatusBadRequest, "unsupported_grant_type", fmt.Errorf("grant %q", grant))
		return
	}
	e.mu.Lock()
	token := fmt.Sprintf("at-%d-%s", len(e.issued)+1, strings.TrimPrefix(grant, "urn:ietf:params:oauth:grant-type:"))
	e.issued[token] = true
	e.asked = append(e.asked, strings.Join([]string{grant, f.Get("subject_token"), f.Get("audience"), f.Get("resource")}, " "))
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","expires_in":3600`+issuedType+`}`)
}

// verifyAssertion checks the private_key_jwt client authentication of a
// token request (RFC 7523 sections 2.2 and 3).
func (e *assertionTokenEndpoint) verifyAssertion(f url.Values) error {
	if got := f.Get("client_assertion_type"); got != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return fmt.Errorf("client_assertion_type %q", got)
	}
	tok, err := jwt.ParseSigned(f.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return fmt.Errorf("client_assertion: %w", err)
	}
	var c jwt.Claims
	if err := tok.Claims(e.key, &c); err != nil {
		return fmt.Errorf("client_assertion signature: %w", err)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: e.clientID, Subject: e.clientID,
		AnyAudience: jwt.Audience{e.audience}, Time: time.Now()}, time.Minute); err != nil {
		return fmt.Errorf("client_assertion claims (aud %q): %w", c.Audience, err)
	}
	return nil
}

func (e *assertionTokenEndpoint) valid(token string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.issued[token]
}

func (e *assertionTokenEndpoint) requests() (asked, refused []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.asked), slices.Clone(e.refused)
}

// protectedMCP is a 2026-07-28 MCP server on 127.0.0.1 with one tool that is
// an OAuth resource server (the MCP authorization specification): a request
// without a Bearer token that valid accepts is answered 401 with a
// challenge naming its protected resource metadata (RFC 9728), which names
// the authorization server issuer. It records every request as
// method|Authorization.
type protectedMCP struct {
	url  string // the MCP endpoint
	mu   sync.Mutex
	seen []string
}

func startProtectedMCP(t *testing.T, issuer string, valid func(token string) bool) *protectedMCP {
	t.Helper()
	s := &protectedMCP{}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/mcp"
	metadata := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": s.url, "authorization_servers": []string{issuer},
			"bearer_methods_supported": []string{"header"}})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		auth := r.Header.Get("Authorization")
		s.mu.Lock()
		s.seen = append(s.seen, m.Method+"|"+auth)
		s.mu.Unlock()
		if tok, ok := strings.CutPrefix(auth, "Bearer "); !ok || !valid(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+metadata+`"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var result string
		switch m.Method {
		case "server/discover":
			result = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`
		case "tools/list":
			result = `{"resultType":"complete","tools":[{"name":"search_issues","description":"Searches issues.","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			result = `{"resultType":"complete","content":[{"type":"text","text":"3 issues"}]}`
		default:
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
	})
	return s
}

func (s *protectedMCP) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// discoveriesOK is toolmesh_upstream_oauth_requests_total of service's
// successful resource discoveries, as the process counts them now.
func discoveriesOK(t *testing.T, service string) float64 {
	t.Helper()
	var m dto.Metric
	if err := upstreamcred.Collector().WithLabelValues(service, "resource_discovery", "ok").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// checkDiscoveredOAuthExample: with the example's key and an auth block of
// the test added (tokenExchange calls act for an authenticated caller, and
// a discovered authorization server gets only its own callers' tokens),
// toolmesh lists the federated github-mcp without a token, follows its
// 401 to its protected resource metadata and the authorization server it
// names, and lists it once more with a client credentials token that it
// asked for with a private_key_jwt assertion for the issuer; a caller's
// call then carries the caller's token exchanged there for the example's
// audience and the metadata's resource. /metrics counts the discovery.
func checkDiscoveredOAuthExample(t *testing.T, example string) {
	gatewayKey := authtest.NewECKey(t, "")
	der, err := x509.MarshalPKCS8PrivateKey(gatewayKey.Signer)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := writeFile(t, dir, "gateway-key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	callerKey := authtest.NewRSAKey(t, "c1")
	as := authtest.NewIssuer(t, "/oauth", callerKey)
	tokens := &assertionTokenEndpoint{clientID: "toolmesh-gateway", audience: as.URL, key: gatewayKey.Signer.Public(), issued: map[string]bool{}}
	as.Token = tokens
	up := startProtectedMCP(t, as.URL, tokens.valid)

	example = strings.ReplaceAll(example, "/run/secrets/oauth-gateway-key.pem", keyFile) +
		"resourceBase: https://mcp.example.com\nauth:\n  default: {mode: required, issuers: [{issuer: " + as.URL + "}]}\n"
	portal := writeFile(t, dir, "portal.json", `{"routes":[{"key":"r","toolServices":[{"name":"github-mcp","protocol":"mcp","url":"`+up.url+`"}]}]}`)
	before := discoveriesOK(t, "github-mcp")
	p := launch(t, hooks{}, "run", "--portal", portal, "--config", writeFile(t, dir, "toolmesh.yaml", example))

	t.Cleanup(func() {
		if t.Failed() {
			asked, refused := tokens.requests()
			t.Logf("the server saw %q; the token endpoint issued tokens for %q and refused %q", up.requests(), asked, refused)
		}
	})
	p.waitReady(t) // the route is ready once the server is listed
	if s := listedService(t, p, "r", "github-mcp"); s.Tools != 1 || s.LastError != "" {
		t.Errorf("/health of github-mcp: %+v, want its tool listed", s)
	}
	seen := up.requests()
	if len(seen) == 0 || !strings.HasSuffix(seen[0], "|") {
		t.Errorf("the server's first request %q, want one without a token", seen)
	}
	ccList := "tools/list|Bearer at-1-" + grantClientCredentials
	if !slices.Contains(seen, ccList) {
		t.Errorf("the server saw %q, want %q: the listing with the gateway's client credentials token", seen, ccList)
	}

	caller := callerKey.Sign(t, map[string]any{"iss": as.URL, "sub": "alice", "aud": "https://mcp.example.com/mcp/r",
		"exp": time.Now().Add(time.Hour).Unix()})
	if r := exampleCall(t, p, "r", "search_issues", "Authorization: Bearer "+caller); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), "3 issues") {
		t.Fatalf("call search_issues: %d %s", r.status, r.body)
	}
	asked, refused := tokens.requests()
	if len(refused) != 0 {
		t.Errorf("the token endpoint refused %q", refused)
	}
	exchange := grantTokenExchange + " " + caller + " https://mcp.example.com/mcp " + up.url
	i := slices.Index(asked, exchange)
	if i < 0 || !slices.Contains(asked, grantClientCredentials+"  https://mcp.example.com/mcp "+up.url) {
		t.Fatalf("the token endpoint issued for\n%q\nwant client credentials and the exchange\n%q", asked, exchange)
	}
	call := fmt.Sprintf("tools/call|Bearer at-%d-token-exchange", i+1)
	if got := up.requests(); !slices.Contains(got, call) || slices.ContainsFunc(got, func(s string) bool {
		return strings.HasPrefix(s, "tools/call|") && s != call
	}) {
		t.Errorf("the server saw %q, want the call with the exchanged token only (%q)", got, call)
	}

	_, metrics := httpGet(t, "http://"+p.addrs["admin"]+"/metrics")
	want := fmt.Sprintf(`toolmesh_upstream_oauth_requests_total{grant="resource_discovery",result="ok",service="github-mcp"} %v`+"\n", before+1)
	if !strings.Contains(metrics, want) {
		t.Errorf("/metrics does not count the discovery, want %q among\n%s", want, grepMetric(metrics, "toolmesh_upstream_oauth_requests_total"))
	}
}

// grepMetric is the lines of a /metrics answer that name metric.
func grepMetric(metrics, metric string) string {
	var out []string
	for l := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(l, metric) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
