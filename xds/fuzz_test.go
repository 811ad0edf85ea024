package xds_test

import (
	"encoding/json"
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

// FuzzParseOverrides checks the override file parser: what it accepts is
// valid, has a version that survives a JSON round trip, and tunes a Portal
// into resources that pass Envoy's validation rules, or fails only on the
// one rule that needs the Portal (perTryTimeout over requestTimeout).
func FuzzParseOverrides(f *testing.F) {
	ins, _ := filepath.Glob(filepath.Join(goldenDir, "*", "in.yaml"))
	for _, in := range ins {
		raw, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		var doc struct {
			Overrides any `json:"overrides"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			f.Fatal(err)
		}
		if doc.Overrides != nil {
			seed, err := yaml.Marshal(doc.Overrides)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(seed)
		}
	}
	f.Add([]byte("defaults: {healthCheck: {}, outlierDetection: {enabled: false}}\nservices:\n  maps: {sni: maps.internal, maxRequestBytes: 1}\n"))
	f.Add([]byte(`{"services":{"weather":{"retryOn":["5xx"],"perTryTimeout":"1ns","requestTimeout":"0s"}}}`))
	f.Add([]byte(""))

	portal := []registry.Route{{Key: "core", ToolServices: []registry.ToolService{
		{Name: "weather", URL: "http://10.0.0.8:9090"},
		{Name: "maps", URL: "https://maps.tools.svc:8443", Cluster: &registry.ClusterSettings{HTTP2: true}},
		{Name: "billing", URL: "https://192.0.2.10:8443"},
	}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := xds.ParseOverrides(data)
		if err != nil {
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("ParseOverrides accepted overrides Validate rejects: %v", err)
		}
		js, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		again, err := xds.ParseOverrides(js)
		if err != nil || again.Version() != o.Version() {
			t.Fatalf("round trip: %v, version %s → %s\n%s", err, o.Version(), again.Version(), js)
		}
		res, err := xds.Translate(portal, xds.Options{Overrides: o})
		if err != nil {
			if strings.Contains(err.Error(), "is longer than requestTimeout") {
				return
			}
			t.Fatalf("Translate rejected valid overrides: %v\n%s", err, data)
		}
		for _, r := range slices.Concat(res.Listeners, res.Routes, res.Clusters, res.Endpoints) {
			if err := xds.ValidateDeep(r); err != nil {
				t.Fatalf("invalid %s: %v\n%s", cachev3.GetResourceName(r), err, data)
			}
		}
		snap, err := cachev3.NewSnapshot(res.Version(), res.ByType())
		if err != nil {
			t.Fatal(err)
		}
		if err := snap.Consistent(); err != nil {
			t.Fatalf("inconsistent snapshot: %v", err)
		}
	})
}
