package identity

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// envoyAttrs is ProcessingRequest.attributes as Envoy fills it: the
// evaluated request_attributes under the filter's name.
func envoyAttrs(fields map[string]*structpb.Value) map[string]*structpb.Struct {
	return map[string]*structpb.Struct{AttrNamespace: {Fields: fields}}
}

func TestMeshID(t *testing.T) {
	str := structpb.NewStringValue
	for _, tc := range []struct {
		name  string
		attrs map[string]*structpb.Struct
		want  string
	}{
		{"spiffe ID", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/ns/a/sa/b")}), "spiffe://example.org/ns/a/sa/b"},
		{"trust domain only", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org")}), "spiffe://example.org"},
		{"no attributes (no request_attributes)", nil, ""},
		{"empty struct (no TLS peer certificate)", envoyAttrs(nil), ""},
		{"another namespace", map[string]*structpb.Struct{"other": {Fields: map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/a")}}}, ""},
		{"not spiffe", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("https://example.org/a")}), ""},
		{"upper-case trust domain", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://Example.org/a")}), ""},
		{"query", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/a?x=1")}), ""},
		{"port", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org:8443/a")}), ""},
		{"user info", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://u@example.org/a")}), ""},
		{"dot segment", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/a/../b")}), ""},
		{"trailing slash", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/a/")}), ""},
		{"line break", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/a\r\nx")}), ""},
		{"too long", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: str("spiffe://example.org/" + strings.Repeat("a", 2100))}), ""},
		{"not a string", envoyAttrs(map[string]*structpb.Value{AttrPeerURISAN: structpb.NewBoolValue(true)}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MeshID(tc.attrs); got != tc.want {
				t.Errorf("MeshID = %q, want %q", got, tc.want)
			}
		})
	}
}
