package router

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// TestResetReply: an attempt that failed before response headers is a 503
// whose body names the reset reason but, since Envoy 1.39
// (hide_transport_failure_reason_in_response_body), not the transport
// failure reason, which stays in the response code details (rules.go,
// "Router rules").
func TestResetReply(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		retried     bool
		wantFlag    rules.ResponseFlags
		wantBody    string
		wantDetails string
	}{
		{name: "TLS failure", err: &xdsconfig.DialError{Err: errors.New("TLS error: certificate signed by unknown authority")},
			wantFlag:    rules.FlagUF,
			wantBody:    "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
			wantDetails: "upstream_reset_before_response_started{connection_failure|TLS_error:_certificate_signed_by_unknown_authority}"},
		{name: "refused connection, retried", err: &xdsconfig.DialError{Err: errors.New("connection refused")}, retried: true,
			wantFlag:    rules.FlagUF,
			wantBody:    "upstream connect error or disconnect/reset before headers. retried and the latest reset reason: remote connection failure",
			wantDetails: "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_connection_refused}"},
		{name: "connect timeout", err: &xdsconfig.DialError{Err: errors.New("i/o timeout"), Timeout: true},
			wantFlag:    rules.FlagUF,
			wantBody:    "upstream connect error or disconnect/reset before headers. reset reason: connection timeout",
			wantDetails: "upstream_reset_before_response_started{connection_timeout}"},
		{name: "connection closed before headers", err: errors.New("EOF"),
			wantFlag:    rules.FlagUC,
			wantBody:    "upstream connect error or disconnect/reset before headers. reset reason: connection termination",
			wantDetails: "upstream_reset_before_response_started{connection_termination}"},
		{name: "stream refused", err: errors.New("http2: stream error: stream ID 3; REFUSED_STREAM"),
			wantFlag:    rules.FlagUR,
			wantBody:    "upstream connect error or disconnect/reset before headers. reset reason: remote refused stream reset",
			wantDetails: "upstream_reset_before_response_started{remote_refused_stream_reset}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Call
			lr := c.resetReply(classifyUpstreamError(tt.err), tt.retried)
			if lr.Code != 503 || lr.Body != tt.wantBody || lr.Details != tt.wantDetails || c.Flags != tt.wantFlag {
				t.Fatalf("got %d %q %q flags %s, want 503 %q %q flags %s",
					lr.Code, lr.Body, lr.Details, c.Flags, tt.wantBody, tt.wantDetails, tt.wantFlag)
			}
			if strings.Contains(lr.Body, "|") || strings.Contains(lr.Body, "TLS error") {
				t.Fatalf("body %q carries the transport failure reason", lr.Body)
			}
		})
	}
}
