package xds_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/xds")

const goldenDir = "../testdata/xds"

// goldenOptions is xds.Options as written in a case's in.yaml.
type goldenOptions struct {
	ListenAddress    string             `json:"listenAddress"`
	ListenPort       uint32             `json:"listenPort"`
	MessageTimeout   config.Duration    `json:"messageTimeout"`
	MaxRequestBytes  uint64             `json:"maxRequestBytes"`
	MaxResponseBytes uint64             `json:"maxResponseBytes"`
	ServerName       string             `json:"serverName"`
	ServerVersion    string             `json:"serverVersion"`
	UpstreamCAFile   string             `json:"upstreamCAFile"`
	Nodes            []xds.NodeSelector `json:"nodes"`
	EnvoyTracing     *xds.EnvoyTracing  `json:"envoyTracing"`
	DownstreamTLS    *xds.DownstreamTLS `json:"downstreamTLS"`
	Notifications    *xds.Notifications `json:"notifications"`
	ControlTLS       *xds.ControlTLS    `json:"envoyControlTLS"`
}

// goldenCase is a case's in.yaml: options, an optional override file, the
// Envoy node whose configuration is written (default: one that gets every
// route) and a Portal listing.
type goldenCase struct {
	Options   goldenOptions  `json:"options"`
	Overrides *xds.Overrides `json:"overrides"`
	Node      struct {
		ID      string `json:"id"`
		Cluster string `json:"cluster"`
	} `json:"node"`
	Routes json.RawMessage `json:"routes"`
}

// readCase reads testdata/xds/<case>/in.yaml, the Portal listing decoded
// and validated the way the registry does it. The overrides are decoded
// without validation, so a case can show what Translate does with a bad
// one.
func readCase(t *testing.T, dir string) ([]registry.Route, xds.Options, goldenCase) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc goldenCase
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
		t.Fatalf("in.yaml: %v", err)
	}
	listing, err := registry.DecodeListing([]byte(`{"routes":` + string(doc.Routes) + `}`))
	if err != nil {
		t.Fatalf("in.yaml routes: %v", err)
	}
	o := doc.Options
	return listing.Routes, xds.Options{
		ListenAddress:    o.ListenAddress,
		ListenPort:       o.ListenPort,
		MessageTimeout:   time.Duration(o.MessageTimeout),
		MaxRequestBytes:  o.MaxRequestBytes,
		MaxResponseBytes: o.MaxResponseBytes,
		ServerName:       o.ServerName,
		ServerVersion:    o.ServerVersion,
		UpstreamCAFile:   o.UpstreamCAFile,
		Overrides:        doc.Overrides,
		Nodes:            o.Nodes,
		EnvoyTracing:     o.EnvoyTracing,
		DownstreamTLS:    o.DownstreamTLS,
		Notifications:    o.Notifications,
		ControlTLS:       o.ControlTLS,
	}, doc
}

// toYAML renders resources as a YAML list via protojson (proto field names),
// so diffs read like Envoy configuration and do not depend on protojson's
// unstable whitespace.
func toYAML(t *testing.T, rs []types.Resource) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, r := range rs {
		if i > 0 {
			buf.WriteByte(',')
		}
		j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(j)
	}
	buf.WriteByte(']')
	y, err := yaml.JSONToYAML(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// TestTranslateGolden translates every case under testdata/xds and
// compares the node's resources with out/*.yaml, or, for a case with
// out/error.txt, checks that Translate fails with exactly that error and
// produces nothing.
func TestTranslateGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(goldenDir, "*", "in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found %d golden cases, want at least 8", len(dirs))
	}
	for _, in := range dirs {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			routes, opts, doc := readCase(t, dir)
			errPath := filepath.Join(dir, "out", "error.txt")
			if want, err := os.ReadFile(errPath); err == nil {
				requireGoldenError(t, dir, routes, opts, strings.TrimSpace(string(want)))
				return
			}
			groups, err := xds.TranslateGroups(routes, opts)
			if err != nil {
				t.Fatalf("TranslateGroups: %v", err)
			}
			key := opts.GroupKey(doc.Node.ID, doc.Node.Cluster)
			var res *xds.Resources
			for _, g := range groups {
				requireValid(t, g.Resources)
				if g.Key == key {
					res = g.Resources
				}
			}
			if res == nil {
				t.Fatalf("no group %s for node %+v", key, doc.Node)
			}
			all, err := xds.Translate(routes, opts)
			if err != nil {
				t.Fatal(err)
			}
			if all.Version() != groups[0].Resources.Version() {
				t.Errorf("Translate and the all-routes group differ: %s, %s", all.Version(), groups[0].Resources.Version())
			}
			again, err := xds.TranslateGroups(routes, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range groups {
				if groups[i].Resources.Version() != again[i].Resources.Version() {
					t.Errorf("group %s: Version is not deterministic", groups[i].Key)
				}
			}

			for name, rs := range map[string][]types.Resource{
				"listeners": res.Listeners, "routes": res.Routes,
				"clusters": res.Clusters, "endpoints": res.Endpoints,
			} {
				got := toYAML(t, rs)
				path := filepath.Join(dir, "out", name+".yaml")
				if *update {
					writeGolden(t, path, got)
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./xds -run TestTranslateGolden -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s (run with -update and review the diff):\n%s", name, path, lineDiff(string(want), string(got)))
				}
			}
		})
	}
}

