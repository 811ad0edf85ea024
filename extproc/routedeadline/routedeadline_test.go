package routedeadline

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// TestListenerLevel: the level comes from the stream's incoming metadata;
// none, several or an unreadable value count as an older listener.
func TestListenerLevel(t *testing.T) {
	for _, tc := range []struct {
		md   metadata.MD
		want int
	}{
		{nil, 0},
		{metadata.Pairs(wire.ListenerLevelMetadata, "1"), 1},
		{metadata.Pairs(wire.ListenerLevelMetadata, "7"), 7},
		{metadata.Pairs(wire.ListenerLevelMetadata, "yes"), 0},
		{metadata.Pairs(wire.ListenerLevelMetadata, "-1"), 0},
		{metadata.Pairs(wire.ListenerLevelMetadata, "1", wire.ListenerLevelMetadata, "1"), 0},
	} {
		ctx := context.Background()
		if tc.md != nil {
			ctx = metadata.NewIncomingContext(ctx, tc.md)
		}
		if got := ListenerLevel(ctx); got != tc.want {
			t.Errorf("metadata %v: level %d, want %d", tc.md, got, tc.want)
		}
	}
}

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

// TestWithoutCopiesEveryField: with every field of the reply, its common
// response and header mutation set (but deprecated ones), Without's copy says all of it (and the
// removal): a field a new version of the protos adds and the copy does not
// name fails here.
func TestWithoutCopiesEveryField(t *testing.T) {
	hm := &extprocv3.HeaderMutation{}
	fill(hm.ProtoReflect())
	cr := &extprocv3.CommonResponse{}
	fill(cr.ProtoReflect())
	cr.HeaderMutation = hm
	in := &extprocv3.ProcessingResponse{}
	fill(in.ProtoReflect())
	in.Response = &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}
	want := proto.Clone(in).(*extprocv3.ProcessingResponse)
	whm := want.GetResponseHeaders().GetResponse().GetHeaderMutation()
	whm.RemoveHeaders = append(whm.RemoveHeaders, wire.RouteTimeoutHeader)
	if out := Without(in); !proto.Equal(out, want) {
		t.Fatalf("got %v\nwant %v", out, want)
	}
}

// fill sets every field of m that is not deprecated (the first of a
// oneof) to a value that is not the default.
func fill(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); (o != nil && o.Fields().Get(0) != fd) ||
			fd.Options().(*descriptorpb.FieldOptions).GetDeprecated() {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			l.Append(l.NewElement())
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Set(protoreflect.ValueOfString("k").MapKey(), mp.NewValue())
		case fd.Message() != nil:
			m.Set(fd, m.NewField(fd))
		default:
			m.Set(fd, scalar(fd.Kind()))
		}
	}
}

func scalar(k protoreflect.Kind) protoreflect.Value {
	switch k {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1)
	default:
		return protoreflect.ValueOfFloat64(1)
	}
}
