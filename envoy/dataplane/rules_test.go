package dataplane

import (
	"regexp"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

func TestMutationChecker(t *testing.T) {
	def := &rules.MutationChecker{}
	strict := &rules.MutationChecker{DisallowIsError: true}
	tests := []struct {
		name  string
		c     *rules.MutationChecker
		op    rules.CheckOp
		key   string
		value string
		want  rules.CheckResult
	}{
		{"regular header", def, rules.OpSet, "x-mcp-cluster", "a", rules.CheckOK},
		{":path may be set", def, rules.OpSet, ":path", "/tools/x", rules.CheckOK},
		{":status may be set", def, rules.OpSet, ":status", "200", rules.CheckOK},
		{":status must parse", def, rules.OpSet, ":status", "abc", rules.CheckIgnore},
		{":status below 200", def, rules.OpSet, ":status", "199", rules.CheckIgnore},
		{":authority is a routing header", def, rules.OpSet, ":authority", "evil", rules.CheckIgnore},
		{"host is a routing header", def, rules.OpSet, "host", "evil", rules.CheckIgnore},
		{":scheme is a routing header", def, rules.OpSet, ":scheme", "https", rules.CheckIgnore},
		{":method is a routing header", def, rules.OpSet, ":method", "GET", rules.CheckIgnore},
		{"x-envoy headers are internal", def, rules.OpSet, "x-envoy-retry-on", "5xx", rules.CheckIgnore},
		{"x-envoy prefix without dash", def, rules.OpSet, "x-envoyfoo", "1", rules.CheckIgnore},
		{"append to a pseudo header", def, rules.OpAppend, ":path", "/x", rules.CheckIgnore},
		{"remove a pseudo header", def, rules.OpRemove, ":path", "", rules.CheckIgnore},
		{"remove host", def, rules.OpRemove, "host", "", rules.CheckIgnore},
		{"remove a regular header", def, rules.OpRemove, "content-length", "", rules.CheckOK},
		{"invalid value", def, rules.OpSet, "x-a", "a\nb", rules.CheckIgnore},
		{"disallow_is_error fails", strict, rules.OpSet, ":authority", "evil", rules.CheckFail},
		{"allow_all_routing", &rules.MutationChecker{AllowAllRouting: true}, rules.OpSet, ":authority", "ok.example", rules.CheckOK},
		{"allow_envoy", &rules.MutationChecker{AllowEnvoy: true}, rules.OpSet, "x-envoy-x", "1", rules.CheckOK},
		{"disallow_system", &rules.MutationChecker{DisallowSystem: true}, rules.OpSet, ":path", "/", rules.CheckIgnore},
		{"disallow_all", &rules.MutationChecker{DisallowAll: true}, rules.OpSet, "x-a", "1", rules.CheckIgnore},
		{"allow_expression beats disallow_all", &rules.MutationChecker{DisallowAll: true, AllowExpr: regexp.MustCompile(`^x-a$`)}, rules.OpSet, "x-a", "1", rules.CheckOK},
		{"disallow_expression beats allow_expression", &rules.MutationChecker{AllowExpr: regexp.MustCompile(`^x-.*$`), DisallowExpr: regexp.MustCompile(`^x-a$`)}, rules.OpSet, "x-a", "1", rules.CheckIgnore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Check(tt.op, tt.key, tt.value); got != tt.want {
				t.Fatalf("check(%v, %q, %q) = %v, want %v", tt.op, tt.key, tt.value, got, tt.want)
			}
		})
	}
}

func TestApplyHeaderMutation(t *testing.T) {
	opt := func(k, v string, a corev3.HeaderValueOption_HeaderAppendAction, appendField *wrapperspb.BoolValue) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}, AppendAction: a, Append: appendField}
	}
	tests := []struct {
		name    string
		m       *extprocv3.HeaderMutation
		want    []string // values of x-a after the mutation
		wantErr bool
	}{
		{name: "overwrite", m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			opt("x-a", "new", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, nil)}}, want: []string{"new"}},
		{name: "unset action appends", m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			opt("x-a", "new", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, nil)}}, want: []string{"old", "new"}},
		{name: "legacy append=false overwrites", m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			opt("x-a", "new", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, wrapperspb.Bool(false))}}, want: []string{"new"}},
		{name: "add if absent keeps", m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			opt("x-a", "new", corev3.HeaderValueOption_ADD_IF_ABSENT, nil)}}, want: []string{"old"}},
		{name: "overwrite if exists", m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			opt("x-a", "new", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS, nil)}}, want: []string{"new"}},
		{name: "remove", m: &extprocv3.HeaderMutation{RemoveHeaders: []string{"X-A"}}, want: nil},
		{name: "value and raw_value both set", wantErr: true, m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "x-a", Value: "v", RawValue: []byte("r")}}}}, want: []string{"old"}},
		{name: "value field is ignored: raw_value is read", m: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "x-a", Value: "v"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}}, want: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &headers.Map{}
			h.Add("x-a", "old")
			err := applyHeaderMutation(tt.m, h, &rules.MutationChecker{}, false, false, headerLimits{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got := h.Values("x-a"); !equalStrings(got, tt.want) {
				t.Fatalf("x-a = %q, want %q", got, tt.want)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestResponseFlags(t *testing.T) {
	tests := []struct {
		f    rules.ResponseFlags
		want string
	}{
		{0, ""},
		{rules.FlagUF, "UF"},
		{rules.FlagURX | rules.FlagUF, "UF,URX"},
		{rules.FlagNC | rules.FlagUH | rules.FlagUT, "UH,UT,NC"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%b: got %q, want %q", tt.f, got, tt.want)
		}
	}
	for _, n := range rules.ResponseFlagNames {
		if f, ok := rules.ParseResponseFlag(n); !ok || f.String() != n {
			t.Errorf("parseResponseFlag(%q) = %v %v", n, f, ok)
		}
	}
}

// TestImmediateStatus: Filter::sendImmediateResponse (ext_proc.cc) replaces
// a missing status, or one MutationUtils::isValidHttpStatus refuses (below
// 200), with DefaultImmediateStatus 200.
func TestImmediateStatus(t *testing.T) {
	for in, want := range map[int]int{0: 200, 100: 200, 199: 200, 200: 200, 403: 403, 599: 599, 1000: 200} {
		if got := rules.ImmediateStatus(in); got != want {
			t.Errorf("immediateStatus(%d) = %d, want %d", in, got, want)
		}
	}
}
