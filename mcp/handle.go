package mcp

import (
	"strconv"
	"strings"
)

// message is one JSON-RPC message: the raw values of its members, nil when
// absent.
type message struct {
	jsonrpc, id, method, params []byte
	result, errv                []byte
	response                    bool // has result or error
	dup                         string
}

// params are the raw members of a params object that the rules look at.
type params struct {
	name, arguments, cursor, protocolVersion, meta []byte
	uri, ref                                       []byte
	level                                          []byte // logging/setLevel
	requestState, inputResponses                   []byte // MRTR retry members (inputrequired.go)
	notifications                                  []byte // subscriptions/listen filter
	metaVersion                                    []byte // _meta[MetaProtocolVersion]
	metaCaps                                       []byte // _meta[MetaClientCapabilities]
	progressToken                                  []byte // _meta.progressToken
	dup                                            string
}

// memberKey returns the decoded key of a raw member key; it allocates only
// for keys written with escapes.
func memberKey(raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			return []byte(keyName(raw))
		}
	}
	return inner
}

// set records a member, noting a repeated one: duplicate members would let
// two readers of one body see two different requests.
func set(slot *[]byte, val []byte, key []byte, dup *string) {
	if *slot != nil && *dup == "" {
		*dup = string(key)
	}
	*slot = val
}

// member returns where the member of the message's object with the raw key
// rawKey goes, nil for a member the rules do not read; esc says the key
// holds an escape, so is compared decoded. A member met twice is noted as
// the duplicate.
func (m *message) member(rawKey []byte, esc bool) *[]byte {
	k := rawKey[1 : len(rawKey)-1]
	if esc {
		k = memberKey(rawKey)
	}
	var slot *[]byte
	switch string(k) {
	case "jsonrpc":
		slot = &m.jsonrpc
	case "id":
		slot = &m.id
	case "method":
		slot = &m.method
	case "params":
		slot = &m.params
	case "result":
		slot = &m.result
	case "error":
		slot = &m.errv
	default:
		return nil
	}
	if *slot != nil && m.dup == "" {
		m.dup = string(k)
	}
	return slot
}

func parseParams(obj []byte) params {
	var p params
	members(obj, func(key, val []byte) bool {
		k := memberKey(key)
		switch string(k) {
		case "name":
			set(&p.name, val, k, &p.dup)
		case "arguments":
			set(&p.arguments, val, k, &p.dup)
		case "cursor":
			set(&p.cursor, val, k, &p.dup)
		case "protocolVersion":
			set(&p.protocolVersion, val, k, &p.dup)
		case "_meta":
			set(&p.meta, val, k, &p.dup)
		case "uri":
			set(&p.uri, val, k, &p.dup)
		case "ref":
			set(&p.ref, val, k, &p.dup)
		case "level":
			set(&p.level, val, k, &p.dup)
		case "requestState":
			set(&p.requestState, val, k, &p.dup)
		case "inputResponses":
			set(&p.inputResponses, val, k, &p.dup)
		case "notifications":
			set(&p.notifications, val, k, &p.dup)
		}
		return true
	})
	if isObject(p.meta) {
		members(p.meta, func(key, val []byte) bool {
			k := memberKey(key)
			switch string(k) {
			case MetaProtocolVersion:
				set(&p.metaVersion, val, k, &p.dup)
			case MetaClientCapabilities:
				set(&p.metaCaps, val, k, &p.dup)
			case "progressToken":
				set(&p.progressToken, val, k, &p.dup)
			}
			return true
		})
	}
	return p
}

// request is a JSON-RPC request that passed the envelope rules.
type request struct {
	r       *HTTPRequest
	id      []byte
	method  string
	params  []byte // nil when absent or null
	p       params
	version string // effective protocol version
	era     Era
}

// Handle applies every JSON-RPC and MCP rule to one request body whose
// headers passed CheckHeaders, answering protocol methods from cat and
// returning a Call for a tools/call that must be routed. A nil cat is an
// empty catalog.
func (s *Server) Handle(r *HTTPRequest, body []byte, cat Catalog) Outcome {
	out := s.HandleShared(r, body, cat)
	if out.Reply != nil {
		out.Reply.Flatten()
	}
	return out
}

