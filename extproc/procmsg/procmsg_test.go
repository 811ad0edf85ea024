package procmsg

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// TestHeaderValue: raw_value wins over value, value is the fallback, and a
// raw value is read without a copy (one per header per message was a tenth
// of the server's allocations).
func TestHeaderValue(t *testing.T) {
	tests := []struct {
		h    *corev3.HeaderValue
		want string
	}{
		{&corev3.HeaderValue{Key: "a", RawValue: []byte("raw")}, "raw"},
		{&corev3.HeaderValue{Key: "a", RawValue: []byte("raw"), Value: "v"}, "raw"},
		{&corev3.HeaderValue{Key: "a", Value: "v"}, "v"},
		{&corev3.HeaderValue{Key: "a"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := HeaderValue(tt.h); got != tt.want {
			t.Errorf("HeaderValue(%v) = %q, want %q", tt.h, got, tt.want)
		}
	}
	h := &corev3.HeaderValue{Key: "accept", RawValue: []byte("application/json, text/event-stream")}
	if n := testing.AllocsPerRun(100, func() { _ = HeaderValue(h) }); n != 0 {
		t.Errorf("headerValue allocated %v times per call", n)
	}
}
