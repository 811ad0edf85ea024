package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

// protectedMCP is a go-sdk MCP server behind the SDK's bearer check: it
// accepts only JWTs of its authorization server whose aud is its own URL,
// and its tool whoami answers the token's sub and aud.
type protectedMCP struct {
	URL     string
	mu      sync.Mutex
	revoked map[string]bool // jti
	seen    []string        // jti of accepted tokens
	tokens  []string        // the accepted tokens themselves
}

func startProtectedMCP(t *testing.T, ln net.Listener, issuer string) *protectedMCP {
	t.Helper()
	base := "http://" + ln.Addr().String()
	p := &protectedMCP{URL: base + "/mcp", revoked: map[string]bool{}}
	var keys jose.JSONWebKeySet
	var keysOnce sync.Once
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		keysOnce.Do(func() {
			hc := &http.Client{Timeout: 10 * time.Second}
			resp, err := hc.Get(issuer + "/keys")
			if err == nil {
				defer resp.Body.Close()
				err = json.NewDecoder(resp.Body).Decode(&keys)
			}
			if err != nil {
				t.Errorf("upstream: read the authorization server's keys: %v", err)
			}
		})
		parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var cl jwt.Claims
		if err := parsed.Claims(keys, &cl); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		if err := cl.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{p.URL}, Time: time.Now()}, time.Minute); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.revoked[cl.ID] {
			return nil, fmt.Errorf("%w: revoked", auth.ErrInvalidToken)
		}
		p.seen = append(p.seen, cl.ID)
		if !slices.Contains(p.tokens, tok) {
			p.tokens = append(p.tokens, tok)
		}
		return &auth.TokenInfo{UserID: cl.Subject, Expiration: cl.Expiry.Time(),
			Extra: map[string]any{"sub": cl.Subject, "aud": []string(cl.Audience)}}, nil
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "the caller the token names"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
			ti := req.Extra.TokenInfo
			return nil, map[string]any{"sub": ti.Extra["sub"], "aud": ti.Extra["aud"]}, nil
		})
	meta := "/.well-known/oauth-protected-resource/mcp"
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: base + meta})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})))
	mux.Handle(meta, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: p.URL, AuthorizationServers: []string{issuer}}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return p
}

func (p *protectedMCP) accepted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.tokens)
}

func (p *protectedMCP) revokeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range p.seen {
		p.revoked[j] = true
	}
}

// TestOAuthProtectedMCPServer follows the client side of the MCP
// authorization specification against an OAuth-protected go-sdk server:
// the 401's resource_metadata leads to the authorization server, listing
// uses the gateway's own client credentials token, a call uses the
// caller's exchanged token, and a 401 for a cached token evicts it and
// retries once.
func TestOAuthProtectedMCPServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpURL := "http://" + ln.Addr().String() + "/mcp"
	as := startAuthServer(t, "s1", mcpURL)
	up := startProtectedMCP(t, ln, as.Issuer)
	t.Setenv("TOOLMESH_TEST_OAUTH_SECRET", "s1")

	// Unauthenticated: 401 and a challenge naming the metadata.
	resp, err := http.Post(mcpURL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d", resp.StatusCode)
	}
	hc := oauthclient.HTTPClient(nil)
	prm, _, err := oauthclient.ResourceFromChallenge(t.Context(), hc, resp.Header.Values("WWW-Authenticate"), mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	if prm.Resource != mcpURL || !slices.Equal(prm.AuthorizationServers, []string{as.Issuer}) {
		t.Fatalf("metadata %+v", prm)
	}
	c := newOAuthClient(t, oauthclient.Config{Issuer: prm.AuthorizationServers[0], ClientID: oauthGatewayID,
		Secret: oauthclient.Source{Env: "TOOLMESH_TEST_OAUTH_SECRET"}})

	connect := func(r oauthclient.Request) *mcp.ClientSession {
		t.Helper()
		tr := &oauthTransport{client: c, req: r}
		cl := mcp.NewClient(&mcp.Implementation{Name: "gateway", Version: "1"}, nil)
		s, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: &http.Client{Transport: tr}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	// Listing: the service identity.
	svc := connect(oauthclient.Request{Grant: oauthclient.ClientCredentials, Resource: []string{mcpURL}})
	tools, err := svc.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "whoami" {
		t.Fatalf("list: %v %+v", err, tools)
	}
	whoami := func(s *mcp.ClientSession) map[string]any {
		t.Helper()
		res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		return res.StructuredContent.(map[string]any)
	}
	if got := whoami(svc); got["sub"] != oauthGatewayID {
		t.Fatalf("service identity: %v", got)
	}

	// A call: alice's token exchanged for this server.
	alice := as.userToken(t, "test-user@127.0.0.1")
	user := connect(oauthclient.Request{Grant: oauthclient.TokenExchange, SubjectToken: alice, Subject: as.Issuer + "|id1",
		Audience: []string{mcpURL}, Resource: []string{mcpURL}})
	got := whoami(user)
	if aud, _ := got["aud"].([]any); got["sub"] != "id1" || !slices.Contains(aud, any(mcpURL)) {
		t.Fatalf("exchanged token seen by the upstream: %v", got)
	}

	// The upstream stops accepting every token it saw: the next call gets
	// 401 for the cached token, which is evicted and replaced once.
	before := as.requests(oauthclient.TokenExchangeGrantType)
	up.revokeAll()
	if got := whoami(user); got["sub"] != "id1" {
		t.Fatalf("after revocation: %v", got)
	}
	if n := as.requests(oauthclient.TokenExchangeGrantType) - before; n != 1 {
		t.Fatalf("%d exchanges after the 401, want 1", n)
	}
}

// oauthTransport sends each request with a Bearer token of client for req.
// When the upstream answers 401, the token is evicted from the cache and
// the request is sent once more with a new one (a request whose body
// cannot be replayed is not retried), as upstreamcred does for a call.
type oauthTransport struct {
	client *oauthclient.Client
	req    oauthclient.Request
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.send(req, req.Body)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	t.client.Evict(t.req)
	var body io.ReadCloser
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return t.send(req, body)
}

func (t *oauthTransport) send(req *http.Request, body io.ReadCloser) (*http.Response, error) {
	tok, err := t.client.Token(req.Context(), t.req)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = body
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return http.DefaultTransport.RoundTrip(r)
}
