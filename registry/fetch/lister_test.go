package fetch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
)

func TestUpstreamHeadersCache(t *testing.T) {
	t.Setenv("TOOLMESH_TEST_CRED", "one")
	l := NewMCPLister(nil, 0, map[string]config.CredentialSource{"c": {Env: "TOOLMESH_TEST_CRED"}}).(*HTTPLister)
	svc := registry.ToolService{Name: "s", Protocol: registry.ProtocolMCP, Headers: map[string]registry.HeaderValue{"X-Key": {Credential: "c", Prefix: "K "}}}
	h, err := l.UpstreamHeaders(svc)
	if err != nil || h["X-Key"] != "K one" {
		t.Fatalf("headers %v, %v", h, err)
	}
	// Held until the next listing or a changed definition re-reads it.
	t.Setenv("TOOLMESH_TEST_CRED", "two")
	if h, _ := l.UpstreamHeaders(svc); h["X-Key"] != "K one" {
		t.Errorf("cached value %q", h["X-Key"])
	}
	svc.Headers = map[string]registry.HeaderValue{"X-Key": {Credential: "c", Prefix: "Key "}}
	if h, _ := l.UpstreamHeaders(svc); h["X-Key"] != "Key two" {
		t.Errorf("after a definition change %q", h["X-Key"])
	}
	if _, err := l.UpstreamHeaders(registry.ToolService{Name: "u", Headers: map[string]registry.HeaderValue{"X": {Credential: "missing"}}}); err == nil ||
		!strings.Contains(err.Error(), `credential "missing" is not defined`) {
		t.Errorf("undefined credential: %v", err)
	}
}

func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("ghp_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLMESH_TEST_TOKEN", "ghp_env")
	creds := map[string]config.CredentialSource{
		"from-file": {File: file},
		"from-env":  {Env: "TOOLMESH_TEST_TOKEN"},
		"unset":     {Env: "TOOLMESH_TEST_UNSET_VARIABLE"},
		"missing":   {File: filepath.Join(dir, "nope")},
	}
	svc := func(cred string) registry.ToolService {
		return registry.ToolService{Name: "g", Protocol: registry.ProtocolMCP, Headers: map[string]registry.HeaderValue{"Authorization": {Credential: cred, Prefix: "Bearer "}}}
	}
	tests := []struct {
		cred, want, err string
	}{
		{cred: "from-file", want: "Bearer ghp_file"},
		{cred: "from-env", want: "Bearer ghp_env"},
		{cred: "unset", err: `headers.Authorization: credential "unset": environment variable TOOLMESH_TEST_UNSET_VARIABLE is not set`},
		{cred: "missing", err: `headers.Authorization: credential "missing": read credential file`},
		{cred: "undefined", err: `headers.Authorization: credential "undefined" is not defined in the toolmesh config file (credentials)`},
	}
	for _, tc := range tests {
		t.Run(tc.cred, func(t *testing.T) {
			h, err := upstreamHeaders(svc(tc.cred), creds)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || h["Authorization"] != tc.want {
				t.Fatalf("headers %v, %v; want %q", h, err, tc.want)
			}
		})
	}
	if err := config.CheckCredentials(map[string]config.CredentialSource{"ok": {Env: "X"}, "both": {Env: "X", File: "f"}, "none": {}, "bad name!": {Env: "X"}}); err == nil ||
		!strings.Contains(err.Error(), "credentials.both: file and env are exclusive") ||
		!strings.Contains(err.Error(), "credentials.none: one of file and env is required") ||
		!strings.Contains(err.Error(), "credentials.bad name!: name must match") {
		t.Errorf("config.CheckCredentials: %v", err)
	}
}
