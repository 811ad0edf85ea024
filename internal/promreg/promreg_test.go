package promreg

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gathered is every series of reg by metric name: the values of its
// counters.
func gathered(t *testing.T, reg *prometheus.Registry) map[string][]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] = append(out[mf.GetName()], m.GetCounter().GetValue())
		}
	}
	return out
}

func counterVec(help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_ops_total", Help: help}, labels)
}

func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := Register(reg, counterVec("ops", "op"))
	if err != nil {
		t.Fatal(err)
	}
	first.WithLabelValues("a").Inc()

	// The same collector again (a second server, a reload): the first one
	// comes back and counting goes on in the same series.
	second, err := Register(reg, counterVec("ops", "op"))
	if err != nil || second != first {
		t.Fatalf("second Register() = %p, %v; want the first collector %p", second, err, first)
	}
	second.WithLabelValues("a").Inc()
	if got := gathered(t, reg)["test_ops_total"]; len(got) != 1 || got[0] != 2 {
		t.Errorf("series = %v, want one series counting 2", got)
	}
	// Registering the very same collector twice is the same case.
	if again, err := Register(reg, first); err != nil || again != first {
		t.Errorf("Register(first) again = %p, %v", again, err)
	}

	// Conflicts that cannot be reused are errors, and the collector given
	// comes back unregistered.
	for _, tc := range []struct {
		name     string
		register func() (same bool, err error)
	}{
		{"other labels", func() (bool, error) {
			c := counterVec("ops", "route")
			got, err := Register(reg, c)
			return got == c, err
		}},
		{"other help", func() (bool, error) {
			c := counterVec("other help", "op")
			got, err := Register(reg, c)
			return got == c, err
		}},
		{"other type, same descriptors", func() (bool, error) {
			c := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_ops_total", Help: "ops"}, []string{"op"})
			got, err := Register(reg, c)
			return got == c, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same, err := tc.register()
			if err == nil || !strings.Contains(err.Error(), "register metrics") {
				t.Fatalf("Register() = %v, want an error", err)
			}
			if !same {
				t.Error("a failed Register must return the collector it was given")
			}
		})
	}

	if got, err := Register(nil, first); err != nil || got != first {
		t.Errorf("Register(nil) = %p, %v", got, err)
	}
	if got := gathered(t, reg); len(got) != 1 || len(got["test_ops_total"]) != 1 {
		t.Errorf("registry holds %v; want the one series", got)
	}
}

// TestRegisterMustRegisterPanics is the negative control: the case Register
// handles is one where MustRegister panics.
func TestRegisterMustRegisterPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(counterVec("ops", "op"))
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of an equal collector did not panic")
		}
	}()
	reg.MustRegister(counterVec("ops", "op"))
}
