package e2e

//lint:file-ignore SA1019 sampling and roots are deprecated from protocol 2026-07-28 on, but legacy-era servers still ask for them, and relaying them is what this file tests.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// relayUpstream is a legacy-era (stateful) go-sdk MCP server whose tools
// ask the client during the call: elicitation, sampling and roots. It
// records the ids of the client answers (POSTs without a method) it gets.
type relayUpstream struct {
	URL     string
	mu      sync.Mutex
	answers []string // ids of the responses the server received
	inits   []string // the capabilities each initialize declared
}

func (u *relayUpstream) answerIDs() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.answers...)
}

func newRelayUpstream(t *testing.T) *relayUpstream {
	t.Helper()
	u := &relayUpstream{}
	s := sdk.NewServer(&sdk.Implementation{Name: "asker", Version: "1.0.0"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	type none struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "ask_name", Description: "Asks the user's name through elicitation."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			r, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "Who are you?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("hello %v (%s)", r.Content["name"], r.Action)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "summarize", Description: "Asks the client's model."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			r, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "summarize"}}}})
			if err != nil {
				return nil, nil, err
			}
			return text("model " + r.Model + " said " + r.Content.(*sdk.TextContent).Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "list_roots", Description: "Lists the client's roots."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			r, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			var uris []string
			for _, root := range r.Roots {
				uris = append(uris, root.URI)
			}
			return text("roots " + strings.Join(uris, ",")), nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	u.URL = newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Capabilities json.RawMessage `json:"capabilities"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		u.mu.Lock()
		switch {
		case r.Method == http.MethodPost && m.Method == "" && m.ID != nil:
			u.answers = append(u.answers, string(m.ID))
		case m.Method == "initialize":
			u.inits = append(u.inits, string(m.Params.Capabilities))
		}
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	})).URL + "/mcp"
	return u
}

// relayCaps is the _meta a legacy client adds to its tools/call to tell the
// gateway what it answers (docs/decisions/0006-federated-mcp-servers.md).
var relayCaps = sdk.Meta{"io.modelcontextprotocol/clientCapabilities": map[string]any{
	"elicitation": map[string]any{}, "sampling": map[string]any{}, "roots": map[string]any{}}}

// TestFederatedRelay: a legacy go-sdk server asks the client during a
// tools/call (elicitation, sampling, roots) through the gateway's local
// data plane; the go-sdk client's answers reach it and the tools complete,
// also when the answer lands on another replica holding the same relay
// key. A tampered or garbled token is accepted (202) and dropped: it
// reaches no server, and the genuine answer still completes the call.
func TestFederatedRelay(t *testing.T) {
	up := newRelayUpstream(t)
	dir := t.TempDir()
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "asker", "protocol": "mcp", "url": up.URL, "toolPrefix": "a_",
			"cluster": map[string]any{"requestTimeout": "20s", "connectTimeout": "250ms", "maxRetries": 0}},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(dir, "portal.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLMESH_E2E_RELAY_KEY", "0123456789abcdef0123456789abcdef-relay")
	if err := os.WriteFile(cfg, []byte("relayKeys:\n  - {id: r1, env: TOOLMESH_E2E_RELAY_KEY}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gwA := startGateway(t, portal, "--config", cfg)
	gwB := startGateway(t, portal, "--config", cfg)

	// client connects a legacy go-sdk client to replica A; answers (POSTs
	// without a method) go to answerTo.
	client := func(t *testing.T, ctx context.Context, answerTo string) *sdk.ClientSession {
		t.Helper()
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && answerTo != gwA.URL && r.Body != nil {
				body, _ := io.ReadAll(r.Body)
				var m struct {
					Method string `json:"method"`
				}
				_ = json.Unmarshal(body, &m)
				r = r.Clone(r.Context())
				r.Body = io.NopCloser(bytes.NewReader(body))
				if m.Method == "" {
					r.URL.Host = strings.TrimPrefix(answerTo, "http://")
					r.Host = r.URL.Host
				}
			}
			return http.DefaultTransport.RoundTrip(r)
		})}
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
			ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
			},
			CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
				return &sdk.CreateMessageResult{Model: "m1", Role: "assistant", Content: &sdk.TextContent{Text: "short"}}, nil
			},
		})
		c.AddRoots(&sdk.Root{URI: "file:///work", Name: "work"})
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gwA.URL + "/mcp/fed", DisableStandaloneSSE: true,
			MaxRetries: -1, HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	call := func(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, meta sdk.Meta) *sdk.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{}, Meta: meta})
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		return res
	}

	for _, tc := range []struct{ name, answerTo string }{
		{"same replica", gwA.URL},
		{"answer on the other replica", gwB.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cs := client(t, ctx, tc.answerTo)
			before := len(up.answerIDs())
			for name, want := range map[string]string{
				"a_ask_name":   "hello ada (accept)",
				"a_summarize":  "model m1 said short",
				"a_list_roots": "roots file:///work",
			} {
				if res := call(t, ctx, cs, name, relayCaps); res.IsError || textOf(t, res) != want {
					t.Errorf("%s: isError %v %q, want %q", name, res.IsError, textOf(t, res), want)
				}
			}
			ids := up.answerIDs()[before:]
			if len(ids) != 3 {
				t.Fatalf("the server received %d answers %v, want 3", len(ids), ids)
			}
			for _, id := range ids {
				if strings.Contains(id, "tmr2") {
					t.Errorf("the server received the gateway's token %s, not its own id", id)
				}
			}
		})
	}

	t.Run("capabilities declared in initialize only", func(t *testing.T) {
		// Without the client's _meta the capabilities it declared in
		// initialize still reach the server: its session token carries
		// them, and its own upstream session declares them (ADR 0022).
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		res := call(t, ctx, client(t, ctx, gwA.URL), "a_ask_name", nil)
		if res.IsError || textOf(t, res) != "hello ada (accept)" {
			t.Errorf("isError %v %q, want the client's answer", res.IsError, textOf(t, res))
		}
		up.mu.Lock()
		inits := strings.Join(up.inits, " ")
		up.mu.Unlock()
		if !strings.Contains(inits, `"elicitation":{"form":{}}`) || !strings.Contains(inits, "{}") {
			t.Errorf("initialize capabilities %s: want one session declaring none and one declaring form elicitation", inits)
		}
	})

	t.Run("tampered token", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		post := func(url, body string) *http.Response {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		meta, _ := json.Marshal(relayCaps)
		resp := post(gwA.URL+"/mcp/fed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_ask_name","arguments":{},"_meta":`+string(meta)+`}}`)
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("status %d content type %q", resp.StatusCode, ct)
		}
		sc := bufio.NewScanner(resp.Body)
		next := func() map[string]json.RawMessage {
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var m map[string]json.RawMessage
					if err := json.Unmarshal([]byte(d), &m); err != nil {
						t.Fatalf("event %s: %v", d, err)
					}
					return m
				}
			}
			t.Fatalf("the stream ended: %v", sc.Err())
			return nil
		}
		ask := next()
		var tok string
		if string(ask["method"]) != `"elicitation/create"` || json.Unmarshal(ask["id"], &tok) != nil || !strings.HasPrefix(tok, "tmr2.") {
			t.Fatalf("first event %v: want elicitation/create with a relay token id", ask)
		}
		before := len(up.answerIDs())
		flip := []byte(tok)
		flip[len(flip)-2] ^= 1
		for _, id := range []string{string(flip), "tmr2.r1.garbage", "tmr1.r1.e30.x", tok[:len(tok)-10]} {
			idj, _ := json.Marshal(id)
			r := post(gwB.URL+"/mcp/fed", `{"jsonrpc":"2.0","id":`+string(idj)+`,"result":{"action":"accept","content":{"name":"mallory"}}}`)
			r.Body.Close()
			if r.StatusCode != http.StatusAccepted {
				t.Errorf("answer with id %s: status %d, want 202", id, r.StatusCode)
			}
		}
		if got := up.answerIDs()[before:]; len(got) != 0 {
			t.Fatalf("tampered answers reached the server: %v", got)
		}
		idj, _ := json.Marshal(tok)
		r := post(gwB.URL+"/mcp/fed", `{"jsonrpc":"2.0","id":`+string(idj)+`,"result":{"action":"accept","content":{"name":"ada"}}}`)
		r.Body.Close()
		if r.StatusCode != http.StatusAccepted {
			t.Errorf("genuine answer: status %d, want 202", r.StatusCode)
		}
		res := next()
		if string(res["id"]) != "1" || !strings.Contains(string(res["result"]), "hello ada (accept)") {
			t.Errorf("result %s %s", res["id"], res["result"])
		}
	})
}
