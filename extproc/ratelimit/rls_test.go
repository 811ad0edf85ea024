package ratelimit

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/redistest"
	"github.com/toolmesh/toolmesh/internal/rlstest"
)

// scriptedRLS is a gRPC rate limit service on loopback whose answers the
// test sets; it records the requests it got.
type scriptedRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu     sync.Mutex
	reqs   []*rlsv3.RateLimitRequest
	answer func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

func (s *scriptedRLS) ShouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	f := s.answer
	s.mu.Unlock()
	return f(ctx, r)
}

func startScripted(t *testing.T) (*scriptedRLS, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedRLS{}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s, lis.Addr().String()
}

func TestRLSDescriptorsAndOverLimit(t *testing.T) {
	s, addr := startScripted(t)
	s.answer = func(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			{Code: rlsv3.RateLimitResponse_OK},
			{Code: rlsv3.RateLimitResponse_OVER_LIMIT, DurationUntilReset: durationpb.New(2500 * time.Millisecond),
				CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE}},
		}}, nil
	}
	// A generous timeout: the default 100 ms is lost to connecting on a
	// loaded machine, and the limiter then proceeds as if no answer came.
	l := mustNew(t, &Config{RLS: &RLSConfig{Address: addr, Domain: "mesh", Timeout: config.Duration(10 * time.Second)}, Default: []Limit{
		{Name: "org", Global: true, By: []string{"claim:org"}},
		{Name: "deletes", Global: true, Tools: []string{"records_*"}, By: []string{"caller", "tool"}},
		{Name: "local", Requests: 100, Per: "second"},
	}}, nil)
	defer l.Close(nil)
	d, _ := l.Check(context.Background(), &Call{Route: "core", Tool: "records_delete", Caller: caller("alice")})
	if d.Allowed || !d.Global || d.Limit != "deletes" || d.RetryAfter != 2500*time.Millisecond || d.Quota != 10 || d.Window != time.Minute {
		t.Fatalf("decision %+v", d)
	}
	if len(s.reqs) != 1 {
		t.Fatalf("%d requests", len(s.reqs))
	}
	r := s.reqs[0]
	var got []string
	for _, d := range r.Descriptors {
		var es []string
		for _, e := range d.Entries {
			es = append(es, e.Key+"="+e.Value)
		}
		got = append(got, strings.Join(es, ","))
	}
	want := []string{
		"toolmesh_limit=org,route=core,claim_org=acme",
		"toolmesh_limit=deletes,route=core,caller=sub:https://idp#alice,tool=records_delete",
	}
	if r.Domain != "mesh" || r.HitsAddend != 1 || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("request domain %q hits %d descriptors\n%s\nwant\n%s", r.Domain, r.HitsAddend, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A tool no global limit selects is not sent.
	if d, _ := l.Check(context.Background(), &Call{Route: "core", Tool: "other"}); d.Allowed {
		t.Fatal("claim limit should still apply (answer is OVER_LIMIT)")
	}
}

func TestRLSFailureModes(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		answer     func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
		reason     string
		timeout    time.Duration
	}{
		{"error proceeds", "", func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			return nil, status.Error(codes.Unavailable, "redis down")
		}, "error", 10 * time.Second},
		{"timeout refuses", FailureDeny, func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			<-ctx.Done() // never answers: the client's timeout ends the wait
			return nil, ctx.Err()
		}, "timeout", 50 * time.Millisecond},
		{"unknown proceeds", FailureAllow, func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			return &rlsv3.RateLimitResponse{}, nil
		}, "error", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, addr := startScripted(t)
			s.answer = tc.answer
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			var mu sync.Mutex
			log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
			l, err := New(&Config{RLS: &RLSConfig{Address: addr, FailureMode: tc.mode, Timeout: config.Duration(tc.timeout),
				LogInterval: config.Duration(time.Hour)}, Default: []Limit{{Name: "g", Global: true}}}, nil, m, log)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(nil)
			for range 3 {
				d, _ := l.Check(context.Background(), &Call{Route: "core", Tool: "t"})
				if d.Allowed != (tc.mode != FailureDeny) {
					t.Fatalf("decision %+v with failure mode %q", d, tc.mode)
				}
			}
			if v := counterValue(t, m.rls.WithLabelValues(tc.reason)); v != 3 {
				t.Errorf("failures{reason=%s} = %v, want 3", tc.reason, v)
			}
			mu.Lock()
			n := strings.Count(logs.String(), "rate limit service failed")
			mu.Unlock()
			if n != 1 {
				t.Errorf("logged %d times in one interval, want once:\n%s", n, logs.String())
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestGlobalLimitRealService: two Limiters, standing for two replicas,
// share one envoyproxy/ratelimit on a real Redis; together they let
// through the configured number of calls per caller and no more.
func TestGlobalLimitRealService(t *testing.T) {
	const perDay = 20
	svc := rlstest.Start(t, redistest.Start(t).Options().Addr, rlstest.PerCaller("deletes", "day", perDay))
	cfg := func() *Config {
		return &Config{RLS: &RLSConfig{Address: svc.GRPC, Timeout: config.Duration(5 * time.Second), FailureMode: FailureDeny},
			Routes: map[string][]Limit{"core": {{Name: "deletes", Global: true, Tools: []string{"records_delete"}, By: []string{"caller"}}}}}
	}
	a, b := mustNew(t, cfg(), nil), mustNew(t, cfg(), nil)
	defer a.Close(nil)
	defer b.Close(nil)
	// A fixed window: were the day to change during the test, the counts
	// would restart, so the test says so rather than pass or fail wrongly.
	day := time.Now().UTC().YearDay()
	allowed := map[string]int{}
	var last Decision
	for i := range 2 * perDay {
		for _, who := range []string{"alice", "bob"} {
			l := a
			if i%2 == 1 {
				l = b
			}
			d, _ := l.Check(context.Background(), &Call{Route: "core", Tool: "records_delete", Caller: caller(who)})
			if d.Kind == DecisionRLSDenied {
				t.Fatalf("rate limit service failed: %+v", d)
			}
			if d.Allowed {
				allowed[who]++
			} else {
				last = d
			}
		}
	}
	if time.Now().UTC().YearDay() != day {
		t.Fatal("the RLS's day window changed during the test; run it again")
	}
	for _, who := range []string{"alice", "bob"} {
		if allowed[who] != perDay {
			t.Errorf("%s: %d of %d calls allowed across two replicas, want exactly %d", who, allowed[who], 2*perDay, perDay)
		}
	}
	if !last.Global || last.Limit != "deletes" || last.Quota != perDay || last.Window != 24*time.Hour || last.RetryAfter <= 0 {
		t.Errorf("refusal %+v", last)
	}
	// A call no global limit selects does not reach the service.
	if d, _ := a.Check(context.Background(), &Call{Route: "core", Tool: "records_list", Caller: caller("alice")}); !d.Allowed {
		t.Errorf("records_list: %+v", d)
	}
}
