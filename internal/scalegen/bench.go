package scalegen

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// SizesEnv names the environment variable that sets the catalog sizes the
// scale benchmarks measure, in routes, comma-separated. The default keeps
// `make bench` short; `make bench-scale` measures larger catalogs
// (docs/benchmarks.md).
const SizesEnv = "TOOLMESH_BENCH_SCALE"

// DefaultSizes are the sizes measured when SizesEnv is unset.
var DefaultSizes = []int{50, 500}

// Sizes returns the sizes of SizesEnv, ascending, or fails b.
func Sizes(b *testing.B) []int {
	v := os.Getenv(SizesEnv)
	if v == "" {
		return DefaultSizes
	}
	var sizes []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want route counts such as 1000,10000", SizesEnv, v)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// HeapInUse returns the bytes of live heap objects after a full collection
// (runtime/metrics /memory/classes/heap/objects:bytes).
func HeapInUse() uint64 {
	runtime.GC()
	runtime.GC() // the first one runs the cleanups that free weakly cached entries
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Results are the measurements of one run of a scale benchmark, by metric
// and size, so that growth is judged on ratios measured in the same run,
// never on absolute timings.
type Results map[string]map[int]float64

// Set records metric at size n.
func (r Results) Set(metric string, n int, v float64) {
	if r[metric] == nil {
		r[metric] = map[int]float64{}
	}
	r[metric][n] = v
}

// Bound is the largest growth allowed of one metric between two sizes
// (value at the larger over value at the smaller). Metrics are per unit
// (per tool, per route, per lookup), so linear work grows by about 1 and
// quadratic work by the size ratio; the bounds used (4, and 2 for memory)
// catch a quadratic cost between sizes at least 5x apart.
type Bound struct {
	Metric string
	Max    float64
}

// CheckGrowth runs one sub-benchmark per pair of consecutive sizes that
// reports each metric's growth (as "<metric>-growth") and fails when one
// exceeds its bound.
func (r Results) CheckGrowth(b *testing.B, sizes []int, bounds ...Bound) {
	for i := 1; i < len(sizes); i++ {
		lo, hi := sizes[i-1], sizes[i]
		if hi < 5*lo {
			b.Logf("sizes %d and %d are less than 5x apart: a quadratic cost may stay under the growth bounds", lo, hi)
		}
		b.Run(fmt.Sprintf("growth=%d-%d", hi, lo), func(b *testing.B) {
			growth, over := r.Growth(lo, hi, bounds...)
			for _, bd := range bounds {
				if g, ok := growth[bd.Metric]; ok {
					b.ReportMetric(g, bd.Metric+"-growth")
				}
			}
			// Only the growth figures: no time per op of its own.
			b.ReportMetric(0, "ns/op")
			if len(over) > 0 {
				b.Fatalf("worse than linear: %s", strings.Join(over, "; "))
			}
		})
	}
}

// Growth returns each bounded metric's growth from size lo to size hi and
// a line for each one over its bound. A metric not measured at both sizes
// (a -bench filter skipped it) is left out.
func (r Results) Growth(lo, hi int, bounds ...Bound) (growth map[string]float64, over []string) {
	growth = map[string]float64{}
	for _, bd := range bounds {
		a, okA := r[bd.Metric][lo]
		z, okZ := r[bd.Metric][hi]
		if !okA || !okZ || a <= 0 {
			continue
		}
		g := z / a
		growth[bd.Metric] = g
		if g > bd.Max {
			over = append(over, fmt.Sprintf("%s grew %.2fx from %d to %d routes (%.4g to %.4g), over the bound %.1fx",
				bd.Metric, g, lo, hi, a, z, bd.Max))
		}
	}
	return growth, over
}
