package callplan

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// TestRoutedCallWire: the prepared reply of a routed call decodes to the
// message Reply builds, for tools with and without a version, calls
// routed at the body or already at request headers, both eras, ids of any
// length and arguments from empty to larger than a small buffer.
func TestRoutedCallWire(t *testing.T) {
	versioned := &registry.Tool{Version: "1.2.0", Service: "s", Cluster: "toolsvc_s", Path: "/t", BasePath: "/base"}
	versioned.Name = "lookup"
	plain := &registry.Tool{Service: "s", Cluster: "toolsvc_s", Path: "/u"}
	plain.Name = "u"
	for _, tool := range []*registry.Tool{versioned, plain} {
		for _, atHeaders := range []bool{false, true} {
			for _, era := range []mcp.Era{mcp.EraLegacy, mcp.EraStateless} {
				for _, id := range []string{"7", `"req-1"`, `"` + strings.Repeat("i", 300) + `"`} {
					for _, args := range []string{"", `{}`, `{"q":"weather in Oslo","limit":3}`, `{"q":"` + strings.Repeat("x", 70_000) + `"}`} {
						call := &mcp.Call{ID: []byte(id), Era: era, Tool: tool.Name}
						p := For("core", tool)
						c := &Call{Call: call, Args: []byte(args), Rerouted: !atHeaders}
						if !c.Plain() {
							t.Fatal("a call without extra headers is not plain")
						}
						built := p.Reply(c)
						prepared := p.Wire(call, []byte(args), !atHeaders)
						got, err := prepared.Message()
						if err != nil {
							t.Fatalf("tool %s, at headers %v, era %v, id %.20s, args %.20s: decoding: %v", tool.Name, atHeaders, era, id, args, err)
						}
						if !proto.Equal(built, got) {
							t.Fatalf("tool %s, at headers %v, era %v, id %.20s, args %.20s: prepared differs\nbuilt:    %v\nprepared: %v",
								tool.Name, atHeaders, era, id, args, prototext.Format(built), prototext.Format(got))
						}
					}
				}
			}
		}
	}
}

// TestResultWire: the prepared response-body reply decodes to the message
// responseBody builds, for an empty, a small and a result large enough to
// be sent as its own buffer.
func TestResultWire(t *testing.T) {
	for _, out := range []string{"", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, `{"x":"` + strings.Repeat("r", 3*procmsg.SharedPart) + `"}`} {
		built := procmsg.ResponseBody(&extprocv3.CommonResponse{
			HeaderMutation: ResultHeaders(procmsg.SetHeader("content-length", strconv.Itoa(len(out)))),
			BodyMutation:   procmsg.ReplaceBody([]byte(out)),
		})
		got, err := ResultWire([]byte(out)).Message()
		if err != nil {
			t.Fatalf("result of %d bytes: decoding: %v", len(out), err)
		}
		if !proto.Equal(built, got) {
			t.Fatalf("result of %d bytes: prepared differs\nbuilt:    %.400v\nprepared: %.400v", len(out), prototext.Format(built), prototext.Format(got))
		}
	}
}

// TestEarlyRouteWire: the request-headers reply a plan holds encoded is the
// one earlyRoute builds for a request without x-toolmesh-* headers.
func TestEarlyRouteWire(t *testing.T) {
	tool := &registry.Tool{Service: "s", Cluster: "toolsvc_s", Path: "/t", BasePath: "/base"}
	tool.Name = "lookup"
	p := newPlan("core", tool)
	got, err := p.Early().Message()
	if err != nil {
		t.Fatal(err)
	}
	want := earlyRoute(p.routing, nil)
	if !proto.Equal(got, want) {
		t.Fatalf("encoded\n%v\nbuilt\n%v", prototext.Format(got), prototext.Format(want))
	}
	if rm := want.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); !slices.Equal(rm, []string{"authorization"}) {
		t.Errorf("removes %v, want the client's authorization only", rm)
	}
}
