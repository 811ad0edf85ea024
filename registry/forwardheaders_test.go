package registry

import (
	"strings"
	"testing"
)

// TestForwardHeadersValidate: forwardHeaders accepts lower-case header
// names of a client and refuses the client's token, the connection's own
// headers, toolmesh's and Envoy's prefixes, repeats, a name the Portal's
// headers set, and a routes' disagreement about a shared service.
func TestForwardHeadersValidate(t *testing.T) {
	gh := func(l *Listing) *ToolService { return &l.Routes[0].ToolServices[1] }
	weather := func(l *Listing) *ToolService { return &l.Routes[0].ToolServices[0] }
	tests := []struct {
		name   string
		mutate func(l *Listing)
		want   string // a substring of the error; "" means valid
	}{
		{name: "native", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"x-tenant", "cookie"} }},
		{name: "federated, on every route", mutate: func(l *Listing) {
			gh(l).ForwardHeaders = []string{"x-tenant"}
			l.Routes[1].ToolServices[0].ForwardHeaders = []string{"x-tenant"}
		}},
		{name: "a default header", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"traceparent"} }},
		{name: "not a header name", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"x tenant"} },
			want: `tool service "weather": forwardHeaders[0]: "x tenant" is not a valid HTTP header name`},
		{name: "upper case", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"X-Tenant"} },
			want: `forwardHeaders[0]: "X-Tenant" must be lower case`},
		{name: "authorization to a Tool Service", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"authorization"} },
			want: `forwardHeaders[0]: the client's authorization is never a Tool Service's`},
		{name: "authorization to an MCP server", mutate: func(l *Listing) {
			gh(l).ForwardHeaders = []string{"authorization"}
			l.Routes[1].ToolServices[0].ForwardHeaders = []string{"authorization"}
		}, want: `forwardHeaders[0]: authorization is forwarded by forwardAuthorization only`},
		{name: "connection header", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"host"} },
			want: `forwardHeaders[0]: host belongs to the connection`},
		{name: "toolmesh prefix", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"x-toolmesh-caller"} },
			want: `forwardHeaders[0]: the x-toolmesh- prefix is toolmesh's own`},
		{name: "envoy prefix", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"x-envoy-retry-on"} },
			want: `forwardHeaders[0]: x-envoy-* headers are Envoy's`},
		{name: "twice", mutate: func(l *Listing) { weather(l).ForwardHeaders = []string{"x-a", "x-a"} },
			want: `forwardHeaders[1]: "x-a" is listed twice`},
		{name: "too many", mutate: func(l *Listing) {
			for i := range MaxForwardHeaders + 1 {
				weather(l).ForwardHeaders = append(weather(l).ForwardHeaders, "x-h"+strings.Repeat("a", i))
			}
		}, want: `forwardHeaders: at most 32 names, has 33`},
		{name: "set by the Portal's headers", mutate: func(l *Listing) {
			gh(l).ForwardHeaders = []string{"x-api-key"}
			gh(l).Headers["X-Api-Key"] = HeaderValue{Credential: "k"}
		}, want: `forwardHeaders[0]: conflicts with headers.X-Api-Key`},
		{name: "routes disagree", mutate: func(l *Listing) { gh(l).ForwardHeaders = []string{"x-tenant"} },
			want: `route "ops": tool service "github": url, protocol, manifestPath, headers, toolPrefix, forwardAuthorization, trustAnnotations, forwardHeaders, listingBounds and cluster must match`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := federatedListing()
			tc.mutate(l)
			err := l.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
