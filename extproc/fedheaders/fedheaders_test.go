package fedheaders

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
)

// TestHeaderSets: the batched header sets are the ones setHeader makes,
// also past the room asked for, past the first byte buffer, and for an
// empty value; the values do not share bytes.
func TestHeaderSets(t *testing.T) {
	long := strings.Repeat("v", 300)
	kv := [][2]string{{"a", "1"}, {"b", ""}, {"c", long}, {"d", "4"}, {"e", "5"}}
	hs := NewSets(4, 0) // e past the room: setHeader
	var want []*corev3.HeaderValueOption
	for _, p := range kv {
		hs.Add(p[0], p[1])
		want = append(want, procmsg.SetHeader(p[0], p[1]))
	}
	got := &extprocv3.HeaderMutation{SetHeaders: hs.set}
	if !proto.Equal(got, &extprocv3.HeaderMutation{SetHeaders: want}) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	hs.set[2].Header.RawValue = append(hs.set[2].Header.RawValue, 'x')
	if v := string(hs.set[3].Header.RawValue); v != "4" {
		t.Errorf("appending to one value changed the next: %q", v)
	}
}
