package authz

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

// BenchmarkDecide is one call's decision under a typical policy set: the
// admins-only-destructive deny and a scope allow, for a developer calling a
// destructive tool (the deny matches, both policies run) with prepared
// caller and tool values. It reports the median (p50-ns) besides the mean,
// and the cost of preparing the caller, done once per request.
func BenchmarkDecide(b *testing.B) {
	set, err := Compile(&Config{Routes: map[string][]Policy{"core": {
		{Name: "scoped", Effect: "allow", When: `"mcp:tools" in caller.scopes`},
		{Name: "admins-only-destructive", Effect: "deny", When: `tool.annotations.destructiveHint && !("admin" in caller.claims.roles)`},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	r := set.Route("core")
	id := &identity.Caller{Authenticated: true, Issuer: "https://idp.example", Subject: "dave", Scopes: []string{"openid", "mcp:tools"},
		Claims: map[string]any{"roles": []any{"dev", "ops"}, "email": "dave@example.com", "groups": []any{"a", "b", "c"}}}
	tool := NewTool("delete_user", "users", "Delete a user", json.RawMessage(`{"destructiveHint":true,"idempotentHint":true}`))
	in := &Input{Caller: NewCaller(id), Method: "tools/call", Era: "2025-11-25", EraKind: "legacy", Tool: tool}
	if d := r.Decide(KindTool, in); d.Decision != DecisionDeny {
		b.Fatalf("decision %+v", d)
	}
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		samples := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			start := time.Now()
			r.Decide(KindTool, in)
			if len(samples) < cap(samples) {
				samples = append(samples, time.Since(start))
			}
		}
		slices.Sort(samples)
		b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	})
	b.Run("prepare-caller", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewCaller(id)
		}
	})
}
