package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/demo"
)

// TestInvalidPortalFileAtStartup runs the real commands with a Portal file
// that is invalid at start-up: each must exit 1 before it listens, with a
// message naming the file, the line and column, and the route, service and
// field.
func TestInvalidPortalFileAtStartup(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	strict := write("strict.yaml", "portalStrict: true\n")
	tests := []struct {
		name, file, body string
		extra            []string
		want             string // in stderr, after the file's path
	}{
		{name: "bad yaml", file: "p.yaml", body: "routes:\n  - key: a\n    toolServices: [\n",
			want: ":3: decode listing yaml: did not find expected node content"},
		{name: "bad json", file: "p.json", body: "{\"routes\": [\n  {\"key\": \"a\",}\n]}",
			want: `:2:15: decode listing json: invalid character '}'`},
		{name: "bad url", file: "p.yaml", body: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: gopher://s\n",
			want: `:5:5: route "a": tool service "s": url: "gopher://s": scheme must be http or https`},
		{name: "typo of a required field", file: "p.yaml", body: "routes:\n- key: a\n  toolServices:\n  - name: s\n    urll: http://s\n",
			want: `:4:5: route "a": tool service "s": url: required`},
		{name: "typo under portalStrict", file: "p.yaml", body: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://s\n    manifestPth: /m\n",
			extra: []string{"--config", strict},
			want:  `:6:5: routes[0].toolServices[0].manifestPth: unknown field "manifestPth"`},
		{name: "wrong kind", file: "p.yaml", body: "routes:\n- key: a\n  toolServices: {name: s}\n",
			want: `:3:17: routes[0].toolServices: want a list, got an object`},
		{name: "empty route list", file: "p.yaml", body: "routes: []\n",
			want: " (portal) lists no routes; add one, or set allowEmptyListing"},
		{name: "missing routes", file: "p.yaml", body: "route: []\n",
			want: `:1:1: decode listing: missing "routes"`},
	}
	for _, tt := range tests {
		for _, mode := range []string{"run", "extproc", "xds"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				portal := write(tt.file, tt.body)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				listened := false
				h := hooks{listening: func(string, string) { listened = true; cancel() }}
				args := append([]string{mode, "--portal", portal, "--admin-listen", "127.0.0.1:0"}, tt.extra...)
				switch mode {
				case "run":
					args = append(args, "--listen", "127.0.0.1:0", "--extproc-listen", "127.0.0.1:0", "--xds-listen", "127.0.0.1:0")
				case "extproc":
					args = append(args, "--extproc-listen", "127.0.0.1:0")
				case "xds":
					args = append(args, "--xds-listen", "127.0.0.1:0")
				}
				var stderr lockedBuffer
				code := execute(ctx, args, &stderr, &stderr, h)
				if listened {
					t.Errorf("toolmesh bound a listener with an invalid Portal file")
				}
				if code != exitError {
					t.Errorf("exit code %d, want %d", code, exitError)
				}
				if want := portal + tt.want; !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
				if strings.Contains(stderr.String(), "keeping the previous routes") {
					t.Errorf("stderr claims routes were kept:\n%s", stderr.String())
				}
			})
		}
	}
}

// TestPortalFileUnknownFieldStarts: without portalStrict a field toolmesh
// does not know is warned about once, with its position, counted, and the
// gateway starts and serves; an empty listing starts when allowed.
func TestPortalFileUnknownFieldStarts(t *testing.T) {
	svcs, err := demo.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svcs.Close() })
	doc := strings.Replace(string(demo.Portal(svcs)), "routes:", "portalVersion: 2\nroutes:", 1)
	if doc == string(demo.Portal(svcs)) {
		t.Fatalf("the demo Portal has no \"routes:\" line:\n%s", demo.Portal(svcs))
	}
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.yaml")
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--portal", portal)
	logs := p.logs.String()
	if strings.Count(logs, "field=portalVersion") != 1 || !strings.Contains(logs, "does not know") {
		t.Errorf("want one warning about portalVersion:\n%s", logs)
	}
	if _, body := httpGet(t, "http://"+p.addrs["admin"]+"/metrics"); !strings.Contains(body, `toolmesh_portal_unknown_fields_total{field="portalVersion"}`) {
		t.Errorf("/metrics lacks the unknown field counter")
	}

	empty := filepath.Join(dir, "empty.yaml")
	allow := filepath.Join(dir, "allow.yaml")
	if err := os.WriteFile(empty, []byte("routes: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(allow, []byte("allowEmptyListing: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	launch(t, hooks{}, "run", "--portal", empty, "--config", allow) // stops with 0 at cleanup
}
