package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The interop matrix: unmodified MCP servers from npm, at the versions the
// package-lock.json files under interop/ pin, behind toolmesh routes
// (docs/interop.md lists them).

// nodeServer is one node process serving MCP over streamable HTTP on a
// loopback port that stays the same across restarts.
type nodeServer struct {
	node, dir string
	args, env []string
	addr      string // 127.0.0.1:port
	logs      *syncBuffer
	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
}

// startNodeServer runs node with args in dir, PORT set to a free loopback
// port; interop/loopback.mjs makes the server bind 127.0.0.1 only. It
// returns once the port accepts connections.
// "{PORT}" in args is replaced by the port; env is added to the
// environment.
func startNodeServer(t *testing.T, node, dir string, env []string, args ...string) *nodeServer {
	t.Helper()
	s := &nodeServer{node: node, dir: dir, env: env, addr: freePort(t), logs: &syncBuffer{}}
	_, port, _ := net.SplitHostPort(s.addr)
	for _, a := range args {
		s.args = append(s.args, strings.ReplaceAll(a, "{PORT}", port))
	}
	t.Cleanup(func() {
		s.kill(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", dir, tail(s.logs.String(), 60))
		}
	})
	s.start(t)
	return s
}

func (s *nodeServer) start(t *testing.T) {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	loopback, err := filepath.Abs(filepath.Join("interop", "loopback.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.node, append([]string{"--import", "file://" + loopback}, s.args...)...)
	cmd.Dir = s.dir
	// No proxy and no outbound domains: the servers talk to loopback only.
	cmd.Env = append(append(os.Environ(), "PORT="+port, "HTTP_PROXY=", "HTTPS_PROXY="), s.env...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node %v: %v", s.args, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	eventually(t, 60*time.Second, "node "+strings.Join(s.args, " ")+" listening on "+s.addr, func() bool {
		select {
		case <-done:
			t.Fatalf("node %v exited before listening:\n%s", s.args, tail(s.logs.String(), 40))
		default:
		}
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// kill ends the process (SIGKILL: a crash, not a graceful shutdown) and
// waits for it.
func (s *nodeServer) kill(t *testing.T) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Errorf("node %v did not exit within 15 s of SIGKILL", s.args)
	}
}

// everythingDir holds the package-lock.json pinning
// @modelcontextprotocol/server-everything.
var everythingDir = filepath.Join("interop", "everything")

// startEverything installs (npm ci) and starts the unmodified reference
// server over streamable HTTP; its endpoint is /mcp.
func startEverything(t *testing.T) *nodeServer {
	t.Helper()
	node := npmInstalled(t, everythingDir, "@modelcontextprotocol/server-everything")
	return startNodeServer(t, node, everythingDir, []string{"GZIP_ALLOWED_DOMAINS=127.0.0.1"},
		filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
}

// everythingTools are the tools server-everything lists to a client that
// declares no roots, sampling or elicitation capability, as the gateway's
// upstream session does (docs/interop.md says why). Each has arguments
// that call it without touching the network, and what its text must hold;
// for the one tool the gateway cannot call, fails is the text of its
// isError result (docs/interop.md says why).
var everythingTools = map[string]struct {
	args        map[string]any
	want, fails string
}{
	"echo":                   {args: map[string]any{"message": "héllo"}, want: "Echo: héllo"},
	"get-annotated-message":  {args: map[string]any{"messageType": "success"}, want: "Operation completed successfully"},
	"get-env":                {args: map[string]any{}, want: "PORT"},
	"get-resource-links":     {args: map[string]any{"count": 2}, want: "resource links"},
	"get-resource-reference": {args: map[string]any{"resourceType": "Text", "resourceId": 3}, want: "Resource 3"},
	"get-structured-content": {args: map[string]any{"location": "Chicago"}, want: "temperature"},
	"get-sum":                {args: map[string]any{"a": 2, "b": 40}, want: "42"},
	"get-tiny-image":         {args: map[string]any{}, want: "MCP logo"},
	// Its taskSupport is "required": it answers only a call with the
	// experimental tasks utility's task parameter, then tasks/get and
	// tasks/result, which the gateway does not offer.
	"simulate-research-query": {args: map[string]any{"topic": "gateways"}, fails: "requires task augmentation"},
	"gzip-file-as-resource": {args: map[string]any{"name": "hi.txt.gz", "data": "data:text/plain;base64,aGVsbG8=",
		"outputType": "resource"}, want: "hi.txt.gz"},
	"toggle-simulated-logging":       {args: map[string]any{}, want: "logging"},
	"toggle-subscriber-updates":      {args: map[string]any{}, want: "updates"},
	"trigger-long-running-operation": {args: map[string]any{"duration": 0.3, "steps": 3}, want: "Long running operation completed"},
}

// interopEra is a client era: pin is the version the client asks for ("":
// its default), version the one it must negotiate.
type interopEra struct{ name, pin, version string }

// interopEras are the client eras each server is driven in: the go-sdk
// client's default and the legacy handshake.
var interopEras = []interopEra{
	{"client-2026", "", "2026-07-28"},
	{"client-legacy", "2025-11-25", "2025-11-25"},
}

// interopClient connects the go-sdk client to endpoint in era, checks the
// version it negotiated, and counts progress notifications.
func interopClient(t *testing.T, ctx context.Context, endpoint string, era interopEra) (*sdk.ClientSession, func() int) {
	t.Helper()
	var mu sync.Mutex
	progress := 0
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e-interop", Version: "1.0.0"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress++
			mu.Unlock()
		},
	})
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: era.pin})
	if err != nil {
		t.Fatalf("connect %s (%s): %v", endpoint, era.name, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era.version {
		t.Fatalf("negotiated %q, want %q", got, era.version)
	}
	return cs, func() int { mu.Lock(); defer mu.Unlock(); return progress }
}

// healthLine is what /health must say of a federated service.
type healthLine struct {
	server string // name and version from the server's initialize answer
	tools  int
}

// checkInteropHealth checks /health's line for each service in want (by
// name): a legacy-era MCP server, its name and tool count, and no error.
func checkInteropHealth(t *testing.T, gw *gateway, want map[string]healthLine) {
	t.Helper()
	_, body := gw.get(t, "/health")
	var doc struct {
		Registry struct {
			Routes []struct {
				Key      string `json:"key"`
				Services []struct {
					Name, Protocol, Era, Server, LastError string
					Tools                                  int
				} `json:"services"`
			} `json:"routes"`
		} `json:"registry"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/health %s: %v", body, err)
	}
	seen := map[string]bool{}
	for _, rt := range doc.Registry.Routes {
		for _, s := range rt.Services {
			w, ok := want[s.Name]
			if !ok {
				continue
			}
			seen[s.Name] = true
			if s.Protocol != "mcp" || s.Era != "legacy" || s.Server != w.server || s.LastError != "" || s.Tools != w.tools {
				t.Errorf("/health route %s service line %+v, want %s in the legacy era with %d tools and no error", rt.Key, s, w.server, w.tools)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("/health lacks service %s: %s", name, body)
		}
	}
}

// resultString shows a call's result in a failure message.
func resultString(res *sdk.CallToolResult) string {
	if res == nil {
		return "no result"
	}
	return fmt.Sprintf("isError %v %q", res.IsError, contentText(res))
}

// toolNames lists the tools of cs.
func toolNames(t *testing.T, ctx context.Context, cs *sdk.ClientSession) []string {
	t.Helper()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// contentText joins a result's text, and names the other content kinds.
func contentText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[%s image, %d bytes]", c.MIMEType, len(c.Data)))
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// TestInteropEverything puts the unmodified reference server
// @modelcontextprotocol/server-everything (streamable HTTP) behind two
// routes, alone and with prefix e_ beside a native Tool Service, and
// drives them with the go-sdk client in both eras (and the TypeScript SDK
// client once): discovery, tools/list,
// a call of every listed tool, streamed progress, resources/read,
// prompts/get, completion and error mapping; then it kills the server,
// sees calls fail while it is down, restarts it on the same port and sees
// the first call succeed over a new upstream session (the server answers
// the old one with 400 "No valid session ID provided", not 404).
func TestInteropEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ev := startEverything(t)
	native := newToolService(t, "native", standardTools(""))
	evURL := "http://" + ev.addr + "/mcp"
	cluster := map[string]any{"requestTimeout": "20s", "connectTimeout": "1s", "maxRetries": 0}
	portal := writeListing(t, map[string]any{"routes": []any{
		map[string]any{"key": "everything", "toolServices": []any{
			map[string]any{"name": "everything", "protocol": "mcp", "url": evURL, "cluster": cluster},
		}},
		map[string]any{"key": "mixed", "toolServices": []any{
			map[string]any{"name": "native", "url": native.srv.URL},
			map[string]any{"name": "everything-e", "protocol": "mcp", "url": evURL, "toolPrefix": "e_", "cluster": cluster},
		}},
	}})
	gw := startGateway(t, portal)

	t.Run("discovery", func(t *testing.T) {
		server := healthLine{server: "mcp-servers/everything 2.0.0", tools: len(everythingTools)}
		checkInteropHealth(t, gw, map[string]healthLine{"everything": server, "everything-e": server})
	})

	for _, era := range interopEras {
		for _, rt := range []struct{ key, prefix string }{{"everything", ""}, {"mixed", "e_"}} {
			t.Run(era.name+"/"+rt.key, func(t *testing.T) {
				cs, progress := interopClient(t, ctx, gw.URL+"/mcp/"+rt.key, era)
				caps := cs.InitializeResult().Capabilities
				if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil {
					t.Errorf("capabilities %+v lack tools, resources, prompts or completions", caps)
				}

				names := toolNames(t, ctx, cs)
				for name := range everythingTools {
					if !slices.Contains(names, rt.prefix+name) {
						t.Errorf("tools/list %v lacks %s", names, rt.prefix+name)
					}
				}
				if rt.key == "mixed" && !slices.Contains(names, "echo") {
					t.Errorf("tools/list %v lacks the native echo", names)
				}
				if want := len(everythingTools); rt.key == "everything" && len(names) != want {
					t.Errorf("tools/list has %d tools %v, want server-everything's %d", len(names), names, want)
				}

				// Every tool server-everything lists, called through the gateway.
				for name, tc := range everythingTools {
					p := &sdk.CallToolParams{Name: rt.prefix + name, Arguments: tc.args}
					before := progress()
					if name == "trigger-long-running-operation" {
						p.SetProgressToken("interop-" + rt.key)
					}
					res, err := cs.CallTool(ctx, p)
					if err != nil {
						t.Errorf("tools/call %s: %v", p.Name, err)
						continue
					}
					if tc.fails != "" {
						if !res.IsError || !strings.Contains(contentText(res), tc.fails) {
							t.Errorf("tools/call %s: isError %v, content %q, want an isError result holding %q", p.Name, res.IsError, contentText(res), tc.fails)
						}
						continue
					}
					if res.IsError || len(res.Content) == 0 || !strings.Contains(contentText(res), tc.want) {
						t.Errorf("tools/call %s: isError %v, content %q, want it to hold %q", p.Name, res.IsError, contentText(res), tc.want)
					}
					if name == "trigger-long-running-operation" {
						eventually(t, 10*time.Second, "3 progress notifications of "+p.Name, func() bool { return progress()-before >= 3 })
					}
				}
				// The toggles started simulated logging and subscriber updates
				// on the gateway's upstream session; a second call stops them.
				for _, name := range []string{"toggle-simulated-logging", "toggle-subscriber-updates"} {
					if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: rt.prefix + name, Arguments: map[string]any{}}); err != nil || res.IsError {
						t.Errorf("second call of %s: %v %+v", name, err, res)
					}
				}

				// Resources: a listed one and one through a template.
				rl, err := cs.ListResources(ctx, nil)
				if err != nil || len(rl.Resources) == 0 {
					t.Fatalf("resources/list: %v %+v", err, rl)
				}
				for _, uri := range []string{rl.Resources[0].URI, "demo://resource/dynamic/text/7"} {
					rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
					if err != nil || len(rr.Contents) != 1 || rr.Contents[0].URI != uri || (rr.Contents[0].Text == "" && len(rr.Contents[0].Blob) == 0) {
						t.Errorf("resources/read %s: %v %+v", uri, err, rr)
					}
				}

				// Prompts and completion.
				gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: rt.prefix + "simple-prompt"})
				if err != nil || len(gp.Messages) != 1 || !strings.Contains(gp.Messages[0].Content.(*sdk.TextContent).Text, "simple prompt") {
					t.Errorf("prompts/get %ssimple-prompt: %v %+v", rt.prefix, err, gp)
				}
				cr, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/prompt", Name: rt.prefix + "completable-prompt"},
					Argument: sdk.CompleteParamsArgument{Name: "name", Value: "A"},
					Context:  &sdk.CompleteContext{Arguments: map[string]string{"department": "Engineering"}}})
				if err != nil || !slices.Equal(cr.Completion.Values, []string{"Alice"}) {
					t.Errorf("completion/complete: %v %+v, want [Alice]", err, cr)
				}

				// Error mapping: a tool the route lacks is the gateway's -32602;
				// a resource the upstream refuses is the upstream's JSON-RPC
				// error, passed on with its code; a prompt without its required
				// argument fails.
				_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: rt.prefix + "no-such-tool", Arguments: map[string]any{}})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
					t.Errorf("unknown tool: %v, want JSON-RPC -32602", err)
				}
				_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "demo://resource/dynamic/text/0"})
				if !errors.As(err, &rpcErr) || !strings.Contains(rpcErr.Message, "Unknown resource: demo://resource/dynamic/text/0") {
					t.Errorf("resources/read of resource 0 (the server refuses it): %v, want its JSON-RPC error", err)
				}
				_, err = cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: rt.prefix + "args-prompt"})
				if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || !strings.Contains(rpcErr.Message, "Invalid arguments for prompt args-prompt") {
					t.Errorf("prompts/get args-prompt without its required argument: %v, want the server's -32602", err)
				}
			})
		}
	}

	// The official TypeScript SDK at both ends: its client (tsclient)
	// through the mixed route to the reference server.
	t.Run("typescript-client", func(t *testing.T) {
		node := tsClientNode(t)
		rep, stderr := runTSClient(t, node, gw.URL+"/mcp/mixed", tsPlan{
			Calls: []tsCall{
				{Name: "e_echo", Arguments: map[string]any{"message": "ts"}},
				{Name: "e_trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}, Progress: true},
				{Name: "echo", Arguments: map[string]any{"message": "native"}},
			},
			Resources: []string{"demo://resource/dynamic/text/2"},
			Prompts:   []tsPrompt{{Name: "e_simple-prompt", Arguments: map[string]string{}}},
		})
		defer func() {
			if t.Failed() {
				t.Logf("client.mjs stderr:\n%s", stderr)
			}
		}()
		want := []string{"Echo: ts", "Long running operation completed", "native"}
		if len(rep.Calls) != len(want) {
			t.Fatalf("calls %+v", rep.Calls)
		}
		for i, c := range rep.Calls {
			if c.Error != "" || c.IsError || !strings.Contains(strings.Join(c.Text, "\n"), want[i]) {
				t.Errorf("call %s: error %q isError %v text %q, want it to hold %q", c.Name, c.Error, c.IsError, c.Text, want[i])
			}
		}
		if p := rep.Calls[1].Progress; len(p) != 3 || p[2].Progress != 3 || p[2].Total != 3 {
			t.Errorf("progress notifications %+v, want 3 of 3", p)
		}
		if len(rep.Resources) != 1 || rep.Resources[0].Error != "" || !strings.Contains(strings.Join(rep.Resources[0].Text, ""), "Resource 2") {
			t.Errorf("resources/read: %+v", rep.Resources)
		}
		if len(rep.Prompts) != 1 || rep.Prompts[0].Error != "" || !strings.Contains(strings.Join(rep.Prompts[0].Text, ""), "simple prompt") {
			t.Errorf("prompts/get: %+v", rep.Prompts)
		}
	})

	t.Run("restart", func(t *testing.T) {
		cs, _ := interopClient(t, ctx, gw.URL+"/mcp/everything", interopEras[1])
		echo := func() (*sdk.CallToolResult, error) {
			return cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "again"}})
		}
		if res, err := echo(); err != nil || res.IsError {
			t.Fatalf("echo before the restart: %v %+v", err, res)
		}
		ev.kill(t)
		if res, err := echo(); err != nil || !res.IsError || !strings.Contains(strings.ToLower(contentText(res)), "unavailable") {
			t.Errorf("echo while the server is down: %v %s, want an isError result naming unavailable", err, resultString(res))
		}
		ev.start(t)
		logged := len(ev.logs.String())
		// The restarted server knows none of the old sessions and answers
		// them 400; the gateway re-initializes and retries once, so the
		// first call after the restart succeeds.
		if res, err := echo(); err != nil || res.IsError || contentText(res) != "Echo: again" {
			t.Errorf("first echo after the restart: %v %s", err, resultString(res))
		}
		if after := ev.logs.String()[logged:]; !strings.Contains(after, "Session initialized") {
			t.Errorf("the restarted server initialized no session for the call:\n%s", after)
		}
	})
}

// tsServerDir holds server.mjs, an MCP server written with the official
// TypeScript SDK, and the package-lock.json pinning the SDK.
var tsServerDir = filepath.Join("interop", "tsserver")

// tsTarget is one of server.mjs's endpoints as a route serves it.
type tsTarget struct {
	route, prefix, kind string
}

// TestInteropTypeScriptServer puts server.mjs (the official TypeScript
// SDK's McpServer and StreamableHTTPServerTransport) behind routes: its
// stateful (legacy-era) endpoint and its stateless one
// (sessionIdGenerator: undefined) each alone, and both with prefixes beside
// a native Tool Service. The go-sdk client in both eras checks discovery,
// tools/list, calls, streamed progress, resources/read, prompts/get,
// completion and error mapping; then the server is killed and restarted on
// the same port, and the first call after it succeeds (the stateful
// endpoint answers the lost session 404).
func TestInteropTypeScriptServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	node := npmInstalled(t, tsServerDir, "@modelcontextprotocol/sdk")
	srv := startNodeServer(t, node, tsServerDir, nil, "server.mjs")
	native := newToolService(t, "native", standardTools(""))
	base := "http://" + srv.addr
	cluster := map[string]any{"requestTimeout": "20s", "connectTimeout": "1s", "maxRetries": 0}
	svc := func(name, path, prefix string) map[string]any {
		return map[string]any{"name": name, "protocol": "mcp", "url": base + path, "toolPrefix": prefix, "cluster": cluster}
	}
	portal := writeListing(t, map[string]any{"routes": []any{
		map[string]any{"key": "ts", "toolServices": []any{svc("ts", "/mcp", "")}},
		map[string]any{"key": "ts-stateless", "toolServices": []any{svc("ts-stateless", "/stateless", "")}},
		map[string]any{"key": "mixed", "toolServices": []any{
			map[string]any{"name": "native", "url": native.srv.URL},
			svc("ts-t", "/mcp", "t_"),
			svc("ts-s", "/stateless", "s_"),
		}},
	}})
	gw := startGateway(t, portal)
	targets := []tsTarget{{"ts", "", "stateful"}, {"ts-stateless", "", "stateless"}, {"mixed", "t_", "stateful"}, {"mixed", "s_", "stateless"}}

	t.Run("discovery", func(t *testing.T) {
		stateful, stateless := healthLine{server: "ts-stateful 1.0.0", tools: 4}, healthLine{server: "ts-stateless 1.0.0", tools: 4}
		checkInteropHealth(t, gw, map[string]healthLine{"ts": stateful, "ts-t": stateful, "ts-stateless": stateless, "ts-s": stateless})
	})

	for _, era := range interopEras {
		for _, tg := range targets {
			t.Run(era.name+"/"+tg.route+"/"+tg.kind, func(t *testing.T) {
				cs, progress := interopClient(t, ctx, gw.URL+"/mcp/"+tg.route, era)
				names := toolNames(t, ctx, cs)
				for _, n := range []string{"echo", "add", "progress", "fail"} {
					if !slices.Contains(names, tg.prefix+n) {
						t.Errorf("tools/list %v lacks %s", names, tg.prefix+n)
					}
				}
				if tg.route == "mixed" && !slices.Contains(names, "json") {
					t.Errorf("tools/list %v lacks the native json", names)
				}
				call := func(name string, args map[string]any, token string) *sdk.CallToolResult {
					t.Helper()
					p := &sdk.CallToolParams{Name: tg.prefix + name, Arguments: args}
					if token != "" {
						p.SetProgressToken(token)
					}
					res, err := cs.CallTool(ctx, p)
					if err != nil {
						t.Fatalf("tools/call %s: %v", p.Name, err)
					}
					return res
				}
				if res := call("echo", map[string]any{"message": "x"}, ""); res.IsError || contentText(res) != tg.kind+":x" {
					t.Errorf("echo: isError %v %q", res.IsError, contentText(res))
				}
				res := call("add", map[string]any{"a": 2, "b": 3}, "")
				if sc, _ := json.Marshal(res.StructuredContent); res.IsError || contentText(res) != "5" || string(sc) != `{"sum":5}` {
					t.Errorf("add: isError %v %q structuredContent %s", res.IsError, contentText(res), sc)
				}
				before := progress()
				if res := call("progress", map[string]any{}, "tok-"+tg.kind); res.IsError || contentText(res) != tg.kind+":done" {
					t.Errorf("progress: isError %v %q", res.IsError, contentText(res))
				}
				eventually(t, 10*time.Second, "3 progress notifications", func() bool { return progress()-before >= 3 })
				if res := call("fail", map[string]any{}, ""); !res.IsError || !strings.Contains(contentText(res), tg.kind+" tool failed on purpose") {
					t.Errorf("fail: isError %v %q, want the server's isError result", res.IsError, contentText(res))
				}

				for uri, want := range map[string]string{tg.kind + "://readme": tg.kind + " readme", tg.kind + "://items/7": tg.kind + " item 7"} {
					rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
					if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != want {
						t.Errorf("resources/read %s: %v %+v", uri, err, rr)
					}
				}
				gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: tg.prefix + "greet", Arguments: map[string]string{"name": "ada"}})
				if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*sdk.TextContent).Text != tg.kind+" says hello to ada" {
					t.Errorf("prompts/get %sgreet: %v %+v", tg.prefix, err, gp)
				}
				cr, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/prompt", Name: tg.prefix + "greet"},
					Argument: sdk.CompleteParamsArgument{Name: "name", Value: "al"}})
				if err != nil || !slices.Equal(cr.Completion.Values, []string{"alice", "alfred"}) {
					t.Errorf("completion/complete of a prompt argument: %v %+v", err, cr)
				}
				cr, err = cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: tg.kind + "://items/{id}"},
					Argument: sdk.CompleteParamsArgument{Name: "id", Value: "b"}})
				if err != nil || !slices.Equal(cr.Completion.Values, []string{"beta"}) {
					t.Errorf("completion/complete of a template variable: %v %+v", err, cr)
				}

				var rpcErr *jsonrpc.Error
				_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: tg.prefix + "nope", Arguments: map[string]any{}})
				if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
					t.Errorf("unknown tool: %v, want JSON-RPC -32602", err)
				}
				_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: tg.kind + "://items/missing"})
				if !errors.As(err, &rpcErr) || !strings.Contains(rpcErr.Message, "no item missing") {
					t.Errorf("resources/read of a missing item: %v, want the server's JSON-RPC error", err)
				}
				_, err = cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: tg.prefix + "greet"})
				if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
					t.Errorf("prompts/get greet without its argument: %v, want the server's -32602", err)
				}
			})
		}
	}

	t.Run("restart", func(t *testing.T) {
		cs, _ := interopClient(t, ctx, gw.URL+"/mcp/mixed", interopEras[1])
		echo := func(name string) (*sdk.CallToolResult, error) {
			return cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"message": "again"}})
		}
		for _, name := range []string{"t_echo", "s_echo"} {
			if res, err := echo(name); err != nil || res.IsError {
				t.Fatalf("%s before the restart: %v %+v", name, err, res)
			}
		}
		srv.kill(t)
		for _, name := range []string{"t_echo", "s_echo"} {
			if res, err := echo(name); err != nil || !res.IsError || !strings.Contains(strings.ToLower(contentText(res)), "unavailable") {
				t.Errorf("%s while the server is down: %v %s, want an isError result naming unavailable", name, err, resultString(res))
			}
		}
		if res, err := echo("echo"); err != nil || res.IsError || contentText(res) != "again" {
			t.Errorf("the native echo while the server is down: %v %s", err, resultString(res))
		}
		srv.start(t)
		// The restarted server answers the gateway's old session 404; the
		// gateway re-initializes and retries once.
		for name, want := range map[string]string{"t_echo": "stateful:again", "s_echo": "stateless:again"} {
			if res, err := echo(name); err != nil || res.IsError || contentText(res) != want {
				t.Errorf("first %s after the restart: %v %s", name, err, resultString(res))
			}
		}
	})
}

// bridgeDir holds the package-lock.json pinning supergateway (a
// stdio-to-streamable-HTTP bridge) and @modelcontextprotocol/server-memory
// (a stdio server).
var bridgeDir = filepath.Join("interop", "bridge")

// TestInteropStdioBridge puts the reference stdio server
// @modelcontextprotocol/server-memory behind supergateway's stateful
// stdio-to-streamable-HTTP bridge, both unmodified, on a route of its own
// and with prefix m_ beside a native Tool Service. The go-sdk client in
// both eras checks discovery, tools/list, a call of every tool, the
// knowledge graph resource, error mapping, and a restart of the bridge.
// The server has no prompts, completions or progress (docs/interop.md).
func TestInteropStdioBridge(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	node := npmInstalled(t, bridgeDir, "supergateway")
	memory, err := filepath.Abs(filepath.Join(bridgeDir, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	br := startNodeServer(t, node, bridgeDir, []string{"MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl")},
		filepath.Join("node_modules", "supergateway", "dist", "index.js"),
		"--stdio", node+" "+memory, "--outputTransport", "streamableHttp", "--stateful", "--port", "{PORT}", "--logLevel", "info")
	native := newToolService(t, "native", standardTools(""))
	url := "http://" + br.addr + "/mcp"
	cluster := map[string]any{"requestTimeout": "20s", "connectTimeout": "1s", "maxRetries": 0}
	portal := writeListing(t, map[string]any{"routes": []any{
		map[string]any{"key": "memory", "toolServices": []any{
			map[string]any{"name": "memory", "protocol": "mcp", "url": url, "cluster": cluster}}},
		map[string]any{"key": "mixed", "toolServices": []any{
			map[string]any{"name": "native", "url": native.srv.URL},
			map[string]any{"name": "memory-m", "protocol": "mcp", "url": url, "toolPrefix": "m_", "cluster": cluster}}},
	}})
	// supergateway's stateful mode starts a node process per session, which
	// can take longer than the default 4 s session set-up on a loaded
	// machine; and supergateway 3.4.3 exits when a client gives up on an
	// initialize before its child answered ("No connection established for
	// request ID"). A longer messageTimeout raises the gateway's set-up bound
	// with it (internal/app upstreamCallTimeout).
	gw := startGateway(t, portal, "--message-timeout", "30s")

	t.Run("discovery", func(t *testing.T) {
		server := healthLine{server: "memory-server 0.6.3", tools: 9}
		checkInteropHealth(t, gw, map[string]healthLine{"memory": server, "memory-m": server})
	})

	for _, era := range interopEras {
		for _, rt := range []struct{ key, prefix string }{{"memory", ""}, {"mixed", "m_"}} {
			t.Run(era.name+"/"+rt.key, func(t *testing.T) {
				cs, _ := interopClient(t, ctx, gw.URL+"/mcp/"+rt.key, era)
				names := toolNames(t, ctx, cs)
				// Each subtest has its own entities: the graph is shared.
				a, b := era.name+"-"+rt.key+"-a", era.name+"-"+rt.key+"-b"
				for _, step := range []struct {
					tool string
					args map[string]any
					want string
				}{
					{"create_entities", map[string]any{"entities": []any{
						map[string]any{"name": a, "entityType": "gateway", "observations": []any{"routes MCP"}},
						map[string]any{"name": b, "entityType": "server", "observations": []any{"speaks stdio"}}}}, a},
					{"create_relations", map[string]any{"relations": []any{map[string]any{"from": a, "to": b, "relationType": "federates"}}}, "federates"},
					{"add_observations", map[string]any{"observations": []any{map[string]any{"entityName": b, "contents": []any{"behind a bridge"}}}}, "behind a bridge"},
					{"search_nodes", map[string]any{"query": "behind a bridge"}, b},
					{"open_nodes", map[string]any{"names": []any{a}}, "routes MCP"},
					{"read_graph", map[string]any{}, "federates"},
					{"delete_observations", map[string]any{"deletions": []any{map[string]any{"entityName": b, "observations": []any{"behind a bridge"}}}}, "deleted"},
					{"delete_relations", map[string]any{"relations": []any{map[string]any{"from": a, "to": b, "relationType": "federates"}}}, "deleted"},
					{"delete_entities", map[string]any{"entityNames": []any{a, b}}, "deleted"},
				} {
					if !slices.Contains(names, rt.prefix+step.tool) {
						t.Errorf("tools/list %v lacks %s", names, rt.prefix+step.tool)
						continue
					}
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: rt.prefix + step.tool, Arguments: step.args})
					if err != nil || res.IsError || !strings.Contains(strings.ToLower(contentText(res)), strings.ToLower(step.want)) {
						t.Errorf("tools/call %s: %v %s, want it to hold %q", rt.prefix+step.tool, err, resultString(res), step.want)
					}
				}
				if rt.key == "mixed" && !slices.Contains(names, "echo") {
					t.Errorf("tools/list %v lacks the native echo", names)
				}

				rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "memory://knowledge-graph"})
				if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "entities") {
					t.Errorf("resources/read memory://knowledge-graph: %v %+v", err, rr)
				}

				// Errors: the gateway's -32602 for a tool the route lacks; the
				// server's isError result for an entity it does not know.
				var rpcErr *jsonrpc.Error
				_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: rt.prefix + "nope", Arguments: map[string]any{}})
				if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
					t.Errorf("unknown tool: %v, want JSON-RPC -32602", err)
				}
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: rt.prefix + "add_observations", Arguments: map[string]any{
					"observations": []any{map[string]any{"entityName": "nobody", "contents": []any{"x"}}}}})
				if err != nil || !res.IsError || !strings.Contains(contentText(res), "Entity with name nobody not found") {
					t.Errorf("add_observations to an unknown entity: %v %s, want the server's isError result", err, resultString(res))
				}
			})
		}
	}

	t.Run("restart", func(t *testing.T) {
		cs, _ := interopClient(t, ctx, gw.URL+"/mcp/memory", interopEras[1])
		read := func() (*sdk.CallToolResult, error) {
			return cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_graph", Arguments: map[string]any{}})
		}
		if res, err := read(); err != nil || res.IsError {
			t.Fatalf("read_graph before the restart: %v %s", err, resultString(res))
		}
		br.kill(t)
		if res, err := read(); err != nil || !res.IsError || !strings.Contains(strings.ToLower(contentText(res)), "unavailable") {
			t.Errorf("read_graph while the bridge is down: %v %s, want an isError result naming unavailable", err, resultString(res))
		}
		br.start(t)
		if res, err := read(); err != nil || res.IsError || !strings.Contains(contentText(res), "entities") {
			t.Errorf("first read_graph after the restart: %v %s", err, resultString(res))
		}
	})
}
