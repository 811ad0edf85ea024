package mcp

import "strings"

// Change-notification streams (docs/decisions/0012). The gateway answers
// neither kind itself: a Listen outcome is routed to the notifications
// server, which writes the stream.
//
//   - 2026-07-28: subscriptions/listen (basic/patterns/subscriptions of the
//     specification). params.notifications, when present, must be an object;
//     toolsListChanged, promptsListChanged and resourcesListChanged count
//     only when true, and prompts and resources only on a route that offers
//     them. resourceSubscriptions is not honoured (the gateway sees no
//     resource updates) and is left out of the acknowledgement.
//   - Legacy: GET on the MCP endpoint (basic/transports of 2025-11-25): the
//     client must list text/event-stream in Accept (406 otherwise); the
//     stream carries tools/list_changed, and prompts and resources
//     list_changed where the route offers them. A GET that names the
//     2026-07-28 version gets 405, as that era has no GET stream.

// listen answers a 2026-07-28 subscriptions/listen whose headers and _meta
// passed statelessRules.
func (s *Server) listen(q *request, cat Catalog) Outcome {
	if q.r.HasAccept && !admitsEventStream(q.r.Accept) {
		return fail(406, nullIDBytes, CodeInvalidRequest,
			"Not Acceptable: subscriptions/listen answers with text/event-stream, which Accept must admit")
	}
	f := q.p.notifications
	if f != nil && string(f) != "null" && !isObject(f) {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: notifications must be an object")
	}
	off := offersOf(cat)
	l := &Listen{ID: append([]byte(nil), q.id...)}
	if isObject(f) {
		members(f, func(key, val []byte) bool {
			on := string(val) == "true"
			switch string(memberKey(key)) {
			case "toolsListChanged":
				l.Tools = on
			case "promptsListChanged":
				l.Prompts = on && off.Prompts
			case "resourcesListChanged":
				l.Resources = on && off.Resources
			}
			return true
		})
	}
	return Outcome{Listen: l}
}

// nullIDBytes is the id of transport-level rejections.
var nullIDBytes []byte

// CheckStream applies the rules of a GET on the MCP endpoint: with
// ListChanged it opens a legacy change-notification stream (Listen without
// ID), otherwise, or for a 2026-07-28 client, it is 405 with Allow: POST as
// before. Origin and Host are checked as CheckHeaders does.
func (s *Server) CheckStream(r *HTTPRequest, cat Catalog) (*Listen, *Reply) {
	if !s.cfg.ListChanged || (r.HasProtocolVersion && EraOf(r.ProtocolVersion) == EraStateless) {
		return nil, &Reply{Status: 405, Headers: []Header{{Key: headerAllow, Value: "POST"}}}
	}
	if bad := s.checkOrigin(r); bad != nil {
		return nil, bad
	}
	if r.HasProtocolVersion && !IsSupportedVersion(r.ProtocolVersion) {
		return nil, unsupportedVersion(nil, r.ProtocolVersion)
	}
	if !r.HasAccept || !admitsEventStream(r.Accept) {
		return nil, ErrorReply(406, nil, CodeInvalidRequest, "Not Acceptable: a GET stream needs Accept: text/event-stream", nil)
	}
	off := offersOf(cat)
	return &Listen{Tools: true, Prompts: off.Prompts, Resources: off.Resources}, nil
}

// admitsEventStream reports whether Accept admits text/event-stream: named,
// text/* or */*, and not weighted q=0.
func admitsEventStream(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		mt = strings.TrimSpace(mt)
		if (strings.EqualFold(mt, "text/event-stream") || strings.EqualFold(mt, "text/*") || mt == "*/*") && !refused(params) {
			return true
		}
	}
	return false
}
