package xdsconfig

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// RetryPolicy is a compiled RetryPolicy.
type RetryPolicy struct {
	NumRetries     int
	PerTry         time.Duration
	base, max      time.Duration
	on5xx          bool
	onGatewayError bool
	onReset        bool
	onBeforeSend   bool
	onConnect      bool
	onRefused      bool
	on4xx          bool
	statusCodes    map[int]bool
}

func compileRetryPolicy(p *routev3.RetryPolicy) (*RetryPolicy, error) {
	rp := &RetryPolicy{NumRetries: rules.DefaultNumRetries, base: rules.DefaultRetryBase, statusCodes: map[int]bool{}}
	if p.GetNumRetries() != nil {
		rp.NumRetries = int(p.GetNumRetries().GetValue())
	}
	rp.PerTry = p.GetPerTryTimeout().AsDuration() // unset: 0, none
	if b := p.GetRetryBackOff().GetBaseInterval(); b != nil {
		rp.base = b.AsDuration()
	}
	rp.max = cmp.Or(p.GetRetryBackOff().GetMaxInterval().AsDuration(), rules.DefaultRetryMaxFactor*rp.base)
	for _, c := range p.GetRetriableStatusCodes() {
		rp.statusCodes[int(c)] = true
	}
	// nil: accepted, but never triggers here (retriable-status-codes are
	// the list above; the others do not apply to the local data plane).
	retryOn := map[string]*bool{"5xx": &rp.on5xx, "gateway-error": &rp.onGatewayError, "reset": &rp.onReset,
		"reset-before-request": &rp.onBeforeSend, "connect-failure": &rp.onConnect, "refused-stream": &rp.onRefused,
		"retriable-4xx": &rp.on4xx, "retriable-status-codes": nil, "": nil,
		"envoy-ratelimited": nil, "retriable-headers": nil, "http3-post-connect-failure": nil}
	for _, on := range strings.Split(p.GetRetryOn(), ",") {
		flag, ok := retryOn[strings.TrimSpace(on)]
		if !ok {
			return nil, fmt.Errorf("retry_on %q is not emulated", on)
		}
		if flag != nil {
			*flag = true
		}
	}
	if len(p.GetRetriableHeaders()) > 0 || len(p.GetRetriableRequestHeaders()) > 0 ||
		p.GetRetryPriority() != nil || len(p.GetRetryHostPredicate()) > 0 {
		return nil, errors.New("retriable headers, retry priority and host predicates are not emulated")
	}
	return rp, nil
}

// RetryStatus says whether an upstream response status is retriable
// (RetryStateImpl::wouldRetryFromHeaders).
func (p *RetryPolicy) RetryStatus(code int) bool {
	switch {
	case p.on5xx && code >= 500:
		return true
	case p.onGatewayError && (code == 502 || code == 503 || code == 504):
		return true
	case p.on4xx && code == 409:
		return true
	}
	return p.statusCodes[code]
}

// RetryReset says whether a failure before response headers is retriable
// (RetryStateImpl::wouldRetryFromReset).
func (p *RetryPolicy) RetryReset(flag rules.ResponseFlags, beforeSend, refused bool) bool {
	switch {
	case p.on5xx, p.onGatewayError, p.onReset:
		return true
	case (p.onConnect || p.onBeforeSend) && flag == rules.FlagUF:
		return true
	case p.onBeforeSend && beforeSend:
		return true
	case p.onRefused && refused:
		return true
	}
	return false
}

// Backoff is the jittered exponential back-off before retry n (1-based):
// a random duration in [0, min(base*2^(n-1), max)] (JitteredExponentialBackOffStrategy).
func (p *RetryPolicy) Backoff(n int) time.Duration {
	d := p.base << uint(min(n-1, 20))
	if d > p.max || d <= 0 {
		d = p.max
	}
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
