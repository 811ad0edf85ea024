package app

import (
	"testing"
	"time"
)

func TestUpstreamCallTimeoutFollowsMessageTimeout(t *testing.T) {
	for _, tc := range []struct{ message, want time.Duration }{
		{5 * time.Second, 4 * time.Second}, // the default: extproc.DefaultUpstreamCallTimeout
		{30 * time.Second, 29 * time.Second},
		{2 * time.Second, time.Second},
		{time.Second, 500 * time.Millisecond},
	} {
		if got := upstreamCallTimeout(tc.message); got != tc.want {
			t.Errorf("messageTimeout %s: upstream call timeout %s, want %s", tc.message, got, tc.want)
		}
	}
}
