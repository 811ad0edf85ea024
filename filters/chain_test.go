package filters

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fake is a scripted filter that records the order it ran in.
type fake struct {
	name  string
	req   func(*Request) (Decision, error)
	res   func(*Result) (Decision, error)
	trace *[]string
}

func (f *fake) Name() string { return f.name }

func (f *fake) OnRequest(_ context.Context, r *Request) (Decision, error) {
	*f.trace = append(*f.trace, f.name+":"+string(r.Arguments))
	if f.req == nil {
		return Decision{}, nil
	}
	return f.req(r)
}

func (f *fake) OnResult(_ context.Context, r *Result) (Decision, error) {
	*f.trace = append(*f.trace, f.name+":"+string(r.Body))
	if f.res == nil {
		return Decision{}, nil
	}
	return f.res(r)
}

type step struct {
	name     string
	failOpen bool
	req      func(*Request) (Decision, error)
	res      func(*Result) (Decision, error)
}

// newTestChain builds a chain from steps directly, the way Set does.
func newTestChain(t *testing.T, trace *[]string, steps ...step) *Chain {
	t.Helper()
	m, err := newChainMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Chain{route: "core"}
	for _, s := range steps {
		c.entries = append(c.entries, &entry{
			f: &fake{name: s.name, req: s.req, res: s.res, trace: trace}, name: s.name, failOpen: s.failOpen,
			request: true, result: true, log: slog.New(slog.DiscardHandler),
			mReq: m.forFilter(s.name, StageRequest), mRes: m.forFilter(s.name, StageResult),
		})
	}
	return c
}

func rewriteArgs(args string, headers map[string]string) func(*Request) (Decision, error) {
	return func(*Request) (Decision, error) {
		return Decision{Action: ActionRewrite, Arguments: json.RawMessage(args), AddHeaders: headers}, nil
	}
}

func fails(*Request) (Decision, error) { return Decision{}, errors.New("boom") }

