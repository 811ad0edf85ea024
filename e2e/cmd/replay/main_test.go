package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	examplesDir   = "../../../docs/contracts/examples"
	composePortal = "../../../deploy/compose/portal.yaml"
)

// writePortal writes a Portal file and returns its path.
func writePortal(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "portal.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pingServer answers every request as a gateway answers a ping.
func pingServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRun(t *testing.T) {
	noClockTimeout := writePortal(t, `
routes:
  - key: core
    toolServices:
      - {name: clock, url: "http://tools:8081"}
`)
	noCore := writePortal(t, `
routes:
  - key: other
    toolServices:
      - {name: clock, url: "http://tools:8081"}
`)
	base := pingServer(t)
	tests := []struct {
		name string
		args []string
		// wantErr: "" for success, "usage" for a usage error, else a
		// substring of the error.
		wantErr string
		// want and notWant are substrings of the output.
		want, notWant []string
	}{
		{
			name: "dry run of the Compose selection",
			args: []string{"--dry-run"},
			want: []string{
				"SKIP legacy/06-tools-list: tools/list answers the tools of docs/contracts/examples/toolservice",
				`SKIP legacy/09-tools-call-passthrough: calls "add", a tool of docs/contracts/examples/toolservice`,
				"WOULD RUN http/03-unknown-route-404 POST /mcp/nope",
				"WOULD RUN stateless/08-method-header-mismatch",
				"examples selected",
			},
			notWant: []string{"PASS", "FAIL"},
		},
		{
			name:    "dry run, contract Tool Services served: nothing skipped",
			args:    []string{"--dry-run", "--contract-tools"},
			want:    []string{"WOULD RUN legacy/06-tools-list", " 0 skipped"},
			notWant: []string{"SKIP"},
		},
		{
			name:    "dry run of the probes",
			args:    []string{"--dry-run", "--probe", "ping,timeout,large-body,unreachable"},
			want:    []string{"WOULD PROBE ping POST /mcp/core", "WOULD PROBE timeout", "WOULD PROBE large-body", "WOULD PROBE unreachable"},
			notWant: []string{"PASS", "FAIL"},
		},
		{
			name:    "timeout probe against a Portal whose clock keeps the 15s default",
			args:    []string{"--dry-run", "--probe", "timeout", "--portal", noClockTimeout},
			wantErr: "requestTimeout 15s is not shorter",
		},
		{
			name:    "probes against a Portal without route core",
			args:    []string{"--dry-run", "--probe", "ping", "--portal", noCore},
			wantErr: "no route core",
		},
		{
			name:    "examples against a Portal without route core",
			args:    []string{"--dry-run", "--portal", noCore},
			want:    []string{`SKIP http/05-content-type-charset: expects 200 from route "core", which the target does not serve`},
			wantErr: "",
		},
		{
			name: "ping probe against a gateway that answers it",
			args: []string{"--probe", "ping", "--base", base},
			want: []string{"PASS probe ping"},
		},
		{
			name:    "examples against a server that answers every request with a ping result",
			args:    []string{"--base", base},
			wantErr: "examples broke the contract",
			want:    []string{"PASS legacy/05-ping", "FAIL http/01-get-405", "status 200, want 405"},
		},
		{
			name:    "large-body probe against a server that takes it",
			args:    []string{"--probe", "large-body", "--base", base},
			wantErr: "1 of 1 probes failed",
			want:    []string{"FAIL probe large-body", "status 200, want 413"},
		},
		{name: "unknown probe", args: []string{"--probe", "nope"}, wantErr: "usage"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "usage"},
		{name: "examples missing", args: []string{"--dry-run", "--examples", t.TempDir()}, wantErr: "no contract examples found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--examples", examplesDir, "--portal", composePortal}, tc.args...)
			var out strings.Builder
			err := run(args, &out)
			var usage usageError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("run: %v\n%s", err, out.String())
			case tc.wantErr == "usage" && !errors.As(err, &usage):
				t.Fatalf("run: %v, want a usage error", err)
			case tc.wantErr != "" && tc.wantErr != "usage" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("run: %v, want an error containing %q\n%s", err, tc.wantErr, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}
