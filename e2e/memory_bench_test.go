package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkMemory reports the resident memory of `toolmesh run` as a
// sidecar pays it, with the GC heap floor at its default and turned off
// (ADR 0014): idle once ready, then after the benchmark's federated
// tools/calls (loaded: resident then; peak: the high-water mark).
func BenchmarkMemory(b *testing.B) {
	for _, c := range []struct{ name, floor string }{{"floor=default", ""}, {"floor=off", "0"}} {
		b.Run(c.name, func(b *testing.B) {
			var extra []string
			if c.floor != "" {
				extra = []string{"--gc-heap-floor-bytes", c.floor}
			}
			s := newBenchSetup(b, extra...)
			pid := s.gw.cmd.Process.Pid
			idle := procStatusMiB(b, pid, "VmRSS")
			era := benchEras[0] // stateless: no session to share
			target := s.targets[era.name][1]
			for i := 0; b.Loop(); i++ {
				s.callEcho(b, target, era.version, i)
			}
			b.ReportMetric(idle, "idle-rss-MiB")
			b.ReportMetric(procStatusMiB(b, pid, "VmRSS"), "loaded-rss-MiB")
			b.ReportMetric(procStatusMiB(b, pid, "VmHWM"), "peak-rss-MiB")
		})
	}
}

// procStatusMiB reads a kB field of /proc/<pid>/status in MiB.
func procStatusMiB(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatalf("memory of toolmesh: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			tb.Fatalf("%s of toolmesh: %v", field, err)
		}
		return kb / 1024
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
