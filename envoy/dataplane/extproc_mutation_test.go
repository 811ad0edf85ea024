package dataplane

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

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
