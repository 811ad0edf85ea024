package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fedUpstream serves two go-sdk MCP servers on one loopback port: /new in
// the 2026-07-28 era (stateless) and /old in the legacy era (stateful, with
// sessions). It records the headers each endpoint received, counts legacy
// handshakes, and can forget every legacy session (as a restart would).
type fedUpstream struct {
	URL      string
	release  chan struct{} // the progress tools wait for it
	done     chan struct{} // closed at the end: hanging tools return, so the server can close
	mu       sync.Mutex
	seen     map[string]http.Header // path → headers of the last tools/call
	old      atomic.Pointer[http.Handler]
	oldInits atomic.Int32
}

func (u *fedUpstream) headers(path string) http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[path]
}

// forget replaces the legacy handler: every session id issued so far is
// unknown from now on, and the server answers 404 for it.
func (u *fedUpstream) forget() {
	h := http.Handler(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newFedServer(u, "old") }, nil))
	u.old.Store(&h)
}

func newFedServer(u *fedUpstream, kind string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: kind + "-upstream", Version: "1.0.0"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Prompts: &sdk.PromptCapabilities{},
			Resources: &sdk.ResourceCapabilities{}, Completions: &sdk.CompletionCapabilities{}},
		CompletionHandler: func(_ context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			var values []string
			for _, v := range []string{"alice", "alfred", "bob"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					values = append(values, kind+":"+v)
				}
			}
			return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: values, Total: len(values)}}, nil
		},
	})
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	type none struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "whoami", Description: "Says which server answers."},
		func(ctx context.Context, req *sdk.CallToolRequest, v struct {
			Word string `json:"word"`
		}) (*sdk.CallToolResult, any, error) {
			return text(kind + ":" + v.Word), nil, nil
		})
	// progress reports progress, then waits until the test saw that
	// progress arrive at the client: a gateway that buffered the stream
	// would hold the progress back and the call would time out.
	sdk.AddTool(s, &sdk.Tool{Name: "progress", Description: "Reports progress, then waits for the client to see it."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half way"}); err != nil {
				return nil, nil, err
			}
			select {
			case <-u.release:
				return text(kind + ":done after progress"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-u.done:
				return nil, nil, errors.New("test over")
			}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-u.done:
			}
			return nil, nil, errors.New("never answered")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "forever", Description: "Streams progress and never ends."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "still going"})
			select {
			case <-ctx.Done():
			case <-u.done:
			}
			return nil, nil, errors.New("never answered")
		})
	// ask needs the user's name: a 2026-07-28 server asks with an
	// input_required result and gets it in the client's retry.
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "Asks the user's name."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["who"].(*sdk.ElicitResult); ok && r.Action == "accept" {
				return text(fmt.Sprintf("%s:hello %v", kind, r.Content["name"])), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"who": &sdk.ElicitParams{Message: "Who are you?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "garbage", Description: "Answered with garbage by the test's wrapper."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			return text("unreachable"), nil, nil
		})
	s.AddResource(&sdk.Resource{URI: kind + "://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: kind + " readme"}}}, nil
		})
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: kind + "://items/{id}", Name: "item", MIMEType: "text/plain"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain",
				Text: kind + " item " + strings.TrimPrefix(req.Params.URI, kind+"://items/")}}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user",
				Content: &sdk.TextContent{Text: kind + " says hello to " + req.Params.Arguments["name"]}}}}, nil
		})
	return s
}

func newFedUpstream(t *testing.T) *fedUpstream {
	t.Helper()
	u := &fedUpstream{release: make(chan struct{}, 1), done: make(chan struct{}), seen: map[string]http.Header{}}
	u.forget()
	newSrv := newFedServer(u, "new")
	newH := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newSrv }, &sdk.StreamableHTTPOptions{Stateless: true})
	wrap := func(path string, next func() http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &m)
			switch m.Method {
			case "initialize":
				if path == "/old" {
					u.oldInits.Add(1)
				}
			case "tools/call":
				u.mu.Lock()
				u.seen[path] = r.Header.Clone()
				u.mu.Unlock()
				if m.Params.Name == "garbage" {
					w.Header().Set("Content-Type", "text/html")
					_, _ = w.Write([]byte("<html>not MCP</html>"))
					return
				}
			}
			next().ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/new", wrap("/new", func() http.Handler { return newH }))
	mux.Handle("/old", wrap("/old", func() http.Handler { return *u.old.Load() }))
	u.URL = newLoopbackServer(t, mux).URL
	// Registered after the server, so it runs before the server's Close,
	// which waits for every handler.
	t.Cleanup(func() { close(u.done) })
	return u
}

