package xds

import (
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// TestClientEnvoyHeadersUntrusted: the MCP listener treats no downstream
// address as internal, so Envoy strips client-supplied x-envoy-* timeout
// and retry headers, and it sanitises a client's x-forwarded-client-cert.
func TestClientEnvoyHeadersUntrusted(t *testing.T) {
	for _, opts := range []Options{
		{ListenAddress: "0.0.0.0", ListenPort: 10000},
		{ListenAddress: "127.0.0.1", ListenPort: 10000, DownstreamTLS: &DownstreamTLS{CertFile: "c", KeyFile: "k", ClientCAFile: "ca"}},
	} {
		hcm, err := buildHCM(opts)
		if err != nil {
			t.Fatal(err)
		}
		iac := hcm.GetInternalAddressConfig()
		if iac == nil || len(iac.GetCidrRanges()) != 0 || iac.GetUnixSockets() {
			t.Errorf("internal_address_config = %v, want set with no CIDR range and no unix sockets", iac)
		}
		if !hcm.GetUseRemoteAddress().GetValue() {
			t.Error("use_remote_address is off: internal status would come from x-forwarded-for")
		}
		if got := hcm.GetForwardClientCertDetails(); got != hcmv3.HttpConnectionManager_SANITIZE {
			t.Errorf("forward_client_cert_details = %v, want SANITIZE", got)
		}
	}
}

// TestControlTLSCheck: Envoy's side of the control mTLS needs absolute
// paths and at least one server SAN; each error names its key.
func TestControlTLSCheck(t *testing.T) {
	for _, tt := range []struct {
		tls  *ControlTLS
		want []string
	}{
		{&ControlTLS{}, []string{"envoyControlTLS.certFile is required", "envoyControlTLS.keyFile is required", "envoyControlTLS.caFile is required", "envoyControlTLS.serverSANs must name"}},
		{&ControlTLS{CertFile: "tls.crt", KeyFile: "/k", CAFile: "/ca", ServerSANs: []string{" x"}}, []string{"envoyControlTLS.certFile must be an absolute path", "serverSANs[0]"}},
	} {
		err := (Options{ControlTLS: tt.tls}).Validate()
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v lacks %q", tt.tls, err, w)
			}
		}
	}
	if err := (Options{ControlTLS: &ControlTLS{CertFile: "/c", KeyFile: "/k", CAFile: "/ca", ServerSANs: []string{"toolmesh.mesh.svc"}}}).Validate(); err != nil {
		t.Error(err)
	}
}
