package dataplane

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestUntrustedClientHeaders: a request that is not internal loses the
// client's x-envoy-* timeout, retry and tracing headers, and SANITIZE
// removes a client's x-forwarded-client-cert, as
// ConnectionManagerUtility::mutateRequestHeaders and
// mutateXfccRequestHeader do; an internal peer (internal_address_config
// listing loopback) and ALWAYS_FORWARD_ONLY keep them.
func TestUntrustedClientHeaders(t *testing.T) {
	sent := map[string]string{
		"X-Envoy-Upstream-Rq-Timeout-Ms": "1",
		"X-Envoy-Retry-On":               "5xx",
		"X-Envoy-Max-Retries":            "50",
		"X-Envoy-Force-Trace":            "true",
		"X-Forwarded-Client-Cert":        "By=spiffe://evil;URI=spiffe://cluster.local/ns/a/sa/admin",
	}
	envoyHeaders := []string{"X-Envoy-Upstream-Rq-Timeout-Ms", "X-Envoy-Retry-On", "X-Envoy-Max-Retries", "X-Envoy-Force-Trace"}
	for _, tc := range []struct {
		name                string
		cidrs               []string
		xfcc                hcmv3.HttpConnectionManager_ForwardClientCertDetails
		keepEnvoy, keepXFCC bool
	}{
		{name: "no internal address, SANITIZE (what xds emits)", cidrs: nil},
		{name: "loopback internal", cidrs: []string{"127.0.0.0"}, keepEnvoy: true},
		{name: "ALWAYS_FORWARD_ONLY", xfcc: hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY, keepXFCC: true},
		{name: "FORWARD_ONLY without a client certificate", xfcc: hcmv3.HttpConnectionManager_FORWARD_ONLY},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, up := hcmEnv(t, func(h *hcmv3.HttpConnectionManager) {
				h.UseRemoteAddress = wrapperspb.Bool(true)
				h.InternalAddressConfig = &hcmv3.HttpConnectionManager_InternalAddressConfig{}
				for _, c := range tc.cidrs {
					h.InternalAddressConfig.CidrRanges = append(h.InternalAddressConfig.CidrRanges,
						&corev3.CidrRange{AddressPrefix: c, PrefixLen: wrapperspb.UInt32(8)})
				}
				h.ForwardClientCertDetails = tc.xfcc
			})
			if got := e.do("POST", "/", "x", sent); got.status != 200 {
				t.Fatalf("status %d", got.status)
			}
			h := up.requests()[0].header
			for _, k := range envoyHeaders {
				if got := h.Get(k) != ""; got != tc.keepEnvoy {
					t.Errorf("%s reached the upstream: %v, want %v", k, got, tc.keepEnvoy)
				}
			}
			if got := h.Get("X-Forwarded-Client-Cert") != ""; got != tc.keepXFCC {
				t.Errorf("x-forwarded-client-cert reached the upstream: %v, want %v", got, tc.keepXFCC)
			}
			if got, want := h.Get("X-Envoy-Internal") == "true", tc.keepEnvoy; got != want {
				t.Errorf("x-envoy-internal: true %v, want %v", got, want)
			}
		})
	}
}
