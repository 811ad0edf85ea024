package dataplane

import (
	"regexp"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMutationChecker(t *testing.T) {
	def := &mutationChecker{}
	strict := &mutationChecker{disallowIsError: true}
	tests := []struct {
		name  string
		c     *mutationChecker
		op    checkOp
		key   string
		value string
		want  checkResult
	}{
		{"regular header", def, opSet, "x-mcp-cluster", "a", checkOK},
		{":path may be set", def, opSet, ":path", "/tools/x", checkOK},
		{":status may be set", def, opSet, ":status", "200", checkOK},
		{":status must parse", def, opSet, ":status", "abc", checkIgnore},
		{":status below 200", def, opSet, ":status", "199", checkIgnore},
		{":authority is a routing header", def, opSet, ":authority", "evil", checkIgnore},
		{"host is a routing header", def, opSet, "host", "evil", checkIgnore},
		{":scheme is a routing header", def, opSet, ":scheme", "https", checkIgnore},
		{":method is a routing header", def, opSet, ":method", "GET", checkIgnore},
		{"x-envoy headers are internal", def, opSet, "x-envoy-retry-on", "5xx", checkIgnore},
		{"x-envoy prefix without dash", def, opSet, "x-envoyfoo", "1", checkIgnore},
		{"append to a pseudo header", def, opAppend, ":path", "/x", checkIgnore},
		{"remove a pseudo header", def, opRemove, ":path", "", checkIgnore},
		{"remove host", def, opRemove, "host", "", checkIgnore},
		{"remove a regular header", def, opRemove, "content-length", "", checkOK},
		{"invalid value", def, opSet, "x-a", "a\nb", checkIgnore},
		{"disallow_is_error fails", strict, opSet, ":authority", "evil", checkFail},
		{"allow_all_routing", &mutationChecker{allowAllRouting: true}, opSet, ":authority", "ok.example", checkOK},
		{"allow_envoy", &mutationChecker{allowEnvoy: true}, opSet, "x-envoy-x", "1", checkOK},
		{"disallow_system", &mutationChecker{disallowSystem: true}, opSet, ":path", "/", checkIgnore},
		{"disallow_all", &mutationChecker{disallowAll: true}, opSet, "x-a", "1", checkIgnore},
		{"allow_expression beats disallow_all", &mutationChecker{disallowAll: true, allowExpr: regexp.MustCompile(`^x-a$`)}, opSet, "x-a", "1", checkOK},
		{"disallow_expression beats allow_expression", &mutationChecker{allowExpr: regexp.MustCompile(`^x-.*$`), disallowExpr: regexp.MustCompile(`^x-a$`)}, opSet, "x-a", "1", checkIgnore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.check(tt.op, tt.key, tt.value); got != tt.want {
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
			h := &headerMap{}
			h.add("x-a", "old")
			err := applyHeaderMutation(tt.m, h, &mutationChecker{}, false, false, headerLimits{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got := h.values("x-a"); !equalStrings(got, tt.want) {
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
		f    responseFlags
		want string
	}{
		{0, ""},
		{flagUF, "UF"},
		{flagURX | flagUF, "UF,URX"},
		{flagNC | flagUH | flagUT, "UH,UT,NC"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%b: got %q, want %q", tt.f, got, tt.want)
		}
	}
	for _, n := range responseFlagNames {
		if f, ok := parseResponseFlag(n); !ok || f.String() != n {
			t.Errorf("parseResponseFlag(%q) = %v %v", n, f, ok)
		}
	}
}

// TestImmediateStatus: Filter::sendImmediateResponse (ext_proc.cc) replaces
// a missing status, or one MutationUtils::isValidHttpStatus refuses (below
// 200), with DefaultImmediateStatus 200.
func TestImmediateStatus(t *testing.T) {
	for in, want := range map[int]int{0: 200, 100: 200, 199: 200, 200: 200, 403: 403, 599: 599, 1000: 200} {
		if got := immediateStatus(in); got != want {
			t.Errorf("immediateStatus(%d) = %d, want %d", in, got, want)
		}
	}
}
