package rules

import (
	"regexp"
	"testing"
)

func TestMutationChecker(t *testing.T) {
	def := &MutationChecker{}
	strict := &MutationChecker{DisallowIsError: true}
	tests := []struct {
		name  string
		c     *MutationChecker
		op    CheckOp
		key   string
		value string
		want  CheckResult
	}{
		{"regular header", def, OpSet, "x-mcp-cluster", "a", CheckOK},
		{":path may be set", def, OpSet, ":path", "/tools/x", CheckOK},
		{":status may be set", def, OpSet, ":status", "200", CheckOK},
		{":status must parse", def, OpSet, ":status", "abc", CheckIgnore},
		{":status below 200", def, OpSet, ":status", "199", CheckIgnore},
		{":authority is a routing header", def, OpSet, ":authority", "evil", CheckIgnore},
		{"host is a routing header", def, OpSet, "host", "evil", CheckIgnore},
		{":scheme is a routing header", def, OpSet, ":scheme", "https", CheckIgnore},
		{":method is a routing header", def, OpSet, ":method", "GET", CheckIgnore},
		{"x-envoy headers are internal", def, OpSet, "x-envoy-retry-on", "5xx", CheckIgnore},
		{"x-envoy prefix without dash", def, OpSet, "x-envoyfoo", "1", CheckIgnore},
		{"append to a pseudo header", def, OpAppend, ":path", "/x", CheckIgnore},
		{"remove a pseudo header", def, OpRemove, ":path", "", CheckIgnore},
		{"remove host", def, OpRemove, "host", "", CheckIgnore},
		{"remove a regular header", def, OpRemove, "content-length", "", CheckOK},
		{"invalid value", def, OpSet, "x-a", "a\nb", CheckIgnore},
		{"disallow_is_error fails", strict, OpSet, ":authority", "evil", CheckFail},
		{"allow_all_routing", &MutationChecker{AllowAllRouting: true}, OpSet, ":authority", "ok.example", CheckOK},
		{"allow_envoy", &MutationChecker{AllowEnvoy: true}, OpSet, "x-envoy-x", "1", CheckOK},
		{"disallow_system", &MutationChecker{DisallowSystem: true}, OpSet, ":path", "/", CheckIgnore},
		{"disallow_all", &MutationChecker{DisallowAll: true}, OpSet, "x-a", "1", CheckIgnore},
		{"allow_expression beats disallow_all", &MutationChecker{DisallowAll: true, AllowExpr: regexp.MustCompile(`^x-a$`)}, OpSet, "x-a", "1", CheckOK},
		{"disallow_expression beats allow_expression", &MutationChecker{AllowExpr: regexp.MustCompile(`^x-.*$`), DisallowExpr: regexp.MustCompile(`^x-a$`)}, OpSet, "x-a", "1", CheckIgnore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Check(tt.op, tt.key, tt.value); got != tt.want {
				t.Fatalf("check(%v, %q, %q) = %v, want %v", tt.op, tt.key, tt.value, got, tt.want)
			}
		})
	}
}

func TestResponseFlags(t *testing.T) {
	tests := []struct {
		f    ResponseFlags
		want string
	}{
		{0, ""},
		{FlagUF, "UF"},
		{FlagURX | FlagUF, "UF,URX"},
		{FlagNC | FlagUH | FlagUT, "UH,UT,NC"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%b: got %q, want %q", tt.f, got, tt.want)
		}
	}
	for _, n := range ResponseFlagNames {
		if f, ok := ParseResponseFlag(n); !ok || f.String() != n {
			t.Errorf("parseResponseFlag(%q) = %v %v", n, f, ok)
		}
	}
}

// TestImmediateStatus: Filter::sendImmediateResponse (ext_proc.cc) replaces
// a missing status, or one MutationUtils::isValidHttpStatus refuses (below
// 200), with DefaultImmediateStatus 200.
func TestImmediateStatus(t *testing.T) {
	for in, want := range map[int]int{0: 200, 100: 200, 199: 200, 200: 200, 403: 403, 599: 599, 1000: 200} {
		if got := ImmediateStatus(in); got != want {
			t.Errorf("immediateStatus(%d) = %d, want %d", in, got, want)
		}
	}
}
