package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tsClientDir holds the TypeScript client script, its package.json and the
// package-lock.json that pins the official MCP TypeScript SDK.
const tsClientDir = "tsclient"

// tsClientNode returns the node binary, after making sure that
// tsclient/node_modules holds the SDK version package-lock.json pins.
func tsClientNode(t *testing.T) string {
	t.Helper()
	return npmInstalled(t, tsClientDir, "@modelcontextprotocol/sdk")
}

// npmInstalled returns the node binary, after making sure that
// dir/node_modules holds the version of pkg that dir/package-lock.json pins
// (running `npm ci` in dir when it does not). `make test` installs node and
// npm (scripts/test-deps.sh); the test fails, naming them, when they are
// missing.
func npmInstalled(t *testing.T, dir, pkg string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: install Node.js 18 or newer (Debian: apt-get install nodejs npm; `make test` does it through scripts/test-deps.sh): %v", err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if major < 18 {
		t.Fatalf("node %s is too old: the MCP TypeScript SDK needs Node.js 18 or newer", strings.TrimSpace(string(out)))
	}

	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatalf("%s/package-lock.json: %v", dir, err)
	}
	modPath := "node_modules/" + pkg
	want := lock.Packages[modPath].Version
	if want == "" {
		t.Fatalf("%s/package-lock.json pins no %s", dir, modPath)
	}
	var installed struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, modPath, "package.json")); err == nil {
		_ = json.Unmarshal(b, &installed)
	}
	if installed.Version == want {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not on PATH, and e2e/%s/node_modules lacks %s %s: install npm (Debian: apt-get install npm; `make test` does it through scripts/test-deps.sh): %v", dir, pkg, want, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in e2e/%s (installing %s %s): %v\n%s", dir, pkg, want, err, out)
	}
	return node
}

// tsPlan is what client.mjs does after connecting and listing tools.
type tsPlan struct {
	Calls     []tsCall   `json:"calls,omitempty"`
	Resources []string   `json:"resources,omitempty"`
	Prompts   []tsPrompt `json:"prompts,omitempty"`
	// Release is a URL the client GETs when a progress notification
	// arrives, letting the upstream tool answer.
	Release string `json:"release,omitempty"`
}

type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	Progress  bool           `json:"progress,omitempty"`
}

type tsPrompt struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments"`
}

// tsReport is client.mjs's output.
type tsReport struct {
	Error           string `json:"error"`
	ProtocolVersion string `json:"protocolVersion"`
	Server          struct {
		Name, Version string
	} `json:"server"`
	Tools []string `json:"tools"`
	Calls []struct {
		Name     string   `json:"name"`
		IsError  bool     `json:"isError"`
		Text     []string `json:"text"`
		Error    string   `json:"error"`
		Progress []struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
			Message  string  `json:"message"`
		} `json:"progress"`
	} `json:"calls"`
	Resources []struct {
		URI   string   `json:"uri"`
		Text  []string `json:"text"`
		Error string   `json:"error"`
	} `json:"resources"`
	Prompts []struct {
		Name  string   `json:"name"`
		Text  []string `json:"text"`
		Error string   `json:"error"`
	} `json:"prompts"`
}

// runTSClient runs client.mjs against endpoint, bounded to a minute, and
// decodes its report. A failure shows the script's stderr.
func runTSClient(t *testing.T, node, endpoint string, plan tsPlan) (*tsReport, string) {
	t.Helper()
	p, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", endpoint, string(p))
	cmd.Dir = tsClientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node client.mjs %s did not finish within 60 s\nstdout: %s\nstderr: %s", endpoint, stdout.Bytes(), stderr.Bytes())
	}
	var rep tsReport
	if derr := json.Unmarshal(stdout.Bytes(), &rep); derr != nil || err != nil || rep.Error != "" {
		t.Fatalf("node client.mjs %s: %v (report: %v, error %q)\nstdout: %s\nstderr: %s",
			endpoint, err, derr, rep.Error, stdout.Bytes(), stderr.Bytes())
	}
	return &rep, stderr.String()
}

