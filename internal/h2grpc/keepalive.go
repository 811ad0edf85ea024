package h2grpc

import (
	"math/rand/v2"
	"time"
)

// Keepalive is Envoy's HTTP/2 connection keepalive
// (api config/core/v3/protocol.proto KeepaliveSettings;
// source/common/http/http2/codec_impl.cc ConnectionImpl): a PING every
// Interval plus jitter, and the connection closed when its ACK does not come
// within Timeout. The local data plane's ADS and ext_proc connections both
// use it (envoy/rules.go describes the behaviour).
type Keepalive struct {
	// Interval between PINGs; zero or negative sends none.
	Interval time.Duration
	// Timeout for a PING's ACK before the connection is closed.
	Timeout time.Duration
	// IntervalJitter is the percentage of Interval added at random to each
	// one; zero or negative means none.
	IntervalJitter float64
}

// KeepaliveNext is the wait before the next keepalive PING: interval plus
// a random part of jitterPercent of it (codec_impl.cc onKeepaliveResponse,
// interval + random() % jitter), so PINGs are never closer than interval.
func KeepaliveNext(interval time.Duration, jitterPercent float64) time.Duration {
	if mod := time.Duration(jitterPercent * float64(interval) / 100); mod > 0 {
		return interval + rand.N(mod)
	}
	return interval
}
