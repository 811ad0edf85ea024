package routedeadline

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// TestWithout: the removal is added to a copy; the reply it was given,
// which may be shared by every request, is left as it was, and the copy
// keeps everything else the reply said. Other replies pass as they are.
func TestWithout(t *testing.T) {
	shared := procmsg.ResponseHeaders(&extprocv3.CommonResponse{
		Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{procmsg.SetHeader(":status", "200")},
			RemoveHeaders: make([]string, 1, 4)}, // room to append into
		BodyMutation: procmsg.ReplaceBody([]byte("b")),
	})
	shared.ModeOverride = procmsg.StreamOverride()
	bare := procmsg.ResponseHeaders(nil)
	for _, in := range []*extprocv3.ProcessingResponse{shared, bare} {
		before := proto.Clone(in)
		out := Without(in)
		if !proto.Equal(in, before) {
			t.Fatalf("the reply given was changed: %v", in)
		}
		want := proto.Clone(in).(*extprocv3.ProcessingResponse)
		if want.GetResponseHeaders().GetResponse() == nil {
			want.GetResponseHeaders().Response = &extprocv3.CommonResponse{}
		}
		cr := want.GetResponseHeaders().GetResponse()
		if cr.HeaderMutation == nil {
			cr.HeaderMutation = &extprocv3.HeaderMutation{}
		}
		cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, wire.RouteTimeoutHeader)
		if !proto.Equal(out, want) {
			t.Errorf("got %v\nwant %v", out, want)
		}
	}
	body := procmsg.ResponseBody(&extprocv3.CommonResponse{})
	if out := Without(body); out != body {
		t.Errorf("a body reply should pass as it is")
	}
}
