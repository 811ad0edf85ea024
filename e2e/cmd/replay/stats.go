package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// The statistics that show an ADS stream survived: Envoy's management server
// gauge (docs/root/configuration/overview/mgmt_server.rst in
// envoyproxy/envoy: control_plane.connected_state, 1 while connected) and
// the xDS cluster's connection and request counters
// (docs/root/configuration/upstream/cluster_manager/cluster_stats.rst: a new
// connection grows upstream_cx_total, a new ADS stream upstream_rq_total, a
// connection closed under the stream one of the destroy_*_with_active_rq
// counters). The ADS stream, an Envoy gRPC stream over the cluster's pool,
// counts in upstream_rq_total like any stream the pool attaches to a
// connection [verify: source/common/conn_pool/conn_pool_base.cc
// ConnPoolImplBase::attachStreamToClient, where the pool counts
// upstream_rq_total: read in stored copies that use trafficStats(), none at
// v1.40.0, and not seen on a live Envoy].
const connectedState = "control_plane.connected_state"

var adsClusterCounters = []string{
	"upstream_cx_total",
	"upstream_rq_total",
	"upstream_cx_destroy_remote_with_active_rq",
	"upstream_cx_destroy_local_with_active_rq",
}

// compareADSStats reads two /stats answers and fails when the ADS
// connection was lost or replaced between them.
func compareADSStats(beforeFile, afterFile, cluster string, out io.Writer) error {
	before, err := readStats(beforeFile)
	if err != nil {
		return err
	}
	after, err := readStats(afterFile)
	if err != nil {
		return err
	}
	var errs []string
	for _, f := range []struct {
		name  string
		stats map[string]string
	}{{beforeFile, before}, {afterFile, after}} {
		if v := f.stats[connectedState]; v != "1" {
			errs = append(errs, fmt.Sprintf("%s: %s = %q, want 1 (connected to the control plane)", f.name, connectedState, v))
		}
	}
	for _, c := range adsClusterCounters {
		name := "cluster." + cluster + "." + c
		b, okb := before[name]
		a, oka := after[name]
		switch {
		case !okb || !oka:
			errs = append(errs, fmt.Sprintf("%s is missing (before: %v, after: %v): is --xds-cluster %s Envoy's ADS cluster?", name, okb, oka, cluster))
		case a != b:
			errs = append(errs, fmt.Sprintf("%s went from %s to %s: the ADS connection or stream was replaced", name, b, a))
		default:
			fmt.Fprintf(out, "ads: %s = %s before and after\n", name, a)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(out, "FAIL ads\n    %s\n", strings.Join(errs, "\n    "))
		return fmt.Errorf("the ADS connection did not survive: %s", strings.Join(errs, "; "))
	}
	fmt.Fprintln(out, "PASS ads")
	return nil
}

// readStats parses Envoy's admin /stats text ("name: value" per line) from
// a file holding either the raw HTTP/1.1 response (chunked or not) or just
// the body.
func readStats(file string) (map[string]string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--ads-before/--ads-after: %w", err)
	}
	body := raw
	if bytes.HasPrefix(raw, []byte("HTTP/")) {
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: Envoy's admin answered %s", file, resp.Status)
		}
		if body, err = io.ReadAll(resp.Body); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	stats := map[string]string{}
	for line := range strings.Lines(string(body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if ok {
			stats[name] = value
		}
	}
	if len(stats) == 0 {
		return nil, fmt.Errorf("%s: no statistics", file)
	}
	return stats, nil
}
