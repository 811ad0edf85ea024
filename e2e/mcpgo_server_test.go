package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpgoUpstream is an MCP server written with mcp-go (streamable HTTP, its
// default options) on loopback: /mcp serves MCP, GET /release lets the
// progress tool finish (for clients that cannot reach the test's channel,
// such as the TypeScript one).
type mcpgoUpstream struct {
	URL     string // the MCP endpoint
	Release string // GET it to let a waiting progress tool answer
	release chan struct{}
	done    chan struct{}
}

func (u *mcpgoUpstream) letGo() {
	select {
	case u.release <- struct{}{}:
	default:
	}
}

// newMCPGoUpstream serves tools whoami, echo (whose name the native Tool
// Service's echo shares: the route's toolPrefix keeps them apart) and
// progress, which reports progress and then waits until the client saw it
// (a gateway that buffered the event stream would hold the progress back and
// the call would time out); a prompt greet and a resource mcpgo://readme.
func newMCPGoUpstream(t *testing.T) *mcpgoUpstream {
	t.Helper()
	u := &mcpgoUpstream{release: make(chan struct{}, 1), done: make(chan struct{})}
	s := mcpgoserver.NewMCPServer("mcpgo-upstream", "1.0.0",
		mcpgoserver.WithToolCapabilities(false), mcpgoserver.WithPromptCapabilities(false),
		mcpgoserver.WithResourceCapabilities(false, false))
	s.AddTool(mcpgomcp.NewTool("whoami", mcpgomcp.WithDescription("Says which server answers."), mcpgomcp.WithString("word")),
		func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
			return mcpgomcp.NewToolResultText("mcpgo:" + req.GetString("word", "")), nil
		})
	s.AddTool(mcpgomcp.NewTool("echo", mcpgomcp.WithDescription("Echoes, from mcp-go."), mcpgomcp.WithString("message")),
		func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
			return mcpgomcp.NewToolResultText("mcpgo echo:" + req.GetString("message", "")), nil
		})
	s.AddTool(mcpgomcp.NewTool("progress", mcpgomcp.WithDescription("Reports progress, then waits for the client to see it.")),
		func(ctx context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
			var token mcpgomcp.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			if token == nil {
				return mcpgomcp.NewToolResultError("no progressToken in the request"), nil
			}
			if err := mcpgoserver.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcpgomcp.MethodNotificationProgress),
				map[string]any{"progressToken": token, "progress": 1, "total": 2, "message": "half way"}); err != nil {
				return nil, err
			}
			select {
			case <-u.release:
				return mcpgomcp.NewToolResultText("mcpgo:done after progress"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-u.done:
				return nil, errors.New("test over")
			}
		})
	s.AddPrompt(mcpgomcp.NewPrompt("greet", mcpgomcp.WithArgument("name", mcpgomcp.RequiredArgument())),
		func(_ context.Context, req mcpgomcp.GetPromptRequest) (*mcpgomcp.GetPromptResult, error) {
			return mcpgomcp.NewGetPromptResult("greeting", []mcpgomcp.PromptMessage{
				mcpgomcp.NewPromptMessage(mcpgomcp.RoleUser, mcpgomcp.NewTextContent("mcpgo says hello to "+req.Params.Arguments["name"])),
			}), nil
		})
	s.AddResource(mcpgomcp.NewResource("mcpgo://readme", "readme", mcpgomcp.WithMIMEType("text/plain")),
		func(_ context.Context, req mcpgomcp.ReadResourceRequest) ([]mcpgomcp.ResourceContents, error) {
			return []mcpgomcp.ResourceContents{mcpgomcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "mcpgo readme"}}, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpgoserver.NewStreamableHTTPServer(s))
	mux.HandleFunc("GET /release", func(w http.ResponseWriter, _ *http.Request) {
		u.letGo()
		w.WriteHeader(http.StatusNoContent)
	})
	srv := newLoopbackServer(t, mux)
	// Registered after the server, so it runs before the server's Close,
	// which waits for every handler.
	t.Cleanup(func() { close(u.done) })
	u.URL, u.Release = srv.URL+"/mcp", srv.URL+"/release"
	return u
}

