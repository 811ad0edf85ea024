package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statsBody is an Envoy admin /stats answer with the ADS statistics.
func statsBody(connected, cxTotal, rqTotal, remoteDestroy int) string {
	return fmt.Sprintf(`cluster.toolmesh_extproc.upstream_cx_total: 9
cluster.toolmesh_xds.upstream_cx_destroy_local_with_active_rq: 0
cluster.toolmesh_xds.upstream_cx_destroy_remote_with_active_rq: %d
cluster.toolmesh_xds.upstream_cx_total: %d
cluster.toolmesh_xds.upstream_rq_total: %d
control_plane.connected_state: %d
cluster.toolmesh_xds.upstream_rq_time: P0(nan,1) P25(nan,1.025)
`, remoteDestroy, cxTotal, rqTotal, connected)
}

// chunked wraps body in a raw HTTP/1.1 response with chunked transfer
// encoding, split mid-line, as Envoy's admin streams /stats.
func chunked(status, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %s\r\ncontent-type: text/plain; charset=UTF-8\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n", status)
	for len(body) > 0 {
		n := min(37, len(body))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

func TestADSStats(t *testing.T) {
	same := statsBody(1, 1, 1, 0)
	tests := []struct {
		name          string
		before, after string
		cluster       string
		wantErr       string // "" when the check must pass
	}{
		{"unchanged, chunked", chunked("200 OK", same), chunked("200 OK", same), "", ""},
		{"unchanged, bare bodies", same, same, "", ""},
		{"new connection", chunked("200 OK", same), chunked("200 OK", statsBody(1, 2, 2, 1)), "", "upstream_cx_total went from 1 to 2"},
		{"new stream on the same connection", same, statsBody(1, 1, 2, 0), "", "upstream_rq_total went from 1 to 2"},
		{"disconnected", same, statsBody(0, 1, 1, 0), "", "control_plane.connected_state = \"0\""},
		{"wrong cluster", same, same, "xds", "cluster.xds.upstream_cx_total is missing"},
		{"admin refused", chunked("426 Upgrade Required", "x"), same, "", "Envoy's admin answered 426"},
		{"not stats", "nothing here", same, "", "no statistics"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
			if err := os.WriteFile(before, []byte(tc.before), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(after, []byte(tc.after), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--ads-before", before, "--ads-after", after}
			if tc.cluster != "" {
				args = append(args, "--xds-cluster", tc.cluster)
			}
			var out strings.Builder
			err := run(args, &out)
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(out.String(), "PASS ads") {
					t.Fatalf("run: %v\n%s", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("run: %v, want an error containing %q\n%s", err, tc.wantErr, out.String())
			}
		})
	}
	var out strings.Builder
	var usage usageError
	if err := run([]string{"--ads-before", "one"}, &out); !errors.As(err, &usage) {
		t.Errorf("--ads-before alone: %v, want a usage error", err)
	}
}
