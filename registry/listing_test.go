package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/config"
)

func validListing() *Listing {
	return &Listing{Routes: []Route{
		{Key: "core", ToolServices: []ToolService{
			{Name: "weather", URL: "http://weather:8080"},
			{Name: "calc", URL: "https://calc/api"},
		}},
		{Key: "ops", PublicPath: "/tools/ops", ToolServices: []ToolService{
			{Name: "calc", URL: "https://calc/api"},
		}},
	}}
}

func TestListingValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(l *Listing)
		want   []string // substrings of the error; none means valid
	}{
		{name: "valid", mutate: func(l *Listing) {}},
		{name: "shared service nil cluster equals explicit defaults", mutate: func(l *Listing) {
			d := ClusterSettings{}.WithDefaults()
			l.Routes[1].ToolServices[0].Cluster = &d
		}},
		{name: "shared service trailing slash and default manifest path", mutate: func(l *Listing) {
			l.Routes[1].ToolServices[0].URL = "https://calc/api/"
			l.Routes[1].ToolServices[0].ManifestPath = "/manifest"
		}},
		{name: "ipv6 url", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://[::1]:9000" }},
		{name: "key empty", mutate: func(l *Listing) { l.Routes[0].Key = "" },
			want: []string{"routes[0]: key: must match", "routes[0]: publicPath: required"}},
		{name: "key upper case", mutate: func(l *Listing) { l.Routes[0].Key = "Core" },
			want: []string{`route "Core": key: must match ^[a-z0-9][a-z0-9-]{0,62}$`}},
		{name: "key leading dash", mutate: func(l *Listing) { l.Routes[0].Key = "-core" },
			want: []string{`route "-core": key: must match`}},
		{name: "key too long", mutate: func(l *Listing) { l.Routes[0].Key = strings.Repeat("a", 64) },
			want: []string{"key: must match"}},
		{name: "key duplicate", mutate: func(l *Listing) { l.Routes[1].Key = "core"; l.Routes[1].PublicPath = "" },
			want: []string{`route "core": key: duplicate route key`, `route "core": publicPath: "/mcp/core" is already used by route "core"`}},
		{name: "publicPath relative", mutate: func(l *Listing) { l.Routes[0].PublicPath = "mcp/core" },
			want: []string{`route "core": publicPath: "mcp/core" must start with /`}},
		{name: "publicPath duplicate", mutate: func(l *Listing) { l.Routes[1].PublicPath = "/mcp/core" },
			want: []string{`route "ops": publicPath: "/mcp/core" is already used by route "core"`}},
		{name: "publicPath dot dot", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp/../admin" },
			want: []string{`route "core": publicPath: "/mcp/../admin" must not contain ".."`}},
		{name: "publicPath encoded slash lower", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp%2fcore" },
			want: []string{`route "core": publicPath: must not contain an encoded slash`}},
		{name: "publicPath encoded slash upper", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp%2Fcore" },
			want: []string{"encoded slash"}},
		{name: "publicPath query", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp/core?x=1" },
			want: []string{`route "core": publicPath: "/mcp/core?x=1" must not contain a query`}},
		{name: "publicPath fragment", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp/core#x" },
			want: []string{"must not contain a fragment"}},
		{name: "publicPath trailing slash", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp/core/" },
			want: []string{"must not end with /"}},
		{name: "publicPath empty segment", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp//core" },
			want: []string{"empty segment"}},
		{name: "publicPath blank", mutate: func(l *Listing) { l.Routes[0].PublicPath = "/mcp/co re" },
			want: []string{"blanks or control characters"}},
		{name: "no tool services", mutate: func(l *Listing) { l.Routes[0].ToolServices = nil },
			want: []string{`route "core": toolServices: at least one is required`}},
		{name: "service name empty", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].Name = "" },
			want: []string{`route "core": toolServices[0]: name: must match`}},
		{name: "service name bad", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].Name = "Weather_1" },
			want: []string{`route "core": tool service "Weather_1": name: must match ^[a-z0-9][a-z0-9-]{0,62}$`}},
		{name: "service twice in route", mutate: func(l *Listing) { l.Routes[0].ToolServices[1] = l.Routes[0].ToolServices[0] },
			want: []string{`route "core": tool service "weather": name: listed twice in the route`}},
		{name: "url empty", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "" },
			want: []string{`route "core": tool service "weather": url: required`}},
		{name: "url scheme", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "ftp://weather" },
			want: []string{`tool service "weather": url: "ftp://weather": scheme must be http or https`}},
		{name: "url no scheme", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "weather:8080" },
			want: []string{`tool service "weather": url:`}},
		{name: "url no host", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http:///x" },
			want: []string{"host is required"}},
		{name: "url bad port", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://weather:99999" },
			want: []string{`invalid port "99999"`}},
		{name: "url port zero", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://weather:0" },
			want: []string{`invalid port "0"`}},
		{name: "url empty port", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://weather:" },
			want: []string{"empty port"}},
		{name: "url user info", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://u:p@weather" },
			want: []string{"user info is not allowed"}},
		{name: "url query", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://weather/?a=1" },
			want: []string{"query and fragment are not allowed"}},
		{name: "url path dot dot", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].URL = "http://weather/a/../b" },
			want: []string{`url: path: "/a/../b" must not contain ".."`}},
		{name: "manifestPath relative", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].ManifestPath = "manifest" },
			want: []string{`route "core": tool service "weather": manifestPath: "manifest" must start with /`}},
		{name: "lbPolicy", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].Cluster = &ClusterSettings{LBPolicy: "round_robin"} },
			want: []string{`route "core": tool service "weather": cluster.lbPolicy: "round_robin" is not one of`}},
		{name: "maxEjectionPercent", mutate: func(l *Listing) {
			l.Routes[0].ToolServices[0].Cluster = &ClusterSettings{OutlierDetection: &OutlierDetection{MaxEjectionPercent: 101}}
		}, want: []string{"cluster.outlierDetection.maxEjectionPercent: 101 is over 100"}},
		{name: "healthCheck path", mutate: func(l *Listing) {
			l.Routes[0].ToolServices[0].Cluster = &ClusterSettings{HealthCheck: &HealthCheck{Path: "healthz"}}
		}, want: []string{`cluster.healthCheck.path: "healthz" must start with /`}},
		{name: "catalog mode", mutate: func(l *Listing) { l.Routes[0].Catalog = &Catalog{Mode: "fuzzy"} },
			want: []string{`route "core": catalog.mode: "fuzzy"`}},
		{name: "catalog negative", mutate: func(l *Listing) { l.Routes[0].Catalog = &Catalog{PageSize: -1, Shortlist: -2} },
			want: []string{`route "core": catalog.pageSize: -1 is not in 0..10000`, `route "core": catalog.shortlist: -2 is not in 0..50`}},
		{name: "catalog too large", mutate: func(l *Listing) { l.Routes[0].Catalog = &Catalog{PageSize: 10001, Shortlist: 51} },
			want: []string{`route "core": catalog.pageSize: 10001 is not in 0..10000`, `route "core": catalog.shortlist: 51 is not in 0..50`}},
		{name: "catalog synonyms", mutate: func(l *Listing) {
			l.Routes[0].Catalog = &Catalog{Mode: "search", Synonyms: []string{"case ticket", "lonely", "e-mail mail"}}
		},
			want: []string{`route "core": catalog.synonyms[1]: 1 words, want 2..32`, `route "core": catalog.synonyms[2]: "e-mail" is not one word of letters and digits`}},
		{name: "catalog embedding name", mutate: func(l *Listing) {
			l.Routes[0].Catalog = &Catalog{Mode: "search", Embedding: "http://tei:8080/v1/embeddings"}
		},
			want: []string{`route "core": catalog.embedding: "http://tei:8080/v1/embeddings" must be "none" or match`}},
		{name: "catalog embedding none", mutate: func(l *Listing) { l.Routes[0].Catalog = &Catalog{Mode: "search", Embedding: "none"} }},
		{name: "catalog at the limits", mutate: func(l *Listing) { l.Routes[0].Catalog = &Catalog{Mode: "full", PageSize: 10000, Shortlist: 50} }},
		{name: "shared service different url", mutate: func(l *Listing) { l.Routes[1].ToolServices[0].URL = "https://calc2/api" },
			want: []string{`route "ops": tool service "calc": url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match its definition in route "core"`}},
		{name: "shared service different manifestPath", mutate: func(l *Listing) { l.Routes[1].ToolServices[0].ManifestPath = "/m" },
			want: []string{`route "ops": tool service "calc": url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match`}},
		{name: "shared service different cluster", mutate: func(l *Listing) {
			l.Routes[1].ToolServices[0].Cluster = &ClusterSettings{MaxRetries: 5}
		}, want: []string{`route "ops": tool service "calc": url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match`}},
		{name: "every error reported", mutate: func(l *Listing) {
			l.Routes[0].Key = "BAD"
			l.Routes[0].ToolServices[0].URL = "ftp://x"
			l.Routes[1].ToolServices[0].Name = "Calc"
		}, want: []string{`route "BAD": key`, `route "BAD": tool service "weather": url`, `route "ops": tool service "Calc": name`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := validListing()
			tc.mutate(l)
			err := l.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestListingDefaults(t *testing.T) {
	l := validListing()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := l.Routes[0].PublicPath; got != "/mcp/core" {
		t.Errorf("default publicPath = %q, want /mcp/core", got)
	}
	if got := l.Routes[1].PublicPath; got != "/tools/ops" {
		t.Errorf("explicit publicPath = %q, want /tools/ops", got)
	}
	if got := l.Routes[0].ToolServices[0].ManifestPath; got != DefaultManifestPath {
		t.Errorf("default manifestPath = %q", got)
	}
	before, _ := json.Marshal(l)
	if err := l.Validate(); err != nil {
		t.Fatalf("second Validate() = %v", err)
	}
	if after, _ := json.Marshal(l); string(after) != string(before) {
		t.Errorf("Validate is not idempotent:\n%s\n%s", before, after)
	}
	if got := (Route{Key: "x"}).Path(); got != "/mcp/x" {
		t.Errorf("Route.Path() = %q", got)
	}
}

// TestValidateAgainWritesNothing: a Source may return the same Listing on
// every refresh while the routes of the last one are read (refresher's
// servicesOf), so a second Validate must not write, not even the values
// already there. Under -race (make test) a write here is reported.
func TestValidateAgainWritesNothing(t *testing.T) {
	l := validListing()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() {
		var seen strings.Builder
		for _, r := range l.Routes {
			seen.WriteString(r.PublicPath)
			for _, s := range r.ToolServices {
				seen.WriteString(s.ManifestPath)
			}
		}
		done <- seen.String()
	}()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if <-done == "" {
		t.Fatal("the reader saw no paths")
	}
}

func TestDecodeListingFixtures(t *testing.T) {
	var decoded []*Listing
	for _, name := range []string{"listing.json", "listing.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "registry", name))
		if err != nil {
			t.Fatal(err)
		}
		l, err := DecodeListing(data)
		if err != nil {
			t.Fatalf("DecodeListing(%s) = %v", name, err)
		}
		decoded = append(decoded, l)
	}
	if !reflect.DeepEqual(decoded[0], decoded[1]) {
		t.Fatalf("JSON and YAML fixtures decode differently:\n%+v\n%+v", decoded[0], decoded[1])
	}
	l := decoded[0]
	if len(l.Routes) != 2 || l.Routes[1].PublicPath != "/mcp/ops" || l.Routes[1].Catalog.Mode != "search" {
		t.Fatalf("unexpected listing %+v", l)
	}
	c := l.Routes[0].ToolServices[0].Cluster
	if c.ConnectTimeout.D() != time.Second || c.OutlierDetection.BaseEjectionTime.D() != 30*time.Second || c.LBPolicy != "LEAST_REQUEST" {
		t.Errorf("cluster settings not decoded: %+v", c)
	}
}

func TestDecodeListingErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
		strict          bool
	}{
		{"empty", "  \n", "empty document", false},
		{"json unknown field", `{"routes":[{"key":"a","toolServices":[{"name":"a","url":"http://a","urll":"x"}]}]}`, `unknown field "urll"`, true},
		{"json unknown top field", `{"routes":[],"extra":1}`, `unknown field "extra"`, true},
		{"json trailing data", `{"routes":[]} {}`, "trailing data", false},
		{"json missing routes", `{}`, `missing "routes"`, false},
		{"json null routes", `{"routes":null}`, `missing "routes"`, false},
		{"json numeric duration", `{"routes":[{"key":"a","toolServices":[{"name":"a","url":"http://a","cluster":{"connectTimeout":1}}]}]}`, "duration must be a string", false},
		{"json bad duration", `{"routes":[{"key":"a","toolServices":[{"name":"a","url":"http://a","cluster":{"connectTimeout":"1 sec"}}]}]}`, "invalid duration", false},
		{"json negative duration", `{"routes":[{"key":"a","toolServices":[{"name":"a","url":"http://a","cluster":{"requestTimeout":"-1s"}}]}]}`, "negative", false},
		{"json invalid listing", `{"routes":[{"key":"A","toolServices":[{"name":"a","url":"http://a"}]}]}`, `route "A": key`, false},
		{"yaml unknown field", "routes:\n- key: a\n  toolServices:\n  - name: a\n    url: http://a\n    colour: red\n", `unknown field "colour"`, true},
		{"yaml duplicate key", "routes: []\nroutes: []\n", "set twice", false},
		{"yaml missing routes", "other: 1\n", `missing "routes"`, false},
		{"yaml missing routes strict", "other: 1\n", `unknown field "other"`, true},
		{"yaml scalar", "just text", "want an object", false},
		{"yaml invalid listing", "routes:\n- key: a\n  toolServices: []\n", "at least one is required", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ListingDecoder{Strict: tc.strict}.Decode([]byte(tc.doc))
			if err == nil {
				t.Fatalf("DecodeListing() = %+v, want error containing %q", l, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeListing() error %q does not contain %q", err, tc.want)
			}
		})
	}
	if l, err := DecodeListing([]byte(`{"routes":[]}`)); err != nil || l.Routes == nil || len(l.Routes) != 0 {
		t.Errorf("an explicitly empty listing must decode: %+v, %v", l, err)
	}
}