// writeListing writes a Portal listing (any shape) to a temp file and returns its path.
func writeListing(t *testing.T, listing map[string]any) string {
	t.Helper()
	b, err := json.Marshal(listing)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFederatedMCPGoServer: an MCP server written with mcp-go behind a
// federated route that also has a native Tool Service. The gateway discovers
// it (/health), lists its tools with the route's prefix beside the native
// ones (both serve echo), and the go-sdk client (both eras) and the mcp-go
// client call its tools, see its progress before the result, get its prompt
// and read its resource.
func TestFederatedMCPGoServer(t *testing.T) {
	native := newToolService(t, "native", standardTools(""))
	up := newMCPGoUpstream(t)
	portal := writeListing(t, map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "native", "url": native.srv.URL},
		map[string]any{"name": "mcpgo", "protocol": "mcp", "url": up.URL, "toolPrefix": "m_",
			"cluster": map[string]any{"requestTimeout": "20s", "maxRetries": 0}},
	}}}})
	gw := startGateway(t, portal)
	endpoint := gw.URL + "/mcp/fed"

	t.Run("discovery", func(t *testing.T) {
		_, body := gw.get(t, "/health")
		var doc struct {
			Registry struct {
				Routes []struct {
					Key       string   `json:"key"`
					Ambiguous []string `json:"ambiguous"`
					Services  []struct {
						Name, Protocol, Era, ProtocolVersion, Server, LastError string
						Tools                                                   int
					} `json:"services"`
				} `json:"routes"`
			} `json:"registry"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || len(doc.Registry.Routes) != 1 {
			t.Fatalf("/health %s: %v", body, err)
		}
		rt := doc.Registry.Routes[0]
		if len(rt.Ambiguous) != 0 || len(rt.Services) != 2 {
			t.Fatalf("/health route %+v: want two services and no ambiguous tool", rt)
		}
		s := rt.Services[1]
		if s.Name != "mcpgo" || s.Protocol != "mcp" || s.Server != "mcpgo-upstream 1.0.0" || s.LastError != "" || s.Tools != 3 ||
			s.Era == "" || s.ProtocolVersion == "" {
			t.Errorf("/health line of the mcp-go server %+v", s)
		}
		t.Logf("mcp-go server discovered as era %q, protocol version %s", s.Era, s.ProtocolVersion)
	})

	for _, tc := range []struct{ name, pin, version string }{{"go-sdk 2026", "", "2026-07-28"}, {"go-sdk legacy", "2025-11-25", "2025-11-25"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			progressed := make(chan string, 4)
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
					progressed <- req.Params.Message
					up.letGo()
				},
			})
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: -1},
				&sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
				t.Fatalf("negotiated %q, want %q", got, tc.version)
			}
			if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil {
				t.Errorf("capabilities %+v lack tools, resources or prompts", caps)
			}
			tl, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tl.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"echo", "add", "m_whoami", "m_echo", "m_progress"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list %v lacks %s", names, want)
				}
			}
			if slices.Contains(names, "whoami") || slices.Contains(names, "progress") {
				t.Errorf("tools/list %v lists a federated tool without its prefix", names)
			}
			for name, want := range map[string]string{"m_whoami": "mcpgo:x", "m_echo": "mcpgo echo:x", "echo": "x"} {
				args := map[string]any{"word": "x", "message": "x"}
				if name == "echo" {
					args = map[string]any{"message": "x"}
				}
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
				if err != nil || res.IsError || textOf(t, res) != want {
					t.Errorf("tools/call %s: %v %+v, want %q", name, err, res, want)
				}
			}

			p := &sdk.CallToolParams{Name: "m_progress", Arguments: map[string]any{}}
			p.SetProgressToken("tok-go-sdk")
			res, err := cs.CallTool(ctx, p)
			if err != nil || res.IsError || textOf(t, res) != "mcpgo:done after progress" {
				t.Errorf("m_progress: %v %+v", err, res)
			}
			select {
			case msg := <-progressed:
				if msg != "half way" {
					t.Errorf("progress message %q", msg)
				}
			default:
				t.Error("no progress reached the client")
			}

			gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "m_greet", Arguments: map[string]string{"name": "ada"}})
			if err != nil || len(gp.Messages) != 1 {
				t.Fatalf("prompts/get m_greet: %v %+v", err, gp)
			}
			if tc, ok := gp.Messages[0].Content.(*sdk.TextContent); !ok || tc.Text != "mcpgo says hello to ada" {
				t.Errorf("prompts/get m_greet: %+v", gp.Messages[0].Content)
			}
			rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "mcpgo://readme"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "mcpgo readme" {
				t.Errorf("resources/read mcpgo://readme: %v %+v", err, rr)
			}
		})
	}

	for _, tc := range []struct{ name, pin, version string }{{"mcp-go client 2026", "", "2026-07-28"}, {"mcp-go client legacy", "2025-11-25", "2025-11-25"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			tr, err := mcpgotransport.NewStreamableHTTP(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			var opts []mcpgo.ClientOption
			if tc.pin != "" {
				opts = append(opts, mcpgo.WithProtocolVersion(tc.pin))
			}
			c := mcpgo.NewClient(tr, opts...)
			defer c.Close()
			progressed := make(chan string, 4)
			c.OnNotification(func(n mcpgomcp.JSONRPCNotification) {
				if n.Method == string(mcpgomcp.MethodNotificationProgress) {
					msg, _ := n.Params.AdditionalFields["message"].(string)
					progressed <- msg
					up.letGo()
				}
			})
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			ir := mcpgomcp.InitializeRequest{}
			ir.Params.ProtocolVersion = tc.pin
			if ir.Params.ProtocolVersion == "" {
				ir.Params.ProtocolVersion = mcpgomcp.LATEST_PROTOCOL_VERSION
			}
			ir.Params.ClientInfo = mcpgomcp.Implementation{Name: "e2e-mcpgo", Version: "1.0.0"}
			init, err := c.Initialize(ctx, ir)
			if err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if init.ProtocolVersion != tc.version {
				t.Fatalf("negotiated %q, want %q", init.ProtocolVersion, tc.version)
			}
			tl, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tl.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Contains(names, "m_whoami") || !slices.Contains(names, "echo") {
				t.Errorf("tools/list %v lacks m_whoami or echo", names)
			}
			call := func(name string, args map[string]any, progressToken any) string {
				t.Helper()
				req := mcpgomcp.CallToolRequest{}
				req.Params.Name, req.Params.Arguments = name, args
				if progressToken != nil {
					req.Params.Meta = &mcpgomcp.Meta{ProgressToken: progressToken}
				}
				res, err := c.CallTool(ctx, req)
				if err != nil || res.IsError || len(res.Content) != 1 {
					t.Fatalf("tools/call %s: %v %+v", name, err, res)
				}
				text, _ := mcpgomcp.AsTextContent(res.Content[0])
				if text == nil {
					t.Fatalf("tools/call %s: %+v is not text", name, res.Content)
				}
				return text.Text
			}
			if got := call("m_whoami", map[string]any{"word": "z"}, nil); got != "mcpgo:z" {
				t.Errorf("m_whoami: %q", got)
			}
			if got := call("echo", map[string]any{"message": "native"}, nil); got != "native" {
				t.Errorf("native echo: %q", got)
			}
			if got := call("m_progress", map[string]any{}, "tok-mcpgo"); got != "mcpgo:done after progress" {
				t.Errorf("m_progress: %q", got)
			}
			select {
			case msg := <-progressed:
				if msg != "half way" {
					t.Errorf("progress message %q", msg)
				}
			default:
				t.Error("no progress reached the client")
			}

			gp, err := c.GetPrompt(ctx, mcpgomcp.GetPromptRequest{Params: mcpgomcp.GetPromptParams{Name: "m_greet", Arguments: map[string]string{"name": "bob"}}})
			if err != nil || len(gp.Messages) != 1 {
				t.Fatalf("prompts/get m_greet: %v %+v", err, gp)
			}
			if text, ok := mcpgomcp.AsTextContent(gp.Messages[0].Content); !ok || text.Text != "mcpgo says hello to bob" {
				t.Errorf("prompts/get m_greet: %+v", gp.Messages[0].Content)
			}
			rr, err := c.ReadResource(ctx, mcpgomcp.ReadResourceRequest{Params: mcpgomcp.ReadResourceParams{URI: "mcpgo://readme"}})
			if err != nil || len(rr.Contents) != 1 {
				t.Fatalf("resources/read: %v %+v", err, rr)
			}
			if text, ok := mcpgomcp.AsTextResourceContents(rr.Contents[0]); !ok || text.Text != "mcpgo readme" {
				t.Errorf("resources/read mcpgo://readme: %+v", rr.Contents[0])
			}
			if strings.Contains(tc.name, "legacy") && tr.GetSessionId() != "" {
				t.Errorf("the gateway issued session %q to the client", tr.GetSessionId())
			}
		})
	}
}
