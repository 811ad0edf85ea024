package procmsg

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Mutations of a reply as Envoy applies them, for replies the stream
// handler merges or rewrites before it sends them.

// MutatedBody applies a body or clear_body mutation to body.
func MutatedBody(bm *extprocv3.BodyMutation, body []byte) []byte {
	switch m := bm.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return m.Body
	case *extprocv3.BodyMutation_ClearBody:
		if m.ClearBody {
			return nil
		}
	}
	return body
}

// MergeMutations is a then b as one mutation: Envoy removes before it sets
// (MutationUtils::applyHeaderMutations), so a header b removes or sets is
// dropped from a's sets, and the removals of both stay.
func MergeMutations(a, b *extprocv3.HeaderMutation) *extprocv3.HeaderMutation {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := &extprocv3.HeaderMutation{}
	touched := map[string]bool{}
	for _, k := range b.GetRemoveHeaders() {
		touched[strings.ToLower(k)] = true
	}
	for _, h := range b.GetSetHeaders() {
		touched[strings.ToLower(h.GetHeader().GetKey())] = true
	}
	for _, h := range a.GetSetHeaders() {
		if !touched[strings.ToLower(h.GetHeader().GetKey())] {
			out.SetHeaders = append(out.SetHeaders, h)
		}
	}
	out.SetHeaders = append(out.SetHeaders, b.GetSetHeaders()...)
	out.RemoveHeaders = append(append(out.RemoveHeaders, a.GetRemoveHeaders()...), b.GetRemoveHeaders()...)
	return out
}

// WithoutContentLength drops a content-length set: Envoy skips it in
// FULL_DUPLEX_STREAMED mode (shouldRemoveContentLength) and removes the upstream's, so the
// client's response is sent without one.
func WithoutContentLength(m *extprocv3.HeaderMutation) *extprocv3.HeaderMutation {
	if m == nil {
		return nil
	}
	i := slices.IndexFunc(m.GetSetHeaders(), func(h *corev3.HeaderValueOption) bool {
		return strings.EqualFold(h.GetHeader().GetKey(), "content-length")
	})
	if i < 0 {
		return m
	}
	return &extprocv3.HeaderMutation{SetHeaders: slices.Delete(slices.Clone(m.GetSetHeaders()), i, i+1), RemoveHeaders: m.GetRemoveHeaders()}
}
