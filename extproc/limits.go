package extproc

import (
	"log/slog"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Rate and concurrency limits (docs/ratelimit.md, ADR 0017): a tools/call
// that authorization, filters and approval admitted is checked against the
// route's limits before it is routed. The step is this file and one call in
// handleToolCall; the permit it takes is released when the stream ends
// (finish).

// outcomeRateLimited is the request and call outcome of a call a limit
// refused.
const (
	outcomeRateLimited = "rate_limited"
	detailsRateLimited = "toolmesh_rate_limited"
)

// rateLimit is the limit step of a resolved, admitted call: nil means route
// it (holding x.permit until the stream ends); otherwise the 429 answer.
func (x *request) rateLimit(call *mcp.Call, t *registry.Tool) *extprocv3.ProcessingResponse {
	l := x.rt.RateLimits
	if l == nil {
		return nil
	}
	d, p := l.Check(x.ctx, &ratelimit.Call{Route: x.routeKey, Tool: t.Name, Annotations: t.Annotations,
		Caller: x.caller, Address: reqheaders.ClientAddress(x.headers)})
	if d.Allowed {
		x.permit = p
		return nil
	}
	x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "audit",
		slog.String("event", "ratelimit"),
		slog.String("caller", x.caller.String()),
		slog.String("route", x.routeKey),
		slog.String("tool", t.Name),
		slog.String("limit", d.Limit),
		slog.Bool("global", d.Global),
		slog.String("decision", d.Kind),
		slog.String("retry_after_ms", strconv.FormatInt(d.RetryAfter.Milliseconds(), 10)),
		slog.String("request_id", x.requestID))
	x.callOutcome = outcomeRateLimited
	return x.answer(ratelimit.Reply(call.ID, d), outcomeRateLimited, detailsRateLimited)
}
