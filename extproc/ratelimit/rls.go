package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	ratelimitcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Descriptor entry keys sent to the rate limit service (docs/ratelimit.md).
// Every descriptor starts with the limit's name and the route, then one
// entry per By part, in the limit's order.
const (
	DescLimit   = "toolmesh_limit"
	DescRoute   = "route"
	DescTool    = "tool"
	DescCaller  = "caller"
	DescMesh    = "mesh"
	DescAddress = "address"
	descClaim   = "claim_" // claim_NAME
)

// rlsClient calls ShouldRateLimit. One gRPC connection is shared by every
// Limiter built with the same address.
type rlsClient struct {
	addr     string
	conn     *grpc.ClientConn
	client   rlsv3.RateLimitServiceClient
	domain   string
	timeout  time.Duration
	deny     bool
	interval time.Duration
	lastLog  *atomic.Int64 // shared with the Limiters reusing conn
	m        *Metrics
	log      *slog.Logger
}

func newRLSClient(c *RLSConfig, reuse *rlsClient, m *Metrics, log *slog.Logger) (*rlsClient, error) {
	r := &rlsClient{addr: c.Address, domain: c.domain(), timeout: c.timeout(), deny: c.FailureMode == FailureDeny,
		interval: c.logInterval(), m: m, log: log}
	if reuse != nil {
		r.conn, r.client, r.lastLog = reuse.conn, reuse.client, reuse.lastLog
		return r, nil
	}
	conn, err := grpc.NewClient(c.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Address, err)
	}
	r.conn, r.client, r.lastLog = conn, rlsv3.NewRateLimitServiceClient(conn), new(atomic.Int64)
	return r, nil
}

func (r *rlsClient) close() { _ = r.conn.Close() }

// check sends one descriptor per global limit of tp and maps the answer.
func (r *rlsClient) check(ctx context.Context, p *plan, tp toolPlan, c *Call, l *Limiter) Decision {
	req := &rlsv3.RateLimitRequest{Domain: r.domain, HitsAddend: 1}
	var names []string
	for _, i := range tp.idx {
		x := p.limits[i]
		if !x.global {
			continue
		}
		req.Descriptors = append(req.Descriptors, descriptor(x, c))
		names = append(names, x.name)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, req)
	if err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_UNKNOWN {
		err = fmt.Errorf("answer with overall code UNKNOWN")
	}
	if err != nil {
		return r.failed(err)
	}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		return Decision{Allowed: true, Kind: DecisionAllowed}
	}
	d := Decision{Kind: DecisionLimited, Global: true, Limit: names[0], RetryAfter: time.Second}
	for i, st := range resp.GetStatuses() {
		if st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT || i >= len(names) {
			continue
		}
		d.Limit = names[i]
		if u := st.GetDurationUntilReset(); u != nil && u.AsDuration() > 0 {
			d.RetryAfter = u.AsDuration()
			d.Reset = d.RetryAfter
		}
		if cl := st.GetCurrentLimit(); cl != nil {
			d.Quota = int64(cl.GetRequestsPerUnit())
			d.Window = unitDuration(cl.GetUnit()) * time.Duration(max(1, cl.GetUnitMultiplier().GetValue()))
		}
		break
	}
	return d
}

// failed applies the failure mode to an RLS error, counted and logged at
// most once per interval.
func (r *rlsClient) failed(err error) Decision {
	reason := "error"
	if status.Code(err) == codes.DeadlineExceeded {
		reason = "timeout"
	}
	r.m.rlsFailure(reason)
	now := time.Now().UnixNano()
	if last := r.lastLog.Load(); now-last >= int64(r.interval) && r.lastLog.CompareAndSwap(last, now) {
		r.log.Warn("rate limit service failed; calls with global limits "+map[bool]string{true: "are refused", false: "proceed"}[r.deny]+
			" (rateLimits.rls.failureMode); logged once per rateLimits.rls.logInterval",
			slog.String("rls", r.addr), slog.String("reason", reason), slog.Any("error", err))
	}
	if r.deny {
		return Decision{Kind: DecisionRLSDenied, Global: true, RetryAfter: time.Second}
	}
	return Decision{Allowed: true, Kind: DecisionRLSAllowed}
}

// descriptor is x's descriptor for c.
func descriptor(x *limit, c *Call) *ratelimitcommonv3.RateLimitDescriptor {
	d := &ratelimitcommonv3.RateLimitDescriptor{Entries: make([]*ratelimitcommonv3.RateLimitDescriptor_Entry, 0, 2+len(x.by))}
	d.Entries = append(d.Entries,
		&ratelimitcommonv3.RateLimitDescriptor_Entry{Key: DescLimit, Value: x.name},
		&ratelimitcommonv3.RateLimitDescriptor_Entry{Key: DescRoute, Value: c.Route})
	for _, b := range x.by {
		key := b
		if name, ok := strings.CutPrefix(b, byClaim); ok {
			key = descClaim + name
		}
		v := keyPart(b, c)
		if v == "" {
			v = "-" // envoyproxy/ratelimit ignores an entry with an empty value
		}
		d.Entries = append(d.Entries, &ratelimitcommonv3.RateLimitDescriptor_Entry{Key: key, Value: v})
	}
	return d
}

func unitDuration(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return 24 * time.Hour
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * 24 * time.Hour
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * 24 * time.Hour
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * 24 * time.Hour
	}
	return 0
}
