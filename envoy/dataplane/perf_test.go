package dataplane

import (
	"regexp"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// TestNewRequestID: a random UUID v4 in its canonical lower-case text form,
// as Envoy's default request ID extension generates.
func TestNewRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 64 {
		id := newRequestID()
		if !uuid.MatchString(id) {
			t.Fatalf("request id %q is not a UUID v4", id)
		}
		if seen[id] {
			t.Fatalf("request id %q generated twice", id)
		}
		seen[id] = true
	}
}

// TestCopyMode: the per-request copy of a processing mode has every field
// of the original and is independent of it.
func TestCopyMode(t *testing.T) {
	m := &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_STREAMED,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SEND,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
	c := &extprocfilterv3.ProcessingMode{}
	xdsconfig.CopyModeInto(c, m)
	if !proto.Equal(c, m) {
		t.Fatalf("copy %v, want %v", c, m)
	}
	// Every field is covered: a field CopyModeInto missed would differ here.
	if n := m.ProtoReflect().Descriptor().Fields().Len(); n != 6 {
		t.Fatalf("ProcessingMode has %d fields, CopyModeInto copies 6", n)
	}
	c.RequestBodyMode = extprocfilterv3.ProcessingMode_NONE
	if m.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_STREAMED {
		t.Fatal("changing the copy changed the original")
	}
}
