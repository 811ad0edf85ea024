package fetch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/registrytest"
)

func TestHTTPSource(t *testing.T) {
	listing := `{"routes":[{"key":"core","toolServices":[{"name":"a","url":"http://a"}]}]}`
	tests := []struct {
		name, mode, body, want string
		strict                 bool
	}{
		{name: "ok", mode: registrytest.ModeOK, body: listing},
		{name: "server error", mode: registrytest.ModeFail, want: "status 500"},
		{name: "html", mode: registrytest.ModeHTML, want: "content type"},
		{name: "garbage", mode: registrytest.ModeGarbage, want: "decode listing"},
		{name: "invalid listing", mode: registrytest.ModeOK, body: `{"routes":[{"key":"Core","toolServices":[{"name":"a","url":"http://a"}]}]}`, want: `route "Core": key`},
		{name: "unknown field ignored", mode: registrytest.ModeOK, body: `{"routes":[{"key":"core","next":"x","toolServices":[{"name":"a","url":"http://a"}]}]}`},
		{name: "unknown field strict", mode: registrytest.ModeOK, body: `{"routes":[],"next":"x"}`, want: `/v1/routes:1:14: next: unknown field "next"`, strict: true},
		{name: "yaml over http", mode: registrytest.ModeOK, body: "routes: []\n", want: "body is not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := registrytest.NewFakeServer(t, "/v1/routes", listing)
			srv.Set(tc.mode, tc.body)
			src := NewHTTPSource(srv.URL+"/", srv.Client())
			src.Decoder.Strict = tc.strict
			l, err := src.List(t.Context())
			if tc.want == "" {
				if err != nil {
					t.Fatalf("List() = %v", err)
				}
				if len(l.Routes) != 1 || l.Routes[0].PublicPath != "/mcp/core" {
					t.Fatalf("List() = %+v (defaults must be filled)", l)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "list routes") {
				t.Fatalf("List() = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestFileSource(t *testing.T) {
	for _, name := range []string{"listing.json", "listing.yaml"} {
		l, err := NewFileSource(filepath.Join("..", "..", "testdata", "registry", name)).List(t.Context())
		if err != nil || len(l.Routes) != 2 {
			t.Errorf("List(%s) = %+v, %v", name, l, err)
		}
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := NewFileSource(missing).List(t.Context()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("routes:\n- key: a\n  toolServices: [{name: a, url: 'gopher://a'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFileSource(bad).List(t.Context()); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "scheme must be http or https") {
		t.Errorf("invalid file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"routes":[]}`+strings.Repeat(" ", MaxListingBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFileSource(big).List(t.Context()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
}

func TestFileSourcePositions(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "portal.yaml")
	if err := os.WriteFile(bad, []byte("routes:\n- key: a\n  toolServices:\n  - name: s\n    url: gopher://a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewFileSource(bad).List(t.Context())
	want := "list routes: " + bad + `:5:5: route "a": tool service "s": url:`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("List() = %v, want prefix %q", err, want)
	}
}
