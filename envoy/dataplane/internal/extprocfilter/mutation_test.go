package extprocfilter

import (
	"slices"
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
			if got := h.Values("x-a"); !slices.Equal(got, tt.want) {
				t.Fatalf("x-a = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestExtProcErrorDetails pins the %RESPONSE_CODE_DETAILS% of each ext_proc
// error reply to Envoy's format (source/extensions/filters/http/ext_proc/
// ext_proc.cc: ErrorPrefix "ext_proc_error", onGrpcError's
// "%s_gRPC_error_%i{%s}", onMessageTimeout's "%s_per-message_timeout_exceeded",
// the FailedPrecondition messages of onReceiveMessage and processor_state.cc,
// and mutation_utils.cc's errors), all passed through
// StringUtil::replaceAllEmptySpace by sendImmediateResponse.
func TestExtProcErrorDetails(t *testing.T) {
	mutationErr := func(m *extprocv3.HeaderMutation, checker *rules.MutationChecker) string {
		h := &headers.Map{H: []headers.Header{{Key: ":authority", Value: "a"}, {Key: "host", Value: "a"}}}
		err := applyHeaderMutation(m, h, checker, false, false, headerLimits{count: 4, kb: 1})
		if err == nil {
			return "<nil>"
		}
		return rules.ResponseDetails(err.Error())
	}
	strict := &rules.MutationChecker{DisallowIsError: true}
	tests := []struct{ name, got, want string }{
		{"gRPC error", rules.GRPCErrorDetails(14, "upstream connect error"), "ext_proc_error_gRPC_error_14{upstream_connect_error}"},
		{"gRPC error without message", rules.GRPCErrorDetails(4, ""), "ext_proc_error_gRPC_error_4{}"},
		{"message timeout", rules.DetailsMessageTimeout, "ext_proc_error_per-message_timeout_exceeded"},
		{"spurious message", rules.ResponseDetails(rules.SpuriousMessage), "spurious_message"},
		{"unhandled message", rules.ResponseDetails(rules.SpuriousUnhandled), "unhandled_message"},
		{"disabled immediate response", rules.ResponseDetails(rules.SpuriousImmediateDisabled),
			"unhandled_immediate_response_due_to_config_disabled_it"},
		{"streamed_response", rules.ResponseDetails(rules.SpuriousStreamedResponse),
			"spurious_message:_streamed_response_is_received_while_body_mode__is_not_FULL_DUPLEX_STREAMED"},
		{"content-length mismatch", rules.ResponseDetails(rules.ErrContentLengthMismatch),
			"mismatch_between_content_length_and_the_length_of_the_mutated_body"},
		{"disallowed set", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("host", "b")}}, strict),
			"Invalid_attempt_to_modify_host"},
		{"disallowed remove", mutationErr(&extprocv3.HeaderMutation{RemoveHeaders: []string{"host"}}, strict),
			"Invalid_attempt_to_remove_host"},
		{"invalid set_headers", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-a", "a\nb")}}, strict),
			"Invalid_character_in_set_headers_mutation."},
		{"invalid remove_headers", mutationErr(&extprocv3.HeaderMutation{RemoveHeaders: []string{"x a"}}, strict),
			"Invalid_character_in_remove_headers_mutation."},
		{"value and raw_value", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "x-a", Value: "1", RawValue: []byte("2")}}}}, strict),
			"Only_one_of_value_or_raw_value_in_the_HeaderValue_message_should_be_set."},
		{"too many set_headers", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			set("x-a", "1"), set("x-b", "1"), set("x-c", "1"), set("x-d", "1"), set("x-e", "1")}}, &rules.MutationChecker{}),
			"Header_mutation_remove_header_count_0_or_set_header_count_5_exceed_the_HCM_header_countlimit_4"},
		{"result over the limits", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			set("x-a", "1"), set("x-b", "1"), set("x-c", "1")}}, &rules.MutationChecker{}),
			"Header_mutation_causes_end_result_header_count_5_or_header_size_28_bytes,_exceeding_the_count_limit_4_or_the_size_limit_1_kilobytes"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: details %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}
