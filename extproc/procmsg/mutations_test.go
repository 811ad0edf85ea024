package procmsg

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

func mutation(remove []string, set ...string) *extprocv3.HeaderMutation {
	m := &extprocv3.HeaderMutation{RemoveHeaders: remove}
	for i := 0; i+1 < len(set); i += 2 {
		m.SetHeaders = append(m.SetHeaders, SetHeader(set[i], set[i+1]))
	}
	return m
}

func TestMergeMutations(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b *extprocv3.HeaderMutation
		want *extprocv3.HeaderMutation
	}{
		{name: "b nil", a: mutation(nil, "x", "1"), want: mutation(nil, "x", "1")},
		{name: "a nil", b: mutation([]string{"y"}), want: mutation([]string{"y"})},
		{name: "b sets over a", a: mutation(nil, "X", "1", "z", "2"), b: mutation(nil, "x", "3"), want: mutation(nil, "z", "2", "x", "3")},
		{name: "b removes what a sets", a: mutation([]string{"r"}, "x", "1"), b: mutation([]string{"X"}), want: mutation([]string{"r", "X"})},
	} {
		if got := MergeMutations(tc.a, tc.b); !proto.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWithoutContentLength(t *testing.T) {
	m := mutation([]string{"r"}, "a", "1", "Content-Length", "5", "b", "2")
	if got, want := WithoutContentLength(m), mutation([]string{"r"}, "a", "1", "b", "2"); !proto.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if len(m.SetHeaders) != 3 {
		t.Error("the mutation passed in was changed")
	}
	if n := mutation(nil, "a", "1"); WithoutContentLength(n) != n {
		t.Error("a mutation without content-length was copied")
	}
	if WithoutContentLength(nil) != nil {
		t.Error("nil became a mutation")
	}
}

func TestMutatedBody(t *testing.T) {
	in := []byte("in")
	for _, tc := range []struct {
		bm   *extprocv3.BodyMutation
		want string
	}{
		{nil, "in"},
		{&extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte("new")}}, "new"},
		{&extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}, ""},
		{&extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: false}}, "in"},
	} {
		if got := string(MutatedBody(tc.bm, in)); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.bm, got, tc.want)
		}
	}
}
