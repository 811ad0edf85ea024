package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChartRejects checks that values the chart cannot honour fail the
// install with a message naming them, instead of rendering something that
// fails later in the cluster.
func TestChartRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"unknown mode", map[string]any{"mode": "mesh"}, "mode"},
		{"misspelt top-level key", map[string]any{"envoyy": map[string]any{}}, "envoyy"},
		{"misspelt nested key", map[string]any{"extproc": map[string]any{"replica": 3}}, "replica"},
		{"port out of range", map[string]any{"ports": map[string]any{"mcp": 70000}}, "mcp"},
		{"Redis URL that is not one", map[string]any{"redis": map[string]any{"url": "http://redis:6379"}}, "url"},
		{"two Portals", map[string]any{"portal": map[string]any{"url": "https://portal.example.com", "existingConfigMap": "portal"}}, "only one of portal.url and portal.existingConfigMap"},
		{"no Portal", map[string]any{"portal": map[string]any{"routes": []any{}}}, "set one of portal.url"},
		{"Portal in config", map[string]any{"config": map[string]any{"portal": "/tmp/p.yaml"}}, "config.portal"},
		{"listen address in config", map[string]any{"config": map[string]any{"extprocListen": "0.0.0.0:1"}}, "config.extprocListen is set by the chart"},
		{"heap from an unusable memory limit", map[string]any{"envoy": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1.5Gi"}}}}, "envoy.overload.maxHeapBytes"},
		{"heap without a memory limit", map[string]any{"envoy": map[string]any{"resources": map[string]any{"limits": nil}}}, "envoy.overload.maxHeapBytes"},
		{"approval key inline", map[string]any{"approval": map[string]any{"existingSecret": "keys", "keys": []any{map[string]any{"id": "k1", "secretKey": "k1", "secret": "0123456789abcdef"}}}}, "secret"},
		{"approval key from a path", map[string]any{"approval": map[string]any{"existingSecret": "keys", "keys": []any{map[string]any{"id": "k1", "file": "/run/k1"}}}}, "file"},
		{"approval keys without their Secret", map[string]any{"approval": map[string]any{"keys": []any{map[string]any{"id": "k1", "secretKey": "k1"}}}}, "approval.existingSecret"},
		{"approval rules without keys", map[string]any{"approval": map[string]any{"routes": map[string]any{"core": map[string]any{"tools": []any{"delete_*"}}}}}, "need approval.keys"},
		{"approval in config", map[string]any{"config": map[string]any{"approval": map[string]any{}}}, "config.approval: use the chart value"},
		{"auth in config", map[string]any{"config": map[string]any{"auth": map[string]any{}}}, "config.auth: use the chart value auth"},
		{"notification addresses in config", map[string]any{"config": map[string]any{"notificationsAddresses": []any{"x:1"}}}, "config.notificationsAddresses"},
		{"credentials without their Secret", map[string]any{"upstreamAuth": map[string]any{"credentials": map[string]any{"tok": "tok"}}}, "upstreamAuth.existingSecret"},
		{"credential named twice", map[string]any{"config": map[string]any{"credentials": map[string]any{"tok": map[string]any{"env": "TOK"}}},
			"upstreamAuth": map[string]any{"existingSecret": "s", "credentials": map[string]any{"tok": "tok"}}}, "credential tok is in both"},
		{"TLS Secret key that is a path", map[string]any{"downstreamTLS": map[string]any{"existingSecret": "tls", "certKey": "../tls.crt"}}, "certKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := renderManifests(nil, tc.values)
			if err == nil {
				t.Fatal("rendered; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestEnvoyHeapFromLimit checks the overload manager's heap ceiling: 80% of
// the Envoy container's memory limit unless set explicitly.
func TestEnvoyHeapFromLimit(t *testing.T) {
	for _, tc := range []struct {
		limit    string
		explicit int64
		want     uint64
	}{
		{"1Gi", 0, 858993459},
		{"512Mi", 0, 429496729},
		{"2G", 0, 1600000000},
		{"300000000", 0, 240000000},
		{"768Ki", 0, 629145},
		{"1Gi", 536870912, 536870912},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			envoy := map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": tc.limit}}}
			if tc.explicit != 0 {
				envoy["overload"] = map[string]any{"maxHeapBytes": tc.explicit}
			}
			o := renderChart(t, nil, map[string]any{"envoy": envoy})
			b := decodeBootstrap(t, "bootstrap", []byte(o.configMaps["mcp-toolmesh-envoy"].Data["envoy.yaml"]))
			f := checkBootstrap(t, "bootstrap", b)
			if f.heapBytes != tc.want {
				t.Errorf("max_heap_size_bytes = %d, want %d", f.heapBytes, tc.want)
			}
			limit := quantity(t, tc.limit)
			got := findContainer(t, o.deployments["mcp-toolmesh-envoy"], "envoy").Resources.Limits[corev1.ResourceMemory]
			if got.Cmp(limit) != 0 {
				t.Errorf("container limit %s, want %s", got.String(), tc.limit)
			}
		})
	}
}
