package xds_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// FuzzTranslate checks the translator's contract with the registry: every
// Portal listing the registry accepts translates (but for URL hosts that
// are no DNS name, which only the translator rejects), and every resource it
// produces passes Envoy's validation rules (ValidateDeep), marshals, and
// forms a consistent snapshot with a stable version.
func FuzzTranslate(f *testing.F) {
	ins, _ := filepath.Glob(filepath.Join(goldenDir, "*", "in.yaml"))
	for _, in := range ins {
		raw, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		var doc struct {
			Routes any `json:"routes"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			f.Fatal(err)
		}
		seed, err := yaml.Marshal(map[string]any{"routes": doc.Routes})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Add([]byte(`{"routes":[{"key":"a","toolServices":[{"name":"s","url":"https://[::1]:1/x%41"}]}]}`))
	f.Add([]byte(`{"routes":[{"key":"a","publicPath":"/a/ü","toolServices":[{"name":"s","url":"http://h","cluster":{"connectTimeout":"87600h","healthCheck":{"path":"/h?x=1"}}}]}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := registry.DecodeListing(data)
		if err != nil {
			return // not a Portal listing the registry would hand over
		}
		res, err := xds.Translate(l.Routes, xds.Options{})
		if err != nil {
			// The one rule stricter than the registry's: the registry passes
			// percent-encoded URL hosts through, which no resolver accepts.
			if strings.Contains(err.Error(), "is neither an IP address nor a DNS name") {
				return
			}
			t.Fatalf("Translate rejected a valid listing: %v\n%s", err, data)
		}
		for _, r := range slices.Concat(res.Listeners, res.Routes, res.Clusters, res.Endpoints) {
			if err := xds.ValidateDeep(r); err != nil {
				t.Fatalf("invalid %s: %v\n%s", cachev3.GetResourceName(r), err, data)
			}
			if _, err := proto.Marshal(r); err != nil {
				t.Fatalf("marshal %s: %v", cachev3.GetResourceName(r), err)
			}
		}
		snap, err := cachev3.NewSnapshot(res.Version(), res.ByType())
		if err != nil {
			t.Fatal(err)
		}
		if err := snap.Consistent(); err != nil {
			t.Fatalf("inconsistent snapshot: %v\n%s", err, data)
		}
		again, err := xds.Translate(l.Routes, xds.Options{})
		if err != nil || again.Version() != res.Version() {
			t.Fatalf("second translation differs: %v", err)
		}
	})
}
