package extprocfilter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// applyHeaderMutation is MutationUtils::applyHeaderMutations. m is a
// received message: its values are kept without copying, so nothing may
// write to its bytes afterwards. Its error texts are Envoy's own
// (capitalized, with periods), because they become the local reply's
// %RESPONSE_CODE_DETAILS%. lim is the header map's own limits
// (headerLimits); the zero value checks none.
func applyHeaderMutation(m *extprocv3.HeaderMutation, h *headers.Map, c *rules.MutationChecker, replacing, skipCL bool, lim headerLimits) error {
	if err := lim.checkMutationSize(m); err != nil {
		return err
	}
	for _, name := range m.GetRemoveHeaders() {
		if !rules.ValidHeaderName(name) {
			return errors.New("Invalid character in remove_headers mutation.")
		}
		name = lowerASCII(name)
		switch c.Check(rules.OpRemove, name, "") {
		case rules.CheckOK:
			h.Del(name)
		case rules.CheckFail:
			return fmt.Errorf("Invalid attempt to remove %s", name)
		}
	}
	for _, sh := range m.GetSetHeaders() {
		if sh.GetHeader() == nil {
			continue
		}
		key := lowerASCII(sh.GetHeader().GetKey())
		if skipCL && key == "content-length" {
			continue
		}
		if sh.GetHeader().GetValue() != "" && len(sh.GetHeader().GetRawValue()) > 0 {
			return errors.New("Only one of value or raw_value in the HeaderValue message should be set.")
		}
		// Envoy reads raw_value (runtime flag send_header_raw_value). The
		// mutation is part of a message received from the stream, which
		// nothing writes to (bytesString), so its bytes are not copied.
		value := bytesString(sh.GetHeader().GetRawValue())
		if !rules.ValidHeaderName(key) || !rules.ValidHeaderValue(value) {
			return errors.New("Invalid character in set_headers mutation.")
		}
		mode := rules.ExtProcAppendMode(sh)
		op := rules.OpSet
		if mode == headers.AppendAdd && h.Has(key) {
			op = rules.OpAppend
		}
		if (mode == headers.AppendIfAbsent && h.Has(key)) || (mode == headers.AppendOverwriteIfExists && !h.Has(key)) {
			continue
		}
		res := c.Check(op, key, value)
		if replacing && key == ":method" {
			// CONTINUE_AND_REPLACE may change :method ("to stay compatible").
			res = rules.CheckOK
		}
		switch res {
		case rules.CheckOK:
			h.Apply(mode, key, value)
		case rules.CheckFail:
			return fmt.Errorf("Invalid attempt to modify %s", key)
		}
	}
	return lim.checkResult(h)
}

// headerLimits are the limits a header map carries (HeaderMap::
// maxHeadersCount and maxHeadersKb): the HTTP connection manager's
// common_http_protocol_options.max_headers_count and
// max_request_headers_kb for request headers, the upstream codec's for
// response headers. Zero means unlimited (a local reply's header map).
type headerLimits struct {
	count int
	kb    int
}

func newHeaderLimits(count, kb int) headerLimits { return headerLimits{count, kb} }

// checkMutationSize is MutationUtils::responseHeaderSizeCheck: a mutation
// that lists more removals or more set_headers than the map may hold
// headers is refused before anything is applied.
func (l headerLimits) checkMutationSize(m *extprocv3.HeaderMutation) error {
	if l.count == 0 {
		return nil
	}
	rm, st := len(m.GetRemoveHeaders()), len(m.GetSetHeaders())
	if rm > l.count || st > l.count {
		return fmt.Errorf("Header mutation remove header count %d or set header count %d exceed the HCM header countlimit %d", rm, st, l.count)
	}
	return nil
}

// checkResult is MutationUtils::headerMutationResultCheck: after the
// mutation the map must stay within its limits, counting every entry,
// pseudo-headers included (HeaderMap::size and byteSize: keys plus values).
func (l headerLimits) checkResult(h *headers.Map) error {
	if l.count == 0 {
		return nil
	}
	size := 0
	for _, hd := range h.H {
		size += len(hd.Key) + len(hd.Value)
	}
	if size > l.kb*1024 || len(h.H) > l.count {
		return fmt.Errorf("Header mutation causes end result header count %d or header size %d bytes, exceeding the count limit %d or the size limit %d kilobytes",
			len(h.H), size, l.count, l.kb)
	}
	return nil
}

// lowerASCII lowers A-Z only (strings.ToLower would also fold non-ASCII
// letters, such as the Kelvin sign, into valid header names); it returns s
// itself when nothing changes.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// applyBodyMutation is MutationUtils::applyBodyMutations.
func applyBodyMutation(m *extprocv3.BodyMutation, body []byte) []byte {
	switch b := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return append([]byte{}, b.Body...)
	case *extprocv3.BodyMutation_ClearBody:
		if b.ClearBody {
			return []byte{}
		}
	}
	return body
}

// checkContentLength is ProcessorState::validateContentLength.
func checkContentLength(h *headers.Map, m *extprocv3.BodyMutation) error {
	v, ok := h.Get("content-length")
	if !ok {
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil
	}
	if n != uint64(len(m.GetBody())) {
		return errors.New(rules.ErrContentLengthMismatch)
	}
	return nil
}
