package xds_test

import (
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/xds"
)

func TestDownstreamTLSValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  *xds.DownstreamTLS
		want string
	}{
		{"unset", nil, ""},
		{"complete", &xds.DownstreamTLS{CertFile: "/t/c", KeyFile: "/t/k", ClientCAFile: "/t/ca"}, ""},
		{"no client CA", &xds.DownstreamTLS{CertFile: "/t/c", KeyFile: "/t/k"}, "downstreamTLS.clientCAFile is required"},
		{"relative", &xds.DownstreamTLS{CertFile: "c", KeyFile: "/t/k", ClientCAFile: "/t/ca"}, "downstreamTLS.certFile must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := xds.Options{DownstreamTLS: tc.tls}.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