func TestEndpoint(t *testing.T) {
	tests := []struct {
		url, scheme, host string
		port              uint32
		base              string
	}{
		{"http://weather", "http", "weather", 80, ""},
		{"https://weather", "https", "weather", 443, ""},
		{"http://weather:8080/", "http", "weather", 8080, ""},
		{"https://calc.tools.svc/api/v1/", "https", "calc.tools.svc", 443, "/api/v1"},
		{"http://[::1]:9000/x", "http", "::1", 9000, "/x"},
		{"http://127.0.0.1:1", "http", "127.0.0.1", 1, ""},
	}
	for _, tc := range tests {
		scheme, host, port, base, err := ToolService{URL: tc.url}.Endpoint()
		if err != nil {
			t.Errorf("Endpoint(%q) = %v", tc.url, err)
			continue
		}
		if scheme != tc.scheme || host != tc.host || port != tc.port || base != tc.base {
			t.Errorf("Endpoint(%q) = %q %q %d %q, want %q %q %d %q", tc.url, scheme, host, port, base, tc.scheme, tc.host, tc.port, tc.base)
		}
	}
	if got := (ToolService{URL: "http://a/base/", ManifestPath: "/m.json"}).ManifestURL(); got != "http://a/base/m.json" {
		t.Errorf("ManifestURL() = %q", got)
	}
	if got := (ToolService{URL: "http://a"}).ManifestURL(); got != "http://a/manifest" {
		t.Errorf("default ManifestURL() = %q", got)
	}
}

