package dataplane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestHeldBodyFraming pins how a response body the data plane holds whole
// is framed on the wire: without a content-length it is chunked, as Envoy's
// HTTP/1.1 codec sends a body without one (net/http would otherwise count
// a small body and add a content-length); an empty one, an HTTP/1.0
// client's and a HEAD response are not chunked.
func TestHeldBodyFraming(t *testing.T) {
	const newBody = `{"jsonrpc":"2.0","id":7,"result":{}}`
	var replace string // what the response body becomes
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"upstream":true}}`)
	})
	fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetResponseBody() != nil {
			return respBodyResp(&extprocv3.CommonResponse{
				HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}},
				BodyMutation:   &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(replace)}},
			}), nil
		}
		return continueAll(req)
	}
	e := newEnv(t, fn, setup{
		extProc:  defaultExtProc(),
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
	})
	for _, tt := range []struct {
		name, method, proto, replace string
		wantChunked                  bool
		wantBody                     string
	}{
		{name: "replaced body", method: "POST", proto: "HTTP/1.1", replace: newBody, wantChunked: true, wantBody: newBody},
		{name: "HTTP/1.0 client", method: "POST", proto: "HTTP/1.0", replace: newBody, wantBody: newBody},
		{name: "empty body", method: "POST", proto: "HTTP/1.1", replace: "", wantChunked: false, wantBody: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			replace = tt.replace
			c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := tt.method + " /mcp/core " + tt.proto + "\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(rpcBody)) + "\r\nConnection: close\r\n\r\n" + rpcBody
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, body %q", resp.StatusCode, b)
			}
			chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
			if chunked != tt.wantChunked {
				t.Errorf("chunked = %v (transfer-encoding %q, content-length %d), want %v", chunked, resp.TransferEncoding, resp.ContentLength, tt.wantChunked)
			}
			if chunked && resp.ContentLength != -1 {
				t.Errorf("chunked with content-length %d", resp.ContentLength)
			}
			if string(b) != tt.wantBody {
				t.Errorf("body %q, want %q", b, tt.wantBody)
			}
		})
	}
}