func TestRunRequest(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		wantTrace []string
		want      Outcome
		wantArgs  string
		wantErr   string
	}{
		{
			name:      "empty chain passes",
			wantTrace: nil,
			want:      Outcome{Action: ActionPass},
			wantArgs:  `{"a":1}`,
		},
		{
			name:      "all pass, in order",
			steps:     []step{{name: "a"}, {name: "b"}, {name: "c"}},
			wantTrace: []string{`a:{"a":1}`, `b:{"a":1}`, `c:{"a":1}`},
			want:      Outcome{Action: ActionPass},
			wantArgs:  `{"a":1}`,
		},
		{
			name: "a rewrite feeds the next filter",
			steps: []step{
				{name: "a", req: rewriteArgs(`{"a":2}`, map[string]string{"x-a": "1", "x-b": "a"})},
				{name: "b", req: rewriteArgs(`{"a":3}`, map[string]string{"x-b": "b"})},
				{name: "c"},
			},
			wantTrace: []string{`a:{"a":1}`, `b:{"a":2}`, `c:{"a":3}`},
			want: Outcome{Action: ActionRewrite, Arguments: json.RawMessage(`{"a":3}`),
				AddHeaders: map[string]string{"x-a": "1", "x-b": "b"}},
			wantArgs: `{"a":3}`,
		},
		{
			name: "a deny stops the chain",
			steps: []step{
				{name: "a", req: rewriteArgs(`{"a":2}`, nil)},
				{name: "b", req: func(*Request) (Decision, error) { return Deny("no"), nil }},
				{name: "c"},
			},
			wantTrace: []string{`a:{"a":1}`, `b:{"a":2}`},
			want:      Outcome{Action: ActionDeny, Filter: "b", Reason: "no", DenyAs: ToolError},
			wantArgs:  `{"a":2}`,
		},
		{
			name:      "an RPC deny gets the default code",
			steps:     []step{{name: "a", req: func(*Request) (Decision, error) { return DenyRPC(0, "hidden"), nil }}},
			wantTrace: []string{`a:{"a":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: "hidden", DenyAs: RPCError, Code: CodeInvalidParams},
			wantArgs:  `{"a":1}`,
		},
		{
			name:      "a deny without reason gets one",
			steps:     []step{{name: "a", req: func(*Request) (Decision, error) { return DenyRPC(-32001, ""), nil }}},
			wantTrace: []string{`a:{"a":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: `denied by filter "a"`, DenyAs: RPCError, Code: -32001},
			wantArgs:  `{"a":1}`,
		},
		{
			name:      "an error fails closed",
			steps:     []step{{name: "a", req: fails}, {name: "b"}},
			wantTrace: []string{`a:{"a":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: `the call was blocked because filter "a" failed`, DenyAs: ToolError},
			wantArgs:  `{"a":1}`,
			wantErr:   "filter/a: boom",
		},
		{
			name:      "an error fails open when configured",
			steps:     []step{{name: "a", req: fails, failOpen: true}, {name: "b"}},
			wantTrace: []string{`a:{"a":1}`, `b:{"a":1}`},
			want:      Outcome{Action: ActionPass},
			wantArgs:  `{"a":1}`,
			wantErr:   "filter/a: boom",
		},
		{
			name:      "a reserved header fails the filter",
			steps:     []step{{name: "a", req: rewriteArgs(`{"a":1}`, map[string]string{"x-toolmesh-cluster": "evil"})}},
			wantTrace: []string{`a:{"a":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: `the call was blocked because filter "a" failed`},
			wantArgs:  `{"a":1}`,
			wantErr:   "reserved for the gateway",
		},
		{
			name:      "arguments that are not an object fail the filter",
			steps:     []step{{name: "a", failOpen: true, req: rewriteArgs(`[1]`, nil)}},
			wantTrace: []string{`a:{"a":1}`},
			want:      Outcome{Action: ActionPass},
			wantArgs:  `{"a":1}`,
			wantErr:   "not a JSON object",
		},
		{
			name: "a result rewrite at the request stage fails the filter",
			steps: []step{{name: "a", req: func(*Request) (Decision, error) {
				return Decision{Action: ActionRewrite, Result: json.RawMessage(`{}`)}, nil
			}}},
			wantTrace: []string{`a:{"a":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: `the call was blocked because filter "a" failed`},
			wantArgs:  `{"a":1}`,
			wantErr:   "cannot rewrite the result",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trace []string
			c := newTestChain(t, &trace, tt.steps...)
			r := &Request{Route: "core", Tool: "t", Arguments: json.RawMessage(`{"a":1}`)}
			got := c.RunRequest(t.Context(), r)
			if !reflect.DeepEqual(trace, tt.wantTrace) {
				t.Errorf("ran %v, want %v", trace, tt.wantTrace)
			}
			if string(r.Arguments) != tt.wantArgs {
				t.Errorf("request arguments = %s, want %s", r.Arguments, tt.wantArgs)
			}
			if tt.wantErr == "" && got.Err != nil || tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)) {
				t.Errorf("Err = %v, want %q", got.Err, tt.wantErr)
			}
			got.Err = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("outcome = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

func TestRunResult(t *testing.T) {
	rewrite := func(body string) func(*Result) (Decision, error) {
		return func(*Result) (Decision, error) {
			return Decision{Action: ActionRewrite, Result: json.RawMessage(body)}, nil
		}
	}
	tests := []struct {
		name      string
		steps     []step
		wantTrace []string
		want      Outcome
		wantBody  string
		wantErr   string
	}{
		{
			name:      "rewrites chain",
			steps:     []step{{name: "a", res: rewrite(`{"n":2}`)}, {name: "b", res: rewrite(`{"n":3}`)}},
			wantTrace: []string{`a:{"n":1}`, `b:{"n":2}`},
			want:      Outcome{Action: ActionRewrite, Result: json.RawMessage(`{"n":3}`)},
			wantBody:  `{"n":3}`,
		},
		{
			name:      "deny stops",
			steps:     []step{{name: "a", res: func(*Result) (Decision, error) { return Deny("leak"), nil }}, {name: "b"}},
			wantTrace: []string{`a:{"n":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: "leak"},
			wantBody:  `{"n":1}`,
		},
		{
			name: "headers at the result stage fail the filter",
			steps: []step{{name: "a", failOpen: true, res: func(*Result) (Decision, error) {
				return Decision{Action: ActionRewrite, AddHeaders: map[string]string{"x": "y"}}, nil
			}}},
			wantTrace: []string{`a:{"n":1}`},
			want:      Outcome{Action: ActionPass},
			wantBody:  `{"n":1}`,
			wantErr:   "can only rewrite the result",
		},
		{
			name:      "error fails closed",
			steps:     []step{{name: "a", res: func(*Result) (Decision, error) { return Decision{}, errors.New("x") }}},
			wantTrace: []string{`a:{"n":1}`},
			want:      Outcome{Action: ActionDeny, Filter: "a", Reason: `the call was blocked because filter "a" failed`},
			wantBody:  `{"n":1}`,
			wantErr:   "filter/a: x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trace []string
			c := newTestChain(t, &trace, tt.steps...)
			r := &Result{Route: "core", Tool: "t", Body: json.RawMessage(`{"n":1}`)}
			got := c.RunResult(t.Context(), r)
			if !reflect.DeepEqual(trace, tt.wantTrace) {
				t.Errorf("ran %v, want %v", trace, tt.wantTrace)
			}
			if string(r.Body) != tt.wantBody {
				t.Errorf("body = %s, want %s", r.Body, tt.wantBody)
			}
			if tt.wantErr == "" && got.Err != nil || tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)) {
				t.Errorf("Err = %v, want %q", got.Err, tt.wantErr)
			}
			got.Err = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("outcome = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

func TestNilChain(t *testing.T) {
	var c *Chain
	if out := c.RunRequest(t.Context(), &Request{}); out.Action != ActionPass {
		t.Fatalf("nil chain request = %+v", out)
	}
	if out := c.RunResult(t.Context(), &Result{}); out.Action != ActionPass {
		t.Fatalf("nil chain result = %+v", out)
	}
	if !c.ToolAllowed("x") || c.Len() != 0 || c.Names() != nil || c.Route() != "" {
		t.Fatal("nil chain is not empty")
	}
}

func TestChainMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newChainMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var trace []string
	c := newTestChain(t, &trace, step{name: "a", req: rewriteArgs(`{}`, nil)}, step{name: "b", req: fails})
	for _, e := range c.entries {
		e.mReq, e.mRes = m.forFilter(e.name, StageRequest), m.forFilter(e.name, StageResult)
	}
	for range 3 {
		c.RunRequest(t.Context(), &Request{Arguments: json.RawMessage(`{}`)})
	}
	want := map[string]float64{
		`toolmesh_filter_calls_total{filter="a",stage="request"}`:    3,
		`toolmesh_filter_rewrites_total{filter="a",stage="request"}`: 3,
		`toolmesh_filter_calls_total{filter="b",stage="request"}`:    3,
		`toolmesh_filter_errors_total{filter="b",stage="request"}`:   3,
	}
	got := gather(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if got[`toolmesh_filter_duration_seconds_count{filter="b",stage="request"}`] != 3 {
		t.Errorf("latency not observed: %v", got)
	}
	// A second set of metrics on the same registry reuses the collectors.
	if _, err := newChainMetrics(reg); err != nil {
		t.Fatalf("re-register: %v", err)
	}
}

func TestCheckUpstreamHeader(t *testing.T) {
	tests := []struct {
		name, value string
		ok          bool
	}{
		{"x-tenant", "acme", true},
		{"x-b3-traceid", "", true},
		{"X-Tenant", "a", false},
		{"", "a", false},
		{"x tenant", "a", false},
		{":path", "/", false},
		{"host", "h", false},
		{"content-length", "1", false},
		{"x-toolmesh-cluster", "c", false},
		{"x-envoy-original-path", "p", false},
		{"x-a", "line\r\nInjected: 1", false},
		{"x-a", "nul\x00", false},
	}
	for _, tt := range tests {
		if err := checkUpstreamHeader(tt.name, tt.value); (err == nil) != tt.ok {
			t.Errorf("checkUpstreamHeader(%q, %q) = %v, want ok=%v", tt.name, tt.value, err, tt.ok)
		}
	}
}

// TestPerCallerFilter: a filter sees the call's caller, so a per-caller
// rule is a filter: here only alice may call.
func TestPerCallerFilter(t *testing.T) {
	var trace []string
	onlyAlice := func(r *Request) (Decision, error) {
		if r.Caller == nil || r.Caller.Issuer != "https://idp.example.com" || r.Caller.Subject != "alice" {
			return Decision{Action: ActionDeny, Reason: "not alice"}, nil
		}
		return Decision{}, nil
	}
	c := newTestChain(t, &trace, step{name: "only-alice", req: onlyAlice})
	for _, tc := range []struct {
		caller *Caller
		denied bool
	}{
		{caller: nil, denied: true},
		{caller: &Caller{Issuer: "https://idp.example.com", Subject: "bob"}, denied: true},
		{caller: &Caller{Issuer: "https://idp.example.com", Subject: "alice"}, denied: false},
	} {
		out := c.RunRequest(t.Context(), &Request{Route: "core", Tool: "t", Arguments: []byte(`{}`), Caller: tc.caller})
		if out.Denied() != tc.denied {
			t.Errorf("caller %+v: denied %v, want %v", tc.caller, out.Denied(), tc.denied)
		}
	}
}
