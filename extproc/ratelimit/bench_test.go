//go:build linux

package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// tenLimits are ten local limits that all apply to the benchmark's call:
// rates keyed by caller, tool, claim and route, and in-flight counts. The
// rates are high enough that nothing is refused, so every call does all the
// work.
func tenLimits() *Config {
	var ls []Limit
	for i, by := range [][]string{{"caller"}, {"caller", "tool"}, {"tool"}, nil, {"claim:org"}, {"address"}, {"caller"}, {"mesh"}} {
		ls = append(ls, Limit{Name: fmt.Sprintf("rate%d", i), By: by, Requests: 1_000_000_000, Per: "minute", Burst: 1_000_000_000})
	}
	ls = append(ls,
		Limit{Name: "inflight-caller", By: []string{"caller"}, Concurrency: 1 << 30},
		Limit{Name: "inflight-tool", Tools: []string{"records_*"}, By: []string{"tool"}, Concurrency: 1 << 30})
	return &Config{Default: ls}
}

// callers is how many distinct callers the benchmarks' calls come from.
const callers = 1024

func benchCalls() []Call {
	calls := make([]Call, callers)
	for i := range calls {
		calls[i] = Call{Route: "core", Tool: "records_delete", Caller: caller(fmt.Sprint("user-", i)),
			Address: fmt.Sprint("10.0.", i/256, ".", i%256)}
	}
	return calls
}

// BenchmarkCheck measures the cost of local limits on the hot path: Check
// and Release of one call with ten limits against a baseline of the same
// calls with none configured, in the same run, in CPU time of the
// benchmark's thread. Reported: ns/op (ten
// limits), baseline-ns/op, added-µs/call (the target is at most 5) and the
// ratio to the baseline.
func BenchmarkCheck(b *testing.B) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	none := mustNew(b, &Config{}, nil)
	ten, err := New(tenLimits(), nil, m, nil)
	if err != nil {
		b.Fatal(err)
	}
	calls := benchCalls()
	ctx := context.Background()
	// CPU time of this goroutine's thread, not wall time: on a machine
	// shared with other work the wall clock measures the others too.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	run := func(l *Limiter, n int) time.Duration {
		start := threadCPU(b)
		for i := range n {
			d, p := l.Check(ctx, &calls[i%callers])
			if !d.Allowed {
				b.Fatalf("refused: %+v", d)
			}
			p.Release()
		}
		return threadCPU(b) - start
	}
	run(ten, callers) // every key exists: the steady state, not first calls
	b.ResetTimer()
	var base, limited time.Duration
	// Alternate in rounds so that noise from other work on the machine
	// falls on both alike.
	const rounds = 8
	for r := range rounds {
		n := b.N / rounds
		if r == 0 {
			n += b.N % rounds
		}
		base += run(none, n)
		limited += run(ten, n)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(limited), "ns/op")
	b.ReportMetric(per(base), "baseline-ns/op")
	b.ReportMetric((per(limited)-per(base))/1000, "added-µs/call")
	b.ReportMetric(per(limited)/max(per(base), 1), "ratio")
	if added := (per(limited) - per(base)) / 1000; added > 5 && b.N >= 10000 {
		b.Errorf("ten local limits add %.2f µs per call, more than the 5 µs target", added)
	}
}

func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkCheckParallel is the same ten limits from every core at once,
// callers spread over the keys, so shard locks and atomics are contended.
func BenchmarkCheckParallel(b *testing.B) {
	ten := mustNew(b, tenLimits(), nil)
	calls := benchCalls()
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_, p := ten.Check(ctx, &calls[i%callers])
			p.Release()
			i += 7
		}
	})
}
