package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
)

// startFixture builds this program and starts it on a free loopback port
// with args; it returns the base URL from the program's first stdout line.
func startFixture(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "conformance-toolsvc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append(args, "0")...)
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

// TestManifestThroughRegistry reads the fixture's manifest with the
// registry's own fetcher and snapshot builder, as `toolmesh run` does: every
// entry must be accepted, in both catalog sizes.
func TestManifestThroughRegistry(t *testing.T) {
	full := []string{"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
		"test_multiple_content_types", "test_error_handling", "json_schema_2020_12_tool", "test_x_mcp_header",
		"test_streaming_elicitation", "test_logging_tool", "test_tool_with_logging", "test_tool_with_progress",
		"test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"all tools", nil, full},
		{"only passable", []string{"--only-passable"}, full[:10]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := startFixture(t, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			svc := registry.ToolService{Name: "fixture", URL: base, ManifestPath: "/manifest"}
			m, err := fetch.NewHTTPFetcher(nil, 0).Fetch(ctx, svc)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Invalid) > 0 {
				t.Fatalf("undecodable entries: %+v", m.Invalid)
			}
			snap, err := registry.BuildSnapshot(registry.Route{Key: "conf", ToolServices: []registry.ToolService{svc}},
				map[string]*registry.Manifest{"fixture": m}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Rejected) > 0 || len(snap.Ambiguous) > 0 {
				t.Fatalf("rejected %+v, ambiguous %v", snap.Rejected, snap.Ambiguous)
			}
			var got []string
			for _, tool := range snap.Tools {
				got = append(got, tool.Name)
			}
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("snapshot tools\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestInvoke calls tools as the gateway does (POST {url}/tools/{name} with
// the arguments object) and checks the replies the conformance scenarios
// depend on.
func TestInvoke(t *testing.T) {
	base := startFixture(t)
	for _, tc := range []struct {
		tool, body string
		status     int
		check      func(t *testing.T, reply map[string]any)
	}{
		{"test_simple_text", "{}", 200, func(t *testing.T, r map[string]any) {
			if got := firstItem(t, r)["text"]; got != "This is a simple text response for testing." {
				t.Errorf("text = %v", got)
			}
		}},
		{"test_simple_text", "", 200, nil}, // no body: no arguments
		{"test_audio_content", "{}", 200, func(t *testing.T, r map[string]any) {
			if item := firstItem(t, r); item["type"] != "audio" || item["mimeType"] != "audio/wav" || item["data"] == "" {
				t.Errorf("audio item = %v", item)
			}
		}},
		{"test_error_handling", "{}", 200, func(t *testing.T, r map[string]any) {
			if r["isError"] != true {
				t.Errorf("isError = %v, want true", r["isError"])
			}
		}},
		{"json_schema_2020_12_tool", `{"name":"Ada","email":"a@example.com"}`, 200, func(t *testing.T, r map[string]any) {
			if got := firstItem(t, r)["text"].(string); !strings.Contains(got, `"name":"Ada"`) {
				t.Errorf("text %q does not echo the arguments", got)
			}
		}},
		{"test_x_mcp_header", `{"region":"eu-west"}`, 200, func(t *testing.T, r map[string]any) {
			if got := firstItem(t, r)["text"]; got != `region="eu-west"` {
				t.Errorf("text = %v", got)
			}
		}},
		{"no_such_tool", "{}", 404, nil},
		{"test_simple_text", "[1,2]", 400, nil},
		{"test_simple_text", "{not json", 400, nil},
	} {
		t.Run(tc.tool+"/"+tc.body, func(t *testing.T) {
			resp, err := http.Post(base+"/tools/"+tc.tool, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var reply map[string]any
			if err := json.Unmarshal(body, &reply); err != nil {
				t.Fatalf("reply is not a JSON object: %v: %s", err, body)
			}
			if tc.check != nil {
				tc.check(t, reply)
			}
		})
	}
}

func firstItem(t *testing.T, reply map[string]any) map[string]any {
	t.Helper()
	content, _ := reply["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("reply has no content: %v", reply)
	}
	item, _ := content[0].(map[string]any)
	return item
}
