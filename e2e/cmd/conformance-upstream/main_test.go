package main

//lint:file-ignore SA1019 roots, sampling and logging are deprecated as of protocol 2026-07-28 (SEP-2577); the conformance scenarios still call them.

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startUpstream builds this program and starts it on a free loopback port;
// it returns the base URL from the program's first stdout line.
func startUpstream(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "conformance-upstream")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen address from stdout: %v", err)
	}
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("first stdout line %q does not name the listen address", line)
	}
	return u
}

// suiteTools are the tools the conformance suites' server scenarios call by
// name.
var suiteTools = []string{
	"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
	"test_multiple_content_types", "test_error_handling", "json_schema_2020_12_tool",
	"test_tool_with_logging", "test_tool_with_progress", "test_sampling", "test_elicitation",
	"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "test_reconnection",
	"test_streaming_elicitation", "test_logging_tool", "test_missing_capability",
	"test_trigger_tool_change", "test_trigger_prompt_change",
	"test_input_required_result_elicitation", "test_input_required_result_sampling",
	"test_input_required_result_list_roots", "test_input_required_result_request_state",
	"test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
	"test_input_required_result_tampered_state", "test_input_required_result_capabilities",
}

func firstText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("result has no content: %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content item is %T, want text", res.Content[0])
	}
	return tc.Text
}

// TestEndpoints talks to both endpoints of the built program with the
// official Go SDK client: the legacy era (initialize, sessions,
// server-to-client elicitation) on /mcp and the 2026-07-28 era (discover,
// per-request capabilities, input-required results) on /stateless.
func TestEndpoints(t *testing.T) {
	base := startUpstream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var elicited atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "upstream-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "username": "ada", "email": "ada@example.com"}}, nil
		},
	})
	connect := func(t *testing.T, path, version string) *mcp.ClientSession {
		t.Helper()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + path}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect %s: %v", path, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if got := cs.InitializeResult().ProtocolVersion; got != version {
			t.Fatalf("%s negotiated protocol %q, want %q", path, got, version)
		}
		return cs
	}

	for _, ep := range []struct{ path, version string }{{"/mcp", "2025-11-25"}, {"/stateless", "2026-07-28"}} {
		t.Run("tools/list "+ep.path, func(t *testing.T) {
			cs := connect(t, ep.path, ep.version)
			caps := cs.InitializeResult().Capabilities
			if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil || caps.Logging == nil {
				t.Errorf("capabilities %+v: want tools, resources, prompts, completions and logging", caps)
			}
			listed := map[string]bool{}
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				listed[tool.Name] = true
			}
			for _, name := range suiteTools {
				if !listed[name] {
					t.Errorf("tools/list lacks %s", name)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
			if err != nil {
				t.Fatal(err)
			}
			if got := firstText(t, res); got != "This is a simple text response for testing." {
				t.Errorf("test_simple_text: %q", got)
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/123/data"})
			if err != nil {
				t.Fatal(err)
			}
			if got := rr.Contents[0].Text; got != `{"id":"123","templateTest":true,"data":"Data for ID: 123"}` {
				t.Errorf("template read: %s", got)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nonexistent"}); err == nil {
				t.Error("reading an unknown resource succeeded")
			}
		})
	}

	t.Run("elicitation on /mcp", func(t *testing.T) {
		cs := connect(t, "/mcp", "2025-11-25")
		before := elicited.Load()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "who?"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := firstText(t, res); !strings.HasPrefix(got, "User response: action=accept") {
			t.Errorf("test_elicitation: %q", got)
		}
		if elicited.Load() == before {
			t.Error("the server did not send elicitation/create")
		}
	})

	t.Run("input-required on /stateless", func(t *testing.T) {
		cs := connect(t, "/stateless", "2026-07-28")
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})
		if err != nil {
			t.Fatal(err)
		}
		if got := firstText(t, res); got != "Hello, Ada!" {
			t.Errorf("after the input round: %q", got)
		}
		// The client declares elicitation but not sampling.
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_missing_capability"})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != mcp.CodeMissingRequiredClientCapabilities {
			t.Errorf("test_missing_capability without sampling: err = %v, want code %d", err, mcp.CodeMissingRequiredClientCapabilities)
		}
	})

	t.Run("GET /stateless is not a stream", func(t *testing.T) {
		resp, err := http.Get(base + "/stateless")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("status %d, want 405 from the stateless transport", resp.StatusCode)
		}
	})
}

// TestRequestState checks the signed requestState the input-required tools
// hand out: only an unchanged state for the same tool opens.
func TestRequestState(t *testing.T) {
	key := newStateKey()
	sealed := sealState(key, roundState{Tool: "a", Round: 2, Values: map[string]any{"name": "Ada"}})
	payload, sig, _ := strings.Cut(sealed, ".")
	flip := func(s string) string { // change one character, keeping the alphabet
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, tool, state string
		ok                bool
	}{
		{"as issued", "a", sealed, true},
		{"other tool", "b", sealed, false},
		{"payload changed", "a", flip(payload) + "." + sig, false},
		{"signature changed", "a", payload + "." + flip(sig), false},
		{"other key", "a", sealState(newStateKey(), roundState{Tool: "a", Round: 2}), false},
		{"no signature", "a", payload, false},
		{"empty", "a", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := openState(key, tc.tool, tc.state)
			if tc.ok {
				if err != nil || st.Round != 2 || st.Values["name"] != "Ada" {
					t.Fatalf("openState = %+v, %v", st, err)
				}
				return
			}
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("openState err = %v, want an invalid-params error", err)
			}
		})
	}
}