// requireGoldenError checks that translating the case fails with exactly
// want, that nothing is produced, and that no stale output files remain.
// With -update the error file is rewritten instead.
func requireGoldenError(t *testing.T, dir string, routes []registry.Route, opts xds.Options, want string) {
	t.Helper()
	res, err := xds.Translate(routes, opts)
	if err == nil {
		t.Fatalf("Translate succeeded, want error %q", want)
	}
	if res != nil {
		t.Errorf("Translate returned resources along with its error")
	}
	if groups, gerr := xds.TranslateGroups(routes, opts); gerr == nil || groups != nil || gerr.Error() != err.Error() {
		t.Errorf("TranslateGroups = %d groups, %v; want no groups and the same error", len(groups), gerr)
	}
	if *update {
		writeGolden(t, filepath.Join(dir, "out", "error.txt"), []byte(err.Error()+"\n"))
	} else if err.Error() != want {
		t.Errorf("Translate error:\n got: %s\nwant: %s", err, want)
	}
	if stale, _ := filepath.Glob(filepath.Join(dir, "out", "*.yaml")); len(stale) > 0 {
		t.Errorf("an error case must produce nothing, but %v exist", stale)
	}
}

func writeGolden(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// requireValid checks what Envoy would check before accepting a snapshot:
// every resource passes ValidateDeep and sets no deprecated field, the snapshot is consistent, resources
// are sorted by name, and every route points at a cluster of the snapshot.
func requireValid(t *testing.T, res *xds.Resources) {
	t.Helper()
	for _, group := range [][]types.Resource{res.Listeners, res.Routes, res.Clusters, res.Endpoints} {
		for i, r := range group {
			if err := xds.ValidateDeep(r); err != nil {
				t.Errorf("ValidateDeep(%s): %v", cachev3.GetResourceName(r), err)
			}
			d := xds.DeprecatedFields(r)
			if c, ok := r.(*clusterv3.Cluster); ok {
				d = append(d, xds.LegacyDNS(c)...)
			}
			if len(d) > 0 {
				t.Errorf("%s sets deprecated fields: %v", cachev3.GetResourceName(r), d)
			}
			if i > 0 && cachev3.GetResourceName(group[i-1]) >= cachev3.GetResourceName(r) {
				t.Errorf("resources not sorted by name: %q before %q", cachev3.GetResourceName(group[i-1]), cachev3.GetResourceName(r))
			}
		}
	}
	snap, err := cachev3.NewSnapshot(res.Version(), res.ByType())
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		t.Errorf("snapshot not consistent: %v", err)
	}
	clusters := map[string]bool{}
	for _, c := range res.Clusters {
		clusters[cachev3.GetResourceName(c)] = true
	}
	for _, rc := range res.Routes {
		for _, ref := range clusterRefs(rc) {
			if !clusters[ref] {
				t.Errorf("route configuration %s points at unknown cluster %q", cachev3.GetResourceName(rc), ref)
			}
		}
	}
}

// lineDiff is a small line-oriented diff: the first differing lines with
// some context, enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  - " + wl + "\n  + " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
