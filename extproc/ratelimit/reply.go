package ratelimit

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
)

// CodeRateLimited is the JSON-RPC error code of a call refused by a limit,
// in both protocol eras; stable, in the implementation-defined server error
// range (-32000..-32099), echoing HTTP 429.
const CodeRateLimited = -32029

// ErrorData is the data member of that error.
type ErrorData struct {
	RetryAfterMs int64  `json:"retryAfterMs"`
	Limit        string `json:"limit,omitempty"`
	// Reason: rate, concurrency, or rls_unavailable.
	Reason string `json:"reason"`
}

// Reply is the answer to a refused call: HTTP 429 (503 when the rate limit
// service failed and the failure mode refuses) with Retry-After (whole
// seconds, rounded up), the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers) when the limit's policy is known,
// and a JSON-RPC error with the request's id.
func Reply(id json.RawMessage, d Decision) *mcp.Reply {
	status, reason := 429, "rate"
	msg := "Rate limit exceeded: limit " + strconv.Quote(d.Limit)
	switch d.Kind {
	case DecisionConcurrency:
		reason = "concurrency"
		msg = "Too many calls in flight: limit " + strconv.Quote(d.Limit)
	case DecisionRLSDenied:
		status, reason = 503, "rls_unavailable"
		msg = "Rate limit service unavailable; calls with global limits are refused until it answers"
	}
	retry := max(d.RetryAfter, time.Millisecond)
	ms := int64((retry + time.Millisecond - 1) / time.Millisecond)
	msg += "; retry after " + strconv.FormatInt(ms, 10) + " ms"
	r := mcp.ErrorReply(status, id, CodeRateLimited, msg, ErrorData{RetryAfterMs: ms, Limit: d.Limit, Reason: reason})
	r.Headers = append(r.Headers, mcp.Header{Key: "retry-after", Value: strconv.FormatInt(ceilSeconds(retry), 10)})
	if d.Quota > 0 && d.Window > 0 && d.Limit != "" {
		name := sfString(d.Limit)
		r.Headers = append(r.Headers,
			mcp.Header{Key: "ratelimit-policy", Value: name + ";q=" + strconv.FormatInt(d.Quota, 10) +
				";w=" + strconv.FormatInt(ceilSeconds(d.Window), 10)},
			mcp.Header{Key: "ratelimit", Value: name + ";r=0;t=" + strconv.FormatInt(ceilSeconds(max(d.Reset, retry)), 10)})
	}
	return r
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// sfString is an RFC 9651 sf-string; limit names are validated to need no
// escapes, but a name from an RLS status is escaped anyway.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
