package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

func TestValidateNamesEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings, every one must appear
	}{
		{"ok short entry", Config{Default: []Limit{{Name: "deletes", Tools: []string{"records_delete"}, By: []string{"caller"}, Requests: 10, Per: "minute"}}}, nil},
		{"ok concurrency", Config{Routes: map[string][]Limit{"core": {{Name: "slow", Concurrency: 2, By: []string{"caller", "tool"}}}}}, nil},
		{"ok global", Config{RLS: &RLSConfig{Address: "127.0.0.1:8081"}, Default: []Limit{{Name: "g", Global: true, By: []string{"claim:org"}}}}, nil},
		{"missing name", Config{Default: []Limit{{Requests: 1, Per: "second"}}}, []string{"rateLimits.default[0]: name: required"}},
		{"bad unit and by", Config{Routes: map[string][]Limit{"core": {{Name: "x", Requests: 1, Per: "week", By: []string{"user"}}}}},
			[]string{"rateLimits.routes.core[0] (name x): per: \"week\"", "rateLimits.routes.core[0] (name x): by: \"user\""}},
		{"repeated name", Config{Default: []Limit{{Name: "a", Concurrency: 1}, {Name: "a", Concurrency: 2}}}, []string{"rateLimits.default[1] (name a): name: repeated"}},
		{"nothing limited", Config{Default: []Limit{{Name: "a"}}}, []string{"(name a): limits nothing"}},
		{"global without rls", Config{Default: []Limit{{Name: "g", Global: true}}}, []string{"rateLimits.rls: required"}},
		{"global with a rate", Config{RLS: &RLSConfig{Address: "127.0.0.1:1"}, Default: []Limit{{Name: "g", Global: true, Requests: 1, Per: "second"}}},
			[]string{"(name g): requests: a global limit's rate"}},
		{"bad rls", Config{RLS: &RLSConfig{Address: "nope", FailureMode: "maybe", Timeout: -1}},
			[]string{"rateLimits.rls.address", "rateLimits.rls.failureMode", "rateLimits.rls.timeout"}},
		{"bad pattern", Config{Default: []Limit{{Name: "p", Tools: []string{"["}, Concurrency: 1}}}, []string{"tools: \"[\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func caller(sub string) *identity.Caller {
	return &identity.Caller{Authenticated: true, Issuer: "https://idp", Subject: sub, Claims: map[string]any{"org": "acme"}}
}

func mustNew(t testing.TB, cfg *Config, old *Limiter) *Limiter {
	t.Helper()
	l, err := New(cfg, old, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRatePerCaller(t *testing.T) {
	// 3 per day: no refill happens during the test, whatever the machine.
	l := mustNew(t, &Config{Default: []Limit{{Name: "deletes", Tools: []string{"records_delete"}, By: []string{"caller"}, Requests: 3, Per: "day"}}}, nil)
	ctx := context.Background()
	alice := &Call{Route: "core", Tool: "records_delete", Caller: caller("alice")}
	for i := range 3 {
		if d, _ := l.Check(ctx, alice); !d.Allowed {
			t.Fatalf("call %d refused: %+v", i, d)
		}
	}
	d, _ := l.Check(ctx, alice)
	if d.Allowed || d.Kind != DecisionLimited || d.Limit != "deletes" || d.Quota != 3 || d.Window != 24*time.Hour {
		t.Fatalf("4th call: %+v", d)
	}
	// One request per 8h: the wait is at most that.
	if d.RetryAfter <= 0 || d.RetryAfter > 8*time.Hour {
		t.Errorf("RetryAfter %s", d.RetryAfter)
	}
	// Another caller, another tool, another route: own buckets or none.
	for _, c := range []*Call{
		{Route: "core", Tool: "records_delete", Caller: caller("bob")},
		{Route: "core", Tool: "records_list", Caller: caller("alice")},
		{Route: "other", Tool: "records_delete", Caller: caller("alice")},
	} {
		if d, _ := l.Check(ctx, c); !d.Allowed {
			t.Errorf("%+v refused: %+v", c, d)
		}
	}
	// Anonymous callers are keyed by address.
	a1 := &Call{Route: "core", Tool: "records_delete", Address: "10.0.0.1"}
	for range 3 {
		l.Check(ctx, a1)
	}
	if d, _ := l.Check(ctx, a1); d.Allowed {
		t.Error("anonymous 10.0.0.1 not limited")
	}
	if d, _ := l.Check(ctx, &Call{Route: "core", Tool: "records_delete", Address: "10.0.0.2"}); !d.Allowed {
		t.Error("anonymous 10.0.0.2 limited with 10.0.0.1")
	}
}

func TestBurstAndAnnotations(t *testing.T) {
	l := mustNew(t, &Config{Routes: map[string][]Limit{"core": {
		{Name: "destructive", Annotations: []string{"destructiveHint"}, Requests: 1, Per: "hour", Burst: 2},
	}}}, nil)
	ctx := context.Background()
	ann := json.RawMessage(`{"destructiveHint":true,"readOnlyHint":false}`)
	c := &Call{Route: "core", Tool: "wipe", Annotations: ann}
	for i := range 2 {
		if d, _ := l.Check(ctx, c); !d.Allowed {
			t.Fatalf("burst call %d refused", i)
		}
	}
	if d, _ := l.Check(ctx, c); d.Allowed {
		t.Fatal("call past the burst allowed")
	}
	// The route key is part of the key; without By one bucket per route,
	// shared by every destructive tool.
	if d, _ := l.Check(ctx, &Call{Route: "core", Tool: "drop", Annotations: ann}); d.Allowed {
		t.Error("another destructive tool has its own bucket")
	}
	for _, c := range []*Call{
		{Route: "core", Tool: "read", Annotations: json.RawMessage(`{"destructiveHint":false}`)},
		{Route: "core", Tool: "read"},
		{Route: "other", Tool: "wipe", Annotations: ann}, // no default limits
	} {
		if d, _ := l.Check(ctx, c); !d.Allowed {
			t.Errorf("%s on %s limited", c.Tool, c.Route)
		}
	}
}

func TestConcurrency(t *testing.T) {
	l := mustNew(t, &Config{Default: []Limit{{Name: "slow", Tools: []string{"report_*"}, By: []string{"caller", "tool"}, Concurrency: 2}}}, nil)
	ctx := context.Background()
	c := &Call{Route: "core", Tool: "report_big", Caller: caller("alice")}
	_, p1 := l.Check(ctx, c)
	_, p2 := l.Check(ctx, c)
	d, p3 := l.Check(ctx, c)
	if d.Allowed || d.Kind != DecisionConcurrency || p3.count != 0 {
		t.Fatalf("third in flight: %+v", d)
	}
	if d, p := l.Check(ctx, &Call{Route: "core", Tool: "report_small", Caller: caller("alice")}); !d.Allowed {
		t.Error("another tool shares the in-flight count")
	} else {
		p.Release()
	}
	p1.Release()
	p1.Release() // a second release gives nothing back
	d, p4 := l.Check(ctx, c)
	if !d.Allowed {
		t.Fatal("refused after a release")
	}
	if d, _ := l.Check(ctx, c); d.Allowed {
		t.Fatal("double release freed two slots")
	}
	p2.Release()
	p4.Release()
}

func TestRateAndConcurrencyRefusalHoldsNothing(t *testing.T) {
	l := mustNew(t, &Config{Default: []Limit{
		{Name: "inflight", Concurrency: 1},
		{Name: "rate", Requests: 1, Per: "day"},
	}}, nil)
	ctx := context.Background()
	c := &Call{Route: "r", Tool: "t"}
	d, p := l.Check(ctx, c)
	if !d.Allowed {
		t.Fatal(d)
	}
	p.Release()
	// The rate refuses; the in-flight slot taken by the first limit is
	// returned, so once the rate allows again nothing is stuck.
	if d, _ := l.Check(ctx, c); d.Allowed || d.Limit != "rate" {
		t.Fatalf("%+v", d)
	}
	if got := l.all[0].table.keys(); got != 1 {
		t.Fatalf("keys %d", got)
	}
	l.all[0].table.with(l.hash(l.all[0], c), time.Now().UnixNano(), func(b *bucket) {
		if n := b.inflight.Load(); n != 0 {
			t.Errorf("in flight after a refusal: %d", n)
		}
	})
}

func TestKeysBoundedAndIdleEvicted(t *testing.T) {
	l := mustNew(t, &Config{MaxKeys: shardCount, Default: []Limit{{Name: "c", By: []string{"caller"}, Concurrency: 1}}}, nil)
	ctx := context.Background()
	var held []Permit
	for i := range 10 * shardCount {
		d, p := l.Check(ctx, &Call{Route: "r", Tool: "t", Caller: caller(fmt.Sprint(i))})
		if d.Allowed {
			held = append(held, p)
		}
	}
	tb := l.all[0].table
	if n := tb.keys(); n > shardCount {
		t.Fatalf("%d keys, bound %d", n, shardCount)
	}
	if tb.spilled.Load() == 0 {
		t.Fatal("no call went to the overflow bucket though every shard was full of busy keys")
	}
	for i := range held {
		held[i].Release()
	}
	// Idle now: new keys evict them (past the no-room pause, which the
	// table measures against the time passed in).
	for i := range shardCount {
		tb.with(uint64(i), time.Now().Add(2*time.Second).UnixNano(), func(*bucket) {})
	}
	if tb.evicted.Load() == 0 {
		t.Fatal("idle keys were not evicted")
	}
	if n := tb.keys(); n > shardCount {
		t.Fatalf("%d keys after eviction", n)
	}
}

func TestReloadKeepsCountersOfUnchangedLimits(t *testing.T) {
	cfg := &Config{Default: []Limit{
		{Name: "keep", Requests: 1, Per: "day"},
		{Name: "slow", Concurrency: 1},
	}}
	l1 := mustNew(t, cfg, nil)
	ctx := context.Background()
	c := &Call{Route: "r", Tool: "t"}
	d, inflight := l1.Check(ctx, c)
	if !d.Allowed {
		t.Fatal(d)
	}
	l2 := mustNew(t, &Config{Default: []Limit{
		{Name: "keep", Requests: 1, Per: "day"},
		{Name: "slow", Concurrency: 1},
	}}, l1)
	// The call in flight since before the reload still holds its slot, and
	// the spent rate stays spent.
	if d, _ := l2.Check(ctx, c); d.Allowed {
		t.Fatal("reload reset the counters")
	}
	inflight.Release()
	// A changed limit starts afresh.
	l3 := mustNew(t, &Config{Default: []Limit{{Name: "keep", Requests: 2, Per: "day"}}}, l2)
	if d, _ := l3.Check(ctx, c); !d.Allowed {
		t.Fatalf("changed limit kept the old bucket: %+v", d)
	}
}

func TestMetricsCountDecisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(&Config{Default: []Limit{{Name: "one", Requests: 1, Per: "day"}}}, nil, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Call{Route: "core", Tool: "t"}
	l.Check(context.Background(), c)
	l.Check(context.Background(), c)
	if v := counterValue(t, m.decisions.WithLabelValues("core", "", DecisionAllowed)); v != 1 {
		t.Errorf("allowed %v", v)
	}
	if v := counterValue(t, m.decisions.WithLabelValues("core", "one", DecisionLimited)); v != 1 {
		t.Errorf("limited %v", v)
	}
}

func TestReply(t *testing.T) {
	r := Reply(json.RawMessage(`"req-7"`), Decision{Kind: DecisionLimited, Limit: "deletes", RetryAfter: 1500 * time.Millisecond,
		Quota: 10, Window: time.Minute, Reset: 6 * time.Second})
	if r.Status != 429 {
		t.Fatalf("status %d", r.Status)
	}
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = x.Value
	}
	want := map[string]string{"content-type": "application/json", "retry-after": "2",
		"ratelimit-policy": `"deletes";q=10;w=60`, "ratelimit": `"deletes";r=0;t=6`}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s: %q, want %q", k, h[k], v)
		}
	}
	var body struct {
		ID    string `json:"id"`
		Error struct {
			Code int       `json:"code"`
			Data ErrorData `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err, string(r.Body))
	}
	if body.ID != "req-7" || body.Error.Code != CodeRateLimited || body.Error.Data.RetryAfterMs != 1500 ||
		body.Error.Data.Limit != "deletes" || body.Error.Data.Reason != "rate" {
		t.Errorf("body %s", r.Body)
	}
	// A concurrency refusal has no quota policy to state.
	r = Reply(json.RawMessage(`1`), Decision{Kind: DecisionConcurrency, Limit: "slow", RetryAfter: time.Second})
	for _, x := range r.Headers {
		if x.Key == "ratelimit-policy" {
			t.Error("policy header on a concurrency refusal")
		}
	}
	if r := Reply(nil, Decision{Kind: DecisionRLSDenied, RetryAfter: time.Second}); r.Status != 503 ||
		!strings.Contains(string(r.Body), `"reason":"rls_unavailable"`) {
		t.Errorf("rls denied: %d %s", r.Status, r.Body)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRoute: a route's own entry replaces the default as a whole, an empty
// entry means no limit, and every other route has the default.
func TestRoute(t *testing.T) {
	l, err := New(&Config{
		Default: []Limit{{Name: "per-caller", By: []string{"caller"}, Requests: 60, Per: "minute"}},
		Routes: map[string][]Limit{
			"core": {{Name: "reports", Tools: []string{"report_*"}, Concurrency: 2}},
			"open": {},
		},
	}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(route string) string {
		var out []string
		for _, r := range l.Route(route) {
			out = append(out, r.Scope+"/"+r.Name+"/"+r.Tools)
		}
		return strings.Join(out, " ")
	}
	for route, want := range map[string]string{"core": "core/reports/report_*", "open": "", "other": "/per-caller/*"} {
		if got := names(route); got != want {
			t.Errorf("Route(%s) = %q, want %q", route, got, want)
		}
	}
	if got := (*Limiter)(nil).Route("core"); got == nil || len(got) != 0 {
		t.Errorf("nil Limiter: %#v, want an empty list", got)
	}
}
