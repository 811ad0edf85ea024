package mcp

import (
	"encoding/json"
	"testing"
)

// TestStringValue: a raw JSON string decodes as encoding/json decodes it,
// and the values every request carries cost no allocation.
func TestStringValue(t *testing.T) {
	for _, raw := range []string{`"2.0"`, `"tools/call"`, `"2026-07-28"`, `"echo"`, `""`, `"a\"b"`, `"tools\/call"`, `"\u00e9"`} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := stringValue([]byte(raw)); !ok || got != want {
			t.Errorf("stringValue(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, bad := range []string{``, `2`, `"`, `{}`} {
		if _, ok := stringValue([]byte(bad)); ok {
			t.Errorf("stringValue(%s) accepted", bad)
		}
	}
	common := []string{"2.0", "initialize", "notifications/initialized", "ping", "tools/list", "tools/call",
		"server/discover", "subscriptions/listen"}
	for _, v := range append(common, supportedVersions...) {
		b := []byte(`"` + v + `"`)
		if got, _ := stringValue(b); got != v {
			t.Errorf("stringValue(%s) = %q", b, got)
		}
		if n := testing.AllocsPerRun(20, func() { _, _ = stringValue(b) }); n != 0 {
			t.Errorf("stringValue(%s): %v allocations, want 0", b, n)
		}
	}
}
