package xds_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/xds"
)

// parseVersion reads "v1.40.0" as [1 40 0].
func parseVersion(t *testing.T, v string) [3]int {
	t.Helper()
	var out [3]int
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".")
	if len(parts) != 3 {
		t.Fatalf("version %q is not vMAJOR.MINOR.PATCH", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("version %q: %v", v, err)
		}
		out[i] = n
	}
	return out
}

// TestEnvoyVersionAtLeastMinimum checks that the Envoy release toolmesh is
// tested with (.envoy-version) is not older than the oldest one the
// generated configuration works with.
func TestEnvoyVersionAtLeastMinimum(t *testing.T) {
	raw, err := os.ReadFile("../.envoy-version")
	if err != nil {
		t.Fatal(err)
	}
	pinned, minimum := parseVersion(t, string(raw)), parseVersion(t, xds.MinEnvoyVersion)
	for i := range pinned {
		if pinned[i] != minimum[i] {
			if pinned[i] < minimum[i] {
				t.Errorf(".envoy-version %s is older than xds.MinEnvoyVersion %s", strings.TrimSpace(string(raw)), xds.MinEnvoyVersion)
			}
			return
		}
	}
}