func TestClusterDefaults(t *testing.T) {
	d := ClusterSettings{}.WithDefaults()
	want := ClusterSettings{
		ConnectTimeout: config.Duration(time.Second), RequestTimeout: config.Duration(15 * time.Second),
		MaxConnections: 1024, MaxPendingRequests: 1024, MaxRequests: 1024, MaxRetries: 3,
		LBPolicy: "ROUND_ROBIN",
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("ClusterSettings{}.WithDefaults() = %+v, want %+v", d, want)
	}
	in := ClusterSettings{MaxRetries: 7, HTTP2: true, OutlierDetection: &OutlierDetection{Consecutive5xx: 2}, HealthCheck: &HealthCheck{}}
	got := in.WithDefaults()
	if got.MaxRetries != 7 || !got.HTTP2 || got.RequestTimeout.D() != 15*time.Second {
		t.Errorf("WithDefaults() overrode or missed fields: %+v", got)
	}
	od := got.OutlierDetection
	if od.Consecutive5xx != 2 || od.Interval.D() != 10*time.Second || od.BaseEjectionTime.D() != 30*time.Second || od.MaxEjectionPercent != 10 {
		t.Errorf("outlier defaults: %+v", od)
	}
	hc := got.HealthCheck
	if hc.Path != "/healthz" || hc.Interval.D() != 5*time.Second || hc.Timeout.D() != time.Second || hc.HealthyThreshold != 1 || hc.UnhealthyThreshold != 3 {
		t.Errorf("health check defaults: %+v", hc)
	}
	if in.OutlierDetection.Interval != 0 || in.HealthCheck.Path != "" {
		t.Error("WithDefaults() modified its receiver's nested settings")
	}
}

func FuzzDecodeListing(f *testing.F) {
	for _, name := range []string{"listing.json", "listing.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "registry", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"routes":[]}`))
	f.Add([]byte(`{"routes":[{"key":"a","publicPath":"/x/%2f","toolServices":[{"name":"a","url":"http://a:0"}]}]}`))
	f.Add([]byte("routes:\n- key: a\n  toolServices:\n  - {name: a, url: 'https://[::1]:8443/p/'}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := DecodeListing(data)
		if err != nil {
			return
		}
		// A decoded listing is valid, stays valid, and survives a JSON round trip.
		if err := l.Validate(); err != nil {
			t.Fatalf("decoded listing fails Validate: %v", err)
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := DecodeListing(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if !reflect.DeepEqual(l, again) {
			t.Fatalf("round trip changed the listing:\n%+v\n%+v", l, again)
		}
		for _, r := range l.Routes {
			for _, s := range r.ToolServices {
				if _, _, port, _, err := s.Endpoint(); err != nil || port == 0 {
					t.Fatalf("valid service %q has no endpoint: %v", s.Name, err)
				}
			}
		}
	})
}