// TestTypeScriptClient drives two routes with the official MCP TypeScript
// SDK client (StreamableHTTPClientTransport) under Node: a federated route
// (an mcp-go server with toolPrefix m_ beside a native Tool Service) and a
// native one. On each it connects and lists and calls tools; on the
// federated one it also sees a progress notification before the result,
// gets a prompt and reads a resource.
func TestTypeScriptClient(t *testing.T) {
	node := tsClientNode(t)
	native := newToolService(t, "native", standardTools(""))
	up := newMCPGoUpstream(t)
	portal := writeListing(t, map[string]any{"routes": []any{
		map[string]any{"key": "fed", "toolServices": []any{
			map[string]any{"name": "native", "url": native.srv.URL},
			map[string]any{"name": "mcpgo", "protocol": "mcp", "url": up.URL, "toolPrefix": "m_",
				"cluster": map[string]any{"requestTimeout": "20s", "maxRetries": 0}},
		}},
		map[string]any{"key": "native", "toolServices": []any{map[string]any{"name": "native", "url": native.srv.URL}}},
	}})
	gw := startGateway(t, portal)

	t.Run("federated route", func(t *testing.T) {
		rep, stderr := runTSClient(t, node, gw.URL+"/mcp/fed", tsPlan{
			Calls: []tsCall{
				{Name: "m_whoami", Arguments: map[string]any{"word": "ts"}},
				{Name: "echo", Arguments: map[string]any{"message": "native via fed"}},
				{Name: "m_progress", Arguments: map[string]any{}, Progress: true},
			},
			Resources: []string{"mcpgo://readme"},
			Prompts:   []tsPrompt{{Name: "m_greet", Arguments: map[string]string{"name": "ts"}}},
			Release:   up.Release,
		})
		defer func() {
			if t.Failed() {
				t.Logf("client.mjs stderr:\n%s", stderr)
			}
		}()
		t.Logf("TypeScript client negotiated %q with %+v", rep.ProtocolVersion, rep.Server)
		if rep.ProtocolVersion == "" {
			t.Error("no protocol version negotiated")
		}
		for _, want := range []string{"echo", "add", "m_whoami", "m_echo", "m_progress"} {
			if !slices.Contains(rep.Tools, want) {
				t.Errorf("tools %v lack %s", rep.Tools, want)
			}
		}
		wantCalls := []string{"mcpgo:ts", "native via fed", "mcpgo:done after progress"}
		if len(rep.Calls) != len(wantCalls) {
			t.Fatalf("calls %+v", rep.Calls)
		}
		for i, c := range rep.Calls {
			if c.Error != "" || c.IsError || strings.Join(c.Text, "\n") != wantCalls[i] {
				t.Errorf("call %s: error %q isError %v text %q, want %q", c.Name, c.Error, c.IsError, c.Text, wantCalls[i])
			}
		}
		if p := rep.Calls[2].Progress; len(p) != 1 || p[0].Message != "half way" || p[0].Progress != 1 || p[0].Total != 2 {
			t.Errorf("m_progress progress notifications %+v, want one: 1 of 2, half way", p)
		}
		if len(rep.Resources) != 1 || rep.Resources[0].Error != "" || strings.Join(rep.Resources[0].Text, "") != "mcpgo readme" {
			t.Errorf("resources/read: %+v", rep.Resources)
		}
		if len(rep.Prompts) != 1 || rep.Prompts[0].Error != "" || strings.Join(rep.Prompts[0].Text, "") != "mcpgo says hello to ts" {
			t.Errorf("prompts/get: %+v", rep.Prompts)
		}
	})

	t.Run("native route", func(t *testing.T) {
		rep, stderr := runTSClient(t, node, gw.URL+"/mcp/native", tsPlan{Calls: []tsCall{
			{Name: "echo", Arguments: map[string]any{"message": "native"}},
			{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}},
			{Name: "fail", Arguments: map[string]any{}},
		}})
		defer func() {
			if t.Failed() {
				t.Logf("client.mjs stderr:\n%s", stderr)
			}
		}()
		if slices.Contains(rep.Tools, "m_whoami") || !slices.Contains(rep.Tools, "echo") {
			t.Errorf("native route tools %v", rep.Tools)
		}
		if len(rep.Calls) != 3 {
			t.Fatalf("calls %+v", rep.Calls)
		}
		if c := rep.Calls[0]; c.Error != "" || c.IsError || strings.Join(c.Text, "") != "native" {
			t.Errorf("echo: %+v", c)
		}
		if c := rep.Calls[1]; c.Error != "" || c.IsError || !strings.Contains(strings.Join(c.Text, ""), "5") {
			t.Errorf("add: %+v", c)
		}
		// A Tool Service's HTTP 500 is a tool error, not a protocol error.
		if c := rep.Calls[2]; c.Error != "" || !c.IsError {
			t.Errorf("fail: %+v, want an isError result", c)
		}
	})
}
