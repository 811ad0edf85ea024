package xdsconfig

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// CheckDownstream applies the downstream request checks Envoy makes before
// any filter runs, and returns the local reply of a refused request. Codec
// errors go through ServerConnectionImpl::sendProtocolError
// (source/common/http/http1/codec_impl.cc), which answers with
// ActiveStream::sendLocalReply and the body CodeUtility::toString(code), so
// local_reply_config sees them like any other local reply:
//
//   - the codec refuses request headers over max_request_headers_kb
//     (details http1.headers_too_large) or more than max_headers_count
//     (http1.too_many_headers) with 431; the count is of the headers on the
//     wire, Host included (http2 the same through its header list limits);
//   - headers_with_underscores_action: REJECT_REQUEST answers 400 (details
//     http1.unexpected_underscore), DROP_HEADER removes the header (the
//     codec's checkHeaderNameForUnderscores);
//   - path_with_escaped_slashes_action (ConnectionManagerUtility::
//     maybeNormalizePath): REJECT_REQUEST answers 400 with an empty body
//     (details path_normalization_failed).
func (h *hcmConfig) CheckDownstream(m *headers.Map) *LocalReply {
	size, count := 0, 0
	for _, hd := range m.H {
		if strings.HasPrefix(hd.Key, ":") && hd.Key != ":authority" {
			continue
		}
		size += len(hd.Key) + len(hd.Value)
		count++
	}
	if size > h.MaxHeadersBytes {
		return &LocalReply{Code: 431, Body: rules.BodyHeadersTooLarge, Details: "http1.headers_too_large"}
	}
	if count > h.MaxHeaders {
		return &LocalReply{Code: 431, Body: rules.BodyHeadersTooLarge, Details: "http1.too_many_headers"}
	}
	underscore := func(k string) bool { return !strings.HasPrefix(k, ":") && strings.Contains(k, "_") }
	switch h.underscores {
	case corev3.HttpProtocolOptions_REJECT_REQUEST:
		if slices.ContainsFunc(m.H, func(hd headers.Header) bool { return underscore(hd.Key) }) {
			return &LocalReply{Code: 400, Body: rules.BodyBadRequest, Details: "http1.unexpected_underscore"}
		}
	case corev3.HttpProtocolOptions_DROP_HEADER:
		m.DelFunc(underscore)
	}
	if h.escapedSlashes == hcmv3.HttpConnectionManager_REJECT_REQUEST {
		p, _, _ := strings.Cut(strings.ToLower(m.Value(":path")), "?")
		if strings.Contains(p, "%2f") || strings.Contains(p, "%5c") {
			return &LocalReply{Code: 400, Details: "path_normalization_failed"}
		}
	}
	return nil
}
