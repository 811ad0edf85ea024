package mcp

import "encoding/json"

// Multi round-trip requests (MRTR, protocol 2026-07-28,
// docs/specification/2026-07-28/basic/patterns/mrtr.mdx in
// modelcontextprotocol/modelcontextprotocol): instead of sending a request
// to the client, a server answers with an InputRequiredResult
// (resultType "input_required") holding inputRequests and an opaque
// requestState; the client retries the same request with inputResponses
// and the requestState echoed. This file holds the shapes the gateway
// itself reads and writes; nothing here does I/O.

// CallInput is what one tools/call carries for a multi round-trip request.
type CallInput struct {
	// RequestState is params.requestState; HasRequestState tells an absent
	// one from an empty string.
	RequestState    string
	HasRequestState bool
	// Responses is the params.inputResponses object, nil when absent.
	Responses json.RawMessage
	// Elicitation is true when the request's _meta clientCapabilities
	// declare form-mode elicitation (2026-07-28 era only: legacy clients
	// declare capabilities once, at initialize, which the gateway does not
	// keep).
	Elicitation bool
}

// callInput reads the MRTR members of a tools/call. A requestState that is
// not a string or inputResponses that are not an object are invalid params.
func callInput(q *request) (*CallInput, *Outcome) {
	in := CallInput{}
	if v := q.p.requestState; v != nil && !isNull(v) {
		s, ok := stringValue(v)
		if !ok {
			o := fail(200, q.id, CodeInvalidParams, "Invalid params: requestState must be a string")
			return nil, &o
		}
		in.RequestState, in.HasRequestState = s, true
	}
	if v := q.p.inputResponses; v != nil && !isNull(v) {
		if !isObject(v) {
			o := fail(200, q.id, CodeInvalidParams, "Invalid params: inputResponses must be an object")
			return nil, &o
		}
		in.Responses = append(json.RawMessage(nil), v...) // the Call outlives body
	}
	if q.era == EraStateless {
		in.Elicitation = declaresFormElicitation(q.p.metaCaps)
	}
	if !in.HasRequestState && in.Responses == nil && !in.Elicitation {
		return nil, nil
	}
	return &in, nil
}

// declaresFormElicitation reports whether client capabilities declare
// elicitation in form mode: {"elicitation":{}} (form is implied when no mode
// is named) or {"elicitation":{"form":{}, ...}}
// (docs/specification/2026-07-28/client/elicitation.mdx).
func declaresFormElicitation(caps []byte) bool {
	e := Member(caps, "elicitation")
	if !isObject(e) {
		return false
	}
	form, url := Member(e, "form"), Member(e, "url")
	return form != nil && !isNull(form) || form == nil && url == nil
}

// ElicitRequest is one form-mode elicitation/create input request.
type ElicitRequest struct {
	Message string
	// Schema is the requestedSchema: a flat object schema of primitives.
	Schema json.RawMessage
}

// InputRequired is the JSON-RPC response to c carrying an
// InputRequiredResult that asks the client one elicitation, under key, and
// carries state as requestState.
func (s *Server) InputRequired(c *Call, key string, e ElicitRequest, state string) []byte {
	id, _ := callID(c)
	b := make([]byte, 0, 256+len(id)+len(e.Message)+len(e.Schema)+len(state))
	b = appendEnvelope(b, id)
	b = append(b, `"result":{"resultType":"`+ResultInputRequired+`","inputRequests":{`...)
	b = appendString(b, key)
	b = append(b, `:{"method":"elicitation/create","params":{"mode":"form","message":`...)
	b = appendString(b, e.Message)
	b = append(b, `,"requestedSchema":`...)
	b = append(b, e.Schema...)
	b = append(b, `}}},"requestState":`...)
	b = appendString(b, state)
	b = append(b, ',')
	b = append(b, s.serverInfoMeta...)
	return append(b, "}}"...)
}

// ElicitResponse is a client's ElicitResult: action is accept, decline or
// cancel; Content is the accepted form's object (nil otherwise).
type ElicitResponse struct {
	Action  string
	Content json.RawMessage
}

// Elicited returns the ElicitResult under key in the call's inputResponses;
// ok is false when there is none or it does not have the shape of one, which
// the server answers by asking again (mrtr.mdx, "Error Handling").
func (in *CallInput) Elicited(key string) (r ElicitResponse, ok bool) {
	if in == nil {
		return r, false
	}
	v := Member(in.Responses, key)
	if !isObject(v) {
		return r, false
	}
	a, ok := stringValue(Member(v, "action"))
	if !ok {
		return r, false
	}
	switch a {
	case "accept", "decline", "cancel":
	default:
		return r, false
	}
	r.Action = a
	if c := Member(v, "content"); isObject(c) {
		r.Content = c
	}
	return r, true
}

// Bool returns the boolean field of an accepted form's content.
func (r ElicitResponse) Bool(field string) (v, ok bool) {
	switch string(Member(r.Content, field)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// MissingCapability is the MissingRequiredClientCapabilityError of the
// 2026-07-28 era: HTTP 400, code -32021, data.requiredCapabilities the
// capabilities the request would need (a ClientCapabilities object).
func MissingCapability(id json.RawMessage, required json.RawMessage, message string) *Reply {
	data := make([]byte, 0, 32+len(required))
	data = append(data, `{"requiredCapabilities":`...)
	data = append(data, required...)
	data = append(data, '}')
	return &Reply{Status: 400, Headers: jsonHeaders(),
		Body: errorBody(id, CodeMissingClientCapability, message, data)}
}