// HandleShared is Handle, except that a reply may come in Parts that share
// memory with the catalog (Reply.Parts): the caller must treat them as
// read-only.
func (s *Server) HandleShared(r *HTTPRequest, body []byte, cat Catalog) Outcome {
	var m message
	if out, bad := s.checkBody(body, &m); bad {
		return out
	}
	if m.dup != "" {
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: duplicate member "+strconv.Quote(clip(m.dup)))
	}
	// An id of the wrong type is not echoed: the reply would not be valid.
	var id []byte
	if m.id != nil {
		if !isString(m.id) && !isNumber(m.id) {
			return fail(400, nil, CodeInvalidRequest, "Invalid Request: id must be a string or a number")
		}
		id = m.id // part of body: what outlives it (Call, Forward, Answer, Listen) keeps a copy
	}
	if !isJSONRPC20(m.jsonrpc) {
		return fail(400, nil, CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`)
	}
	if m.method == nil {
		if m.response {
			if isString(id) {
				return Outcome{Reply: accepted(), Answer: &Answer{ID: append([]byte(nil), id...)}} // maybe a relayed request's (Answer)
			}
			return reply(accepted()) // a client's response to nothing we asked
		}
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: method is missing")
	}
	method, ok := stringValue(m.method)
	if !ok {
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: method must be a string")
	}
	out := s.handleMethod(r, m.params, id, method, cat)
	out.Method = method
	return out
}

// isJSONRPC20 reports whether raw is the JSON string "2.0", compared as
// nearly every client writes it before it is decoded.
func isJSONRPC20(raw []byte) bool {
	if string(raw) == `"2.0"` {
		return true
	}
	v, ok := stringValue(raw)
	return ok && v == "2.0"
}

// handleMethod answers or routes a request whose envelope and method
// HandleShared read.
func (s *Server) handleMethod(r *HTTPRequest, params, id []byte, method string, cat Catalog) Outcome {
	if id == nil {
		return reply(accepted()) // a notification: nothing to answer
	}
	switch {
	case params == nil || isNull(params):
		params = nil
	case !isObject(params) && !isArray(params):
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: params must be an object")
	}

	q := &request{r: r, id: id, method: method, params: params}
	if out, bad := q.readParams(); bad {
		return out
	}
	if out, done := s.negotiate(q); done {
		return out
	}

	// server/discover without a 2026-07-28 header is a probe: answer it as
	// the 2026 era would, so a client learns the versions in one round trip.
	if method == "server/discover" && !(r.HasProtocolVersion && r.ProtocolVersion == Version20260728) {
		return reply(resultReply(id, s.discoverFor(cat)))
	}
	if q.era == EraStateless {
		if out, bad := statelessRules(q); bad {
			return out
		}
	}
	return s.dispatch(q, cat)
}

// checkBody checks that body is one JSON-RPC object within the size and
// depth limits, and reads its members into m.
func (s *Server) checkBody(body []byte, m *message) (Outcome, bool) {
	if int64(len(body)) > s.cfg.MaxBodyBytes {
		return reply(s.tooLarge()), true
	}
	switch scanJSON(body, s.cfg.MaxDepth, m) {
	case nil:
	case errDepth:
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: JSON nested deeper than "+strconv.Itoa(s.cfg.MaxDepth)+" levels"), true
	default:
		return fail(400, nil, CodeParseError, "Parse error: the body is not valid JSON"), true
	}
	switch body = body[skipSpace(body, 0):]; {
	case isArray(body):
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: batches are not supported"), true
	case !isObject(body):
		return fail(400, nil, CodeInvalidRequest, "Invalid Request: the body must be one JSON-RPC request object"), true
	}
	return Outcome{}, false
}

// readParams reads the params object, if any, once for every reader.
func (q *request) readParams() (Outcome, bool) {
	if !isObject(q.params) {
		return Outcome{}, false
	}
	q.p = parseParams(q.params)
	if q.p.dup != "" {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: duplicate member "+strconv.Quote(clip(q.p.dup))), true
	}
	// One reading of the arguments for every reader (argcheck.go).
	if why := ArgumentsProblem(q.p.arguments); why != "" {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: arguments: "+why), true
	}
	return Outcome{}, false
}

// negotiate settles the request's protocol version from the
// MCP-Protocol-Version header and params._meta, and its era.
func (s *Server) negotiate(q *request) (Outcome, bool) {
	r := q.r
	if r.HasProtocolVersion && !IsSupportedVersion(r.ProtocolVersion) {
		return reply(unsupportedVersion(q.id, r.ProtocolVersion)), true
	}
	var mv string
	if q.p.metaVersion != nil {
		v, ok := stringValue(q.p.metaVersion)
		switch {
		case !ok && r.HasProtocolVersion:
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: _meta "+MetaProtocolVersion+" must be a string equal to the MCP-Protocol-Version header"), true
		case !ok:
			return reply(unsupportedVersion(q.id, string(q.p.metaVersion))), true
		case r.HasProtocolVersion && v != r.ProtocolVersion:
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: MCP-Protocol-Version header value "+
				strconv.Quote(clip(r.ProtocolVersion))+" does not match body value "+strconv.Quote(clip(v))), true
		case !IsSupportedVersion(v):
			return reply(unsupportedVersion(q.id, v)), true
		}
		mv = v
	}
	switch {
	case r.HasProtocolVersion:
		q.version = r.ProtocolVersion
	case mv != "":
		q.version = mv
	default:
		q.version = Version20250326 // what a client without the header speaks
	}
	q.era = EraOf(q.version)
	return Outcome{}, false
}

// statelessRules are the 2026-07-28 rules every request must pass before
// its method is looked up; bad is true with the answer to one that does not.
func statelessRules(q *request) (out Outcome, bad bool) {
	r := q.r
	// Header and body must agree, so that what an intermediary routed on is
	// what the gateway executes.
	if !r.HasProtocolVersion {
		return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: missing required MCP-Protocol-Version header"), true
	}
	if !r.HasMcpMethod {
		return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: missing required Mcp-Method header"), true
	}
	if m := strings.Trim(r.McpMethod, " \t"); m != q.method {
		return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: Mcp-Method header value "+
			strconv.Quote(clip(m))+" does not match body value "+strconv.Quote(clip(q.method))), true
	}
	// Every stateless request carries its own _meta with the protocol version
	// and the client's capabilities; without them the request is malformed.
	switch {
	case !isObject(q.p.meta):
		return fail(400, q.id, CodeInvalidParams, "Invalid params: params._meta is required in protocol version "+Version20260728), true
	case q.p.metaVersion == nil:
		return fail(400, q.id, CodeInvalidParams, "Invalid params: params._meta is missing "+MetaProtocolVersion), true
	case !isObject(q.p.metaCaps):
		return fail(400, q.id, CodeInvalidParams, "Invalid params: params._meta is missing "+MetaClientCapabilities), true
	}
	return Outcome{}, false
}

// listCursor reads a list request's params.cursor; bad is the answer to a
// request whose params or cursor have the wrong shape.
func listCursor(q *request) (cursor string, bad *Outcome) {
	if q.params != nil && !isObject(q.params) {
		o := fail(200, q.id, CodeInvalidParams, "Invalid params: params must be an object")
		return "", &o
	}
	if c := q.p.cursor; c != nil && !isNull(c) {
		v, ok := stringValue(c)
		if !ok {
			o := fail(200, q.id, CodeInvalidParams, "Invalid params: cursor must be a string")
			return "", &o
		}
		cursor = v
	}
	return cursor, nil
}

func (s *Server) toolsList(q *request, cat Catalog) Outcome {
	cursor, bad := listCursor(q)
	if bad != nil {
		return *bad
	}
	var tools []byte
	var shared *SharedItems
	var next string
	var ok bool
	if cat == nil {
		ok = cursor == ""
	} else {
		tools, shared, next, ok = cat.ToolsPageShared(cursor)
	}
	if !ok {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: invalid cursor")
	}
	if len(tools) == 0 {
		tools = []byte("[]")
	}
	if shared != nil && len(shared.JSON) >= GzipMinBytes {
		return s.listPageGzip(q, "tools", shared, next)
	}

	return s.listPage(q, "tools", tools, next)
}

// listPage is the answer of a list method: items (a JSON array serialized
// once per snapshot) under member, the next cursor, and in the 2026-07-28
// era resultType and the list tail (ttlMs, cacheScope, serverInfo). Only the
// envelope is written per request; items is passed on as its own part,
// never copied here.
func (s *Server) listPage(q *request, member string, items []byte, next string) Outcome {
	p := newPageReply(jsonPageHeaders[:])
	head, tail := s.listEnvelope(p.buf[:0], q, member, next)
	return reply(p.done(head, items, tail))
}

// listPageGzip is listPage for a large shared page: gzip-coded when the
// request accepts gzip, and in either coding marked as varying with
// Accept-Encoding.
func (s *Server) listPageGzip(q *request, member string, items *SharedItems, next string) Outcome {
	if !AcceptsGzip(q.r.AcceptEncoding) {
		p := newPageReply(varyPageHeaders[:])
		head, tail := s.listEnvelope(p.buf[:0], q, member, next)
		return reply(p.done(head, items.JSON, tail))
	}
	// The envelope only goes into the gzip parts, which copy it: it is
	// written on the stack.
	var buf [256]byte
	head, tail := s.listEnvelope(buf[:0], q, member, next)
	p := newPageReply(gzipPageHeaders[:])
	first, blocks, last := items.gzipParts(p.buf[:0], head, tail)
	return reply(p.done(first, blocks, last))
}

// pageReply is a list page's Reply with its headers, its three parts and
// room for the parts written per request (the envelope, or the gzip
// member's head and tail), allocated together.
type pageReply struct {
	Reply
	headers [3]Header
	parts   [3][]byte
	buf     [256]byte
}

// newPageReply is a list page's 200 answer with headers (copied: a caller
// may change the Reply's); done sets its body.
func newPageReply(headers []Header) *pageReply {
	p := new(pageReply)
	n := copy(p.headers[:], headers)
	p.Reply = Reply{Status: 200, Headers: p.headers[:n:n]}
	return p
}

// done sets the body in three parts and returns the Reply.
func (p *pageReply) done(a, b, c []byte) *Reply {
	p.parts = [3][]byte{a, b, c}
	p.Parts = p.parts[:]
	return &p.Reply
}

// listEnvelope is a list page's JSON around its items, written into buf
// when it has room, else into one new buffer for both. member is the
// result's member name ("tools", "resources", …), which needs no escapes.
func (s *Server) listEnvelope(buf []byte, q *request, member string, next string) (head, tail []byte) {
	if n := 96 + len(q.id) + len(member) + len(next) + len(s.listTail); cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	head = appendEnvelope(buf[:0], q.id)
	head = append(head, `"result":{`...)
	if q.era == EraStateless {
		head = append(head, `"resultType":"complete",`...)
	}
	head = append(head, '"') // member is a plain name, written as is
	head = append(head, member...)
	head = append(head, '"', ':')
	tail = head[len(head):] // in the same buffer, after head
	head = head[:len(head):len(head)]
	if next != "" {
		tail = append(tail, `,"nextCursor":`...)
		tail = appendString(tail, next)
	}
	if q.era == EraStateless {
		tail = append(tail, s.listTail...)
	} else {
		tail = append(tail, '}')
	}
	return head, append(tail, '}')
}

func (s *Server) toolsCall(q *request, cat Catalog) Outcome {
	if !isObject(q.params) {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: tools/call needs a params object")
	}
	name, ok := stringValue(q.p.name)
	if !ok {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: params.name must be a string")
	}
	if q.era == EraStateless {
		r := q.r
		if !r.HasMcpName {
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: missing required Mcp-Name header")
		}
		h, ok := DecodeHeaderValue(r.McpName)
		if !ok {
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: malformed Mcp-Name header")
		}
		if h != name {
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: Mcp-Name header value "+
				strconv.Quote(clip(h))+" does not match body value "+strconv.Quote(clip(name)))
		}
	}
	args := q.p.arguments
	switch {
	case args == nil || isNull(args):
		args = []byte("{}")
	case !isObject(args):
		return fail(200, q.id, CodeInvalidParams, "Invalid params: params.arguments must be an object")
	}
	// In search mode the meta-tools' names mean the meta-tools; every other
	// name resolves as usual, so direct calls of real tools keep working.
	if cat != nil && IsMetaToolName(name) && cat.SearchMode() {
		return s.metaToolCall(q, cat, name, args)
	}
	res := ToolUnknown
	if cat != nil {
		res = cat.Resolve(name)
	}
	switch res {
	case ToolFound:
	case ToolAmbiguous:
		return fail(200, q.id, CodeInvalidParams, "ambiguous tool: "+clip(name))
	case ToolQuarantined:
		return fail(200, q.id, CodeInvalidParams, QuarantinedMessage(name))
	default:
		return fail(200, q.id, CodeInvalidParams, "unknown tool: "+clip(name))
	}
	if q.era == EraStateless {
		if specs := cat.ParamHeaders(name); len(specs) > 0 {
			if why := checkParamHeaders(specs, q.r.ParamHeaders, args); why != "" {
				return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: "+why)
			}
		}
	}
	in, bad := callInput(q)
	if bad != nil {
		return *bad
	}
	return Outcome{Call: &Call{ID: append([]byte(nil), q.id...), Era: q.era, Version: q.version, Tool: name, Arguments: args,
		ProgressToken: progressToken(q.p.progressToken), Input: in}}
}

func reply(r *Reply) Outcome { return Outcome{Reply: r} }

func fail(status int, id []byte, code int, message string) Outcome {
	return reply(&Reply{Status: status, Headers: jsonHeaders(), Body: errorBody(id, code, message, nil)})
}
