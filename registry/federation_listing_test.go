package registry

import (
	"strings"
	"testing"
)

func federatedListing() *Listing {
	return &Listing{Routes: []Route{
		{Key: "core", ToolServices: []ToolService{
			{Name: "weather", URL: "http://weather:8080"},
			{Name: "github", URL: "https://api.example.com/mcp/", Protocol: ProtocolMCP, ToolPrefix: "gh_",
				Headers: map[string]HeaderValue{"Authorization": {Credential: "github-token", Prefix: "Bearer "}}},
		}},
		{Key: "ops", ToolServices: []ToolService{
			{Name: "github", URL: "https://api.example.com/mcp", Protocol: ProtocolMCP, ToolPrefix: "gh_",
				Headers: map[string]HeaderValue{"Authorization": {Credential: "github-token", Prefix: "Bearer "}}},
		}},
	}}
}

func TestListingValidateFederated(t *testing.T) {
	gh := func(l *Listing) *ToolService { return &l.Routes[0].ToolServices[1] }
	tests := []struct {
		name   string
		mutate func(l *Listing)
		want   []string // substrings of the error; none means valid
	}{
		{name: "valid", mutate: func(l *Listing) {}},
		{name: "no headers no prefix", mutate: func(l *Listing) {
			l.Routes = l.Routes[:1]
			gh(l).Headers, gh(l).ToolPrefix = nil, ""
		}},
		{name: "unknown protocol", mutate: func(l *Listing) { gh(l).Protocol = "grpc" },
			want: []string{`route "core": tool service "github": protocol: "grpc" is not "mcp"`}},
		{name: "default protocol spelled out", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].Protocol = "toolservice" },
			want: []string{`route "core": tool service "weather": protocol: "toolservice" is the default`}},
		{name: "manifestPath with mcp", mutate: func(l *Listing) { gh(l).ManifestPath = "/manifest" },
			want: []string{`route "core": tool service "github": manifestPath: not allowed with protocol mcp`}},
		{name: "headers on a native service", mutate: func(l *Listing) {
			l.Routes[0].ToolServices[0].Headers = map[string]HeaderValue{"X-Key": {Credential: "k"}}
		}, want: []string{`route "core": tool service "weather": headers: only allowed with protocol mcp`}},
		{name: "toolPrefix on a native service", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].ToolPrefix = "w_" },
			want: []string{`route "core": tool service "weather": toolPrefix: only allowed with protocol mcp`}},
		{name: "bad toolPrefix", mutate: func(l *Listing) { gh(l).ToolPrefix = "gh/" },
			want: []string{`tool service "github": toolPrefix: "gh/" must be`}},
		{name: "long toolPrefix", mutate: func(l *Listing) { gh(l).ToolPrefix = strings.Repeat("p", 33) },
			want: []string{`tool service "github": toolPrefix:`}},
		{name: "bad header name", mutate: func(l *Listing) { gh(l).Headers["X Key"] = HeaderValue{Credential: "k"} },
			want: []string{`tool service "github": headers: "X Key" is not a valid HTTP header name`}},
		{name: "reserved header", mutate: func(l *Listing) { gh(l).Headers["Mcp-Session-Id"] = HeaderValue{Credential: "k"} },
			want: []string{`tool service "github": headers.Mcp-Session-Id: set by toolmesh itself`}},
		{name: "toolmesh header", mutate: func(l *Listing) { gh(l).Headers["X-Toolmesh-Route"] = HeaderValue{Credential: "k"} },
			want: []string{`tool service "github": headers.X-Toolmesh-Route: the x-toolmesh- prefix`}},
		{name: "inline secret instead of a credential name", mutate: func(l *Listing) {
			gh(l).Headers["Authorization"] = HeaderValue{Credential: "Bearer ghp_abc123"}
		}, want: []string{`tool service "github": headers.Authorization.credential: "Bearer ghp_abc123" must match`}},
		{name: "missing credential", mutate: func(l *Listing) { gh(l).Headers["X-Api-Key"] = HeaderValue{} },
			want: []string{`tool service "github": headers.X-Api-Key.credential: "" must match`}},
		{name: "control character in prefix", mutate: func(l *Listing) {
			gh(l).Headers["Authorization"] = HeaderValue{Credential: "github-token", Prefix: "Bearer\r\n"}
		}, want: []string{`tool service "github": headers.Authorization.prefix: must not contain control characters`}},
		{name: "one header twice", mutate: func(l *Listing) { gh(l).Headers["authorization"] = HeaderValue{Credential: "other"} },
			want: []string{`tool service "github": headers: "Authorization" and "authorization" name the same header`}},
		{name: "shared service different prefix", mutate: func(l *Listing) { l.Routes[1].ToolServices[0].ToolPrefix = "git_" },
			want: []string{`route "ops": tool service "github": url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match`}},
		{name: "listingBounds in range", mutate: func(l *Listing) {
			l.Routes = l.Routes[:1]
			gh(l).ListingBounds = &ListingBounds{Tools: ptr(int64(1)), Bytes: ptr(int64(MaxListingBytes))}
		}},
		{name: "listingBounds on a native service", mutate: func(l *Listing) {
			l.Routes[0].ToolServices[0].ListingBounds = &ListingBounds{Tools: ptr(int64(5))}
		}, want: []string{`route "core": tool service "weather": listingBounds: only allowed with protocol mcp`}},
		{name: "listingBounds out of range", mutate: func(l *Listing) {
			l.Routes = l.Routes[:1]
			gh(l).ListingBounds = &ListingBounds{Tools: ptr(int64(0)), Prompts: ptr(int64(-1)), Resources: ptr(int64(MaxListingItems + 1)),
				ResourceTemplates: ptr(int64(MaxListingItems)), Bytes: ptr(int64(MaxListingBytes + 1))}
		}, want: []string{
			`route "core": tool service "github": listingBounds.tools: 0 is not between 1 and 100000`,
			`route "core": tool service "github": listingBounds.resources: 100001 is not between 1 and 100000`,
			`route "core": tool service "github": listingBounds.prompts: -1 is not between 1 and 100000`,
			`route "core": tool service "github": listingBounds.bytes: 268435457 is not between 1 and 268435456`,
		}},
		{name: "shared service different listingBounds", mutate: func(l *Listing) {
			l.Routes[1].ToolServices[0].ListingBounds = &ListingBounds{Bytes: ptr(int64(1 << 20))}
		}, want: []string{`route "ops": tool service "github": url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match`}},
		{name: "trustAnnotations on a native service", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].TrustAnnotations = true },
			want: []string{`route "core": tool service "weather": trustAnnotations: only allowed with protocol mcp`}},
		{name: "forwardAuthorization on a native service", mutate: func(l *Listing) { l.Routes[0].ToolServices[0].ForwardAuthorization = true },
			want: []string{`route "core": tool service "weather": forwardAuthorization: only allowed with protocol mcp`}},
		{name: "forwardAuthorization with an Authorization header", mutate: func(l *Listing) { gh(l).ForwardAuthorization = true },
			want: []string{`tool service "github": forwardAuthorization: conflicts with headers.Authorization`}},
		{name: "forwardAuthorization without headers", mutate: func(l *Listing) {
			l.Routes = l.Routes[:1]
			gh(l).Headers, gh(l).ForwardAuthorization = nil, true
		}},
		{name: "shared service different forwardAuthorization", mutate: func(l *Listing) {
			gh(l).Headers, gh(l).ForwardAuthorization = nil, true
			l.Routes[1].ToolServices[0].Headers = nil
		}, want: []string{`route "ops": tool service "github": url, protocol`}},
		{name: "shared service different headers", mutate: func(l *Listing) { l.Routes[1].ToolServices[0].Headers = nil },
			want: []string{`route "ops": tool service "github": url, protocol`}},
		{name: "shared service different protocol", mutate: func(l *Listing) {
			s := &l.Routes[1].ToolServices[0]
			s.Protocol, s.Headers, s.ToolPrefix = "", nil, ""
		}, want: []string{`route "ops": tool service "github": url, protocol`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := federatedListing()
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

// TestListingFederatedDefaults: an MCP service gets no manifestPath, and a
// YAML Portal document with the new fields decodes.
func TestListingFederatedDefaults(t *testing.T) {
	l, err := DecodeListing([]byte(`
routes:
- key: core
  toolServices:
  - name: github
    protocol: mcp
    url: https://api.example.com/mcp
    toolPrefix: gh_
    headers:
      Authorization: {credential: github-token, prefix: "Bearer "}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := l.Routes[0].ToolServices[0]
	if s.ManifestPath != "" || !s.IsMCP() || s.Headers["Authorization"].Credential != "github-token" {
		t.Errorf("decoded %+v", s)
	}
	// Refused whether or not unknown fields are ignored, and never echoed.
	inline := []byte(`{"routes":[{"key":"core","toolServices":[{"name":"g","protocol":"mcp","url":"http://g/mcp","headers":{"A":{"credential":"c","value":"s3cret-inline"}}}]}]}`)
	for _, d := range []ListingDecoder{{}, {Strict: true}} {
		l, err := d.Decode(inline)
		if err == nil {
			err = l.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "headers.A.value: inline header values are not accepted") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("strict=%v: an inline header value must be refused without echoing it: %v", d.Strict, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