// TestFederatedCalls: a route mixing a native Tool Service with a
// 2026-07-28 and a legacy MCP server, called through the local data plane
// by the go-sdk client in both eras (and mcp-go): prefixed tools,
// resources (by URI and template), prompts and completion reach their
// owners; progress streams before the result; the legacy session is the
// gateway's and survives the server forgetting it; credentials are
// injected and the client's Authorization reaches only the server that
// opted in; an input_required result reaches a 2026-07-28 client, whose
// retry reaches the server, and fails for a legacy one; failures are
// isError results.
func TestFederatedCalls(t *testing.T) {
	const apiKey = "e2e-upstream-key"
	t.Setenv("TOOLMESH_E2E_FED_KEY", apiKey)
	native := newToolService(t, "native", standardTools(""))
	up := newFedUpstream(t)
	goneSrv := sdk.NewServer(&sdk.Implementation{Name: "gone", Version: "1"}, nil)
	sdk.AddTool(goneSrv, &sdk.Tool{Name: "ping"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{}, nil, nil
	})
	gone := newLoopbackServer(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return goneSrv }, &sdk.StreamableHTTPOptions{Stateless: true}))

	dir := t.TempDir()
	timeouts := map[string]any{"requestTimeout": "3s", "connectTimeout": "250ms", "maxRetries": 0}
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "native", "url": native.srv.URL},
		map[string]any{"name": "new", "protocol": "mcp", "url": up.URL + "/new", "toolPrefix": "n_", "cluster": timeouts,
			"headers": map[string]any{"X-Api-Key": map[string]any{"credential": "key"}}},
		map[string]any{"name": "old", "protocol": "mcp", "url": up.URL + "/old", "toolPrefix": "o_", "cluster": timeouts,
			"forwardAuthorization": true},
		map[string]any{"name": "gone", "protocol": "mcp", "url": gone.URL, "toolPrefix": "g_", "cluster": timeouts},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(dir, "portal.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("credentials:\n  key: {env: TOOLMESH_E2E_FED_KEY}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)
	gone.Close()
	endpoint := gw.URL + "/mcp/fed"
	authClient := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer client-token")
		return http.DefaultTransport.RoundTrip(r)
	})}

	for _, tc := range []struct{ name, pin, version string }{
		{"client-2026", "", "2026-07-28"},
		{"client-legacy", "2025-11-25", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			progressed := make(chan string, 4)
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
				ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
				},
				ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
					progressed <- req.Params.Message
					select { // let the upstream tool finish
					case up.release <- struct{}{}:
					default:
					}
				},
			})
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true,
				MaxRetries: -1, HTTPClient: authClient}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
				t.Fatalf("negotiated %q", got)
			}
			if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil {
				t.Errorf("capabilities %+v lack resources, prompts or completions", caps)
			}
			// A legacy client gets a session: the legacy server "old"
			// (go-sdk) declares logging, a level the client keeps on its
			// own upstream session (ADR 0022). A 2026-07-28 client never.
			if legacy := tc.version != "2026-07-28"; legacy != strings.HasPrefix(cs.ID(), "tms1.") || !legacy && cs.ID() != "" {
				t.Errorf("the gateway issued session %q to a %s client", cs.ID(), tc.version)
			}
			call := func(name string, args any) *sdk.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("tools/call %s: %v", name, err)
				}
				return res
			}
			for name, want := range map[string]string{"n_whoami": "new:x", "o_whoami": "old:x"} {
				if res := call(name, map[string]any{"word": "x"}); res.IsError || textOf(t, res) != want {
					t.Errorf("%s: isError %v %q, want %q", name, res.IsError, textOf(t, res), want)
				}
			}
			if res := call("echo", map[string]any{"message": "native"}); res.IsError || textOf(t, res) != "native" {
				t.Errorf("native echo: %v %q", res.IsError, textOf(t, res))
			}

			// Credentials and Authorization.
			if h := up.headers("/new"); h.Get("X-Api-Key") != apiKey || h.Get("Authorization") != "" || h.Get("Mcp-Session-Id") != "" {
				t.Errorf("/new got X-Api-Key %q Authorization %q session %q", h.Get("X-Api-Key"), h.Get("Authorization"), h.Get("Mcp-Session-Id"))
			}
			if h := up.headers("/old"); h.Get("Authorization") != "Bearer client-token" || h.Get("Mcp-Session-Id") == "" || h.Get("X-Api-Key") != "" {
				t.Errorf("/old got Authorization %q session %q X-Api-Key %q", h.Get("Authorization"), h.Get("Mcp-Session-Id"), h.Get("X-Api-Key"))
			}

			// Resources, templates, prompts, completion.
			rl, err := cs.ListResources(ctx, nil)
			if err != nil || len(rl.Resources) != 2 {
				t.Fatalf("resources/list: %v %+v", err, rl)
			}
			for uri, want := range map[string]string{"new://readme": "new readme", "old://items/7": "old item 7", "new://items/a": "new item a"} {
				rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
				if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != want {
					t.Errorf("resources/read %s: %v %+v", uri, err, rr)
				}
			}
			pl, err := cs.ListPrompts(ctx, nil)
			if err != nil || len(pl.Prompts) != 2 || pl.Prompts[0].Name != "n_greet" || pl.Prompts[1].Name != "o_greet" {
				t.Fatalf("prompts/list: %v %+v", err, pl)
			}
			for name, want := range map[string]string{"n_greet": "new says hello to ada", "o_greet": "old says hello to ada"} {
				gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: map[string]string{"name": "ada"}})
				if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*sdk.TextContent).Text != want {
					t.Errorf("prompts/get %s: %v %+v", name, err, gp)
				}
			}
			cr, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "o_greet"},
				Argument: sdk.CompleteParamsArgument{Name: "name", Value: "al"}})
			if err != nil || strings.Join(cr.Completion.Values, ",") != "old:alice,old:alfred" {
				t.Errorf("completion/complete: %v %+v", err, cr)
			}

			// Progress streams through before the result exists.
			for _, name := range []string{"n_progress", "o_progress"} {
				p := &sdk.CallToolParams{Name: name, Arguments: map[string]any{}}
				p.SetProgressToken("tok-" + name)
				res, err := cs.CallTool(ctx, p)
				if err != nil || res.IsError || !strings.HasSuffix(textOf(t, res), "done after progress") {
					t.Errorf("%s: %v %+v", name, err, res)
				}
				select {
				case msg := <-progressed:
					if msg != "half way" {
						t.Errorf("%s progress %q", name, msg)
					}
				default:
					t.Errorf("%s: no progress reached the client", name)
				}
			}

			// An input_required result: a 2026-07-28 client answers it and
			// its retry reaches the same server; a legacy client cannot.
			if tc.version == "2026-07-28" {
				if res := call("n_ask", map[string]any{}); res.IsError || textOf(t, res) != "new:hello ada" {
					t.Errorf("n_ask: isError %v %q", res.IsError, textOf(t, res))
				}
			} else if res := call("n_ask", map[string]any{}); !res.IsError || !strings.Contains(textOf(t, res), "input_required") {
				t.Errorf("n_ask from a legacy client: isError %v %q, want an isError naming input_required", res.IsError, textOf(t, res))
			}

			// The legacy server forgets the gateway's session: the call
			// still succeeds, over a new session.
			inits := up.oldInits.Load()
			up.forget()
			if res := call("o_whoami", map[string]any{"word": "y"}); res.IsError || textOf(t, res) != "old:y" {
				t.Errorf("after the server forgot the session: isError %v %q", res.IsError, textOf(t, res))
			}
			if up.oldInits.Load() != inits+1 {
				t.Errorf("legacy handshakes %d → %d, want one more", inits, up.oldInits.Load())
			}

			// Failures.
			for name, want := range map[string]string{"g_ping": "unavailable", "n_hang": "timeout", "o_hang": "timeout", "n_garbage": "not a json-rpc response"} {
				res := call(name, map[string]any{})
				if !res.IsError || !strings.Contains(strings.ToLower(textOf(t, res)), want) {
					t.Errorf("%s: isError %v %q, want %q", name, res.IsError, textOf(t, res), want)
				}
			}
		})
	}

	t.Run("the server's session stays with the gateway", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"o_whoami","arguments":{"word":"s"}}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "old:s") || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("status %d session %q body %s", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b)
		}
		if up.headers("/old").Get("Mcp-Session-Id") == "" {
			t.Error("the legacy server got no session id")
		}
	})

	t.Run("mcp-go legacy client", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		tr, err := mcpgotransport.NewStreamableHTTP(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		c := mcpgo.NewClient(tr, mcpgo.WithProtocolVersion("2025-11-25"))
		defer c.Close()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		ir := mcpgomcp.InitializeRequest{}
		ir.Params.ProtocolVersion = "2025-11-25"
		ir.Params.ClientInfo = mcpgomcp.Implementation{Name: "e2e-mcpgo", Version: "1.0.0"}
		if _, err := c.Initialize(ctx, ir); err != nil {
			t.Fatalf("initialize: %v", err)
		}
		for name, want := range map[string]string{"n_whoami": "new:z", "o_whoami": "old:z"} {
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = name, map[string]any{"word": "z"}
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError || len(res.Content) != 1 {
				t.Fatalf("%s: %v %+v", name, err, res)
			}
			if tc, ok := mcpgomcp.AsTextContent(res.Content[0]); !ok || tc.Text != want {
				t.Errorf("%s: %+v", name, res.Content)
			}
		}
	})

	// An event stream that never ends: the progress event arrives, then,
	// shortly before the route timeout (which could only reset the stream:
	// envoy/dataplane/internal/rules/rules.go, route timeout), the gateway ends it with an isError
	// "timeout" result carrying the request's id and a clean end
	// (docs/decisions/0013-federated-stream-deadline.md, on by default).
	t.Run("endless stream", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":"f1","method":"tools/call","params":{"name":"n_forever","arguments":{},"_meta":{"progressToken":"p"}}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(resp.Body)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		all := strings.Join(lines, "\n")
		p, r := strings.Index(all, "notifications/progress"), strings.Index(all, `"id":"f1","result":`)
		if p < 0 || r < p || !strings.Contains(all[r:], `"isError":true`) || !strings.Contains(all[r:], "tool n_forever failed: timeout") {
			t.Errorf("stream %q: want the progress event, then the isError timeout result for id f1", all)
		}
		if err := sc.Err(); err != nil {
			t.Errorf("the stream ended with %v; want a clean end", err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
