package mcp

import (
	"encoding/json"
	"math"
	"strconv"
)

// Names of the two meta-tools a route in search mode lists instead of its
// tools (ADR 0004).
const (
	MetaToolSearch = "search_tools"
	MetaToolCall   = "call_tool"
)

// DefaultShortlist is the search_tools shortlist size when a route sets none.
const DefaultShortlist = 5

// IsMetaToolName reports whether name is one of the search-mode meta-tools.
// A route in search mode does not offer a real tool under such a name (the
// registry rejects it), so a name always means one thing on a route.
func IsMetaToolName(name string) bool { return name == MetaToolSearch || name == MetaToolCall }

// ViaCallTool is Call.Via for a call that came through the call_tool
// meta-tool.
const ViaCallTool = MetaToolCall

// MetaTools returns the two meta-tools of a route in search mode, in
// tools/list order (sorted by name), for a shortlist of at most shortlist
// tools (0 or less: 5). The registry serializes them once per snapshot.
func MetaTools(shortlist int) []Tool {
	if shortlist <= 0 {
		shortlist = DefaultShortlist
	}
	k := strconv.Itoa(shortlist)
	return []Tool{
		{
			Name:  MetaToolCall,
			Title: "Call a tool",
			Description: "Call one of this server's tools by name. Use search_tools first to find the tool and its " +
				"inputSchema; arguments must match that schema. The call is routed exactly as if the tool had been " +
				"called directly.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"The tool's name, exactly as search_tools returned it."},` +
				`"arguments":{"type":"object","description":"The tool's arguments, matching the inputSchema search_tools returned for it."}},` +
				`"required":["name"],"additionalProperties":false}`),
		},
		{
			Name:  MetaToolSearch,
			Title: "Search tools",
			Description: "Find the tools of this server that can do something. Describe the capability in a few words, " +
				"naming the action and the thing (\"cancel a subscription\", \"list open invoices\"), not the whole " +
				"request with its values. Returns up to " + k + " tools, best first, each with its name, title, " +
				"description and inputSchema; call one with call_tool. An empty list means no tool matches: rephrase, " +
				"or tell the user it cannot be done here.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","minLength":1,"description":"The capability you need, in a few words."},` +
				`"limit":{"type":"integer","minimum":1,"maximum":` + k + `,"description":"At most this many tools (default ` + k + `)."}},` +
				`"required":["query"],"additionalProperties":false}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"tools":{"type":"array","items":{` +
				`"type":"object","properties":{"name":{"type":"string"},"title":{"type":"string"},` +
				`"description":{"type":"string"},"inputSchema":{"type":"object"}},` +
				`"required":["name","inputSchema"]}}},"required":["tools"]}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":false}`),
		},
	}
}

// metaToolCall handles tools/call of a meta-tool on a catalog in search mode:
// search_tools is answered here; call_tool becomes the Call of the tool it
// names. args is the tools/call arguments object ("{}" when absent).
func (s *Server) metaToolCall(q *request, cat Catalog, name string, args []byte) Outcome {
	if name == MetaToolSearch {
		return s.searchTools(q, cat, args)
	}
	return s.callTool(q, cat, args)
}

// searchTools answers search_tools. Invalid arguments are an isError result,
// as a schema failure of a real tool is, so a model can correct itself.
func (s *Server) searchTools(q *request, meta Catalog, args []byte) Outcome {
	query, limit, problems := searchArgs(args, meta.Shortlist())
	c := &Call{ID: append([]byte(nil), q.id...), Era: q.era, Version: q.version, Tool: MetaToolSearch, Arguments: args}
	if len(problems) > 0 {
		return reply(&Reply{Status: 200, Headers: jsonHeaders(), Body: s.ToolError(c, problems...)})
	}
	tools := trimSpace(meta.SearchTools(query, limit))
	if !isArray(tools) {
		tools = []byte("[]")
	}
	empty := isEmptyArray(tools)

	b := make([]byte, 0, 2*len(tools)+len(tools)/4+256+len(q.id))
	b = appendEnvelope(b, q.id)
	b = append(b, `"result":`...)
	b = s.openResult(b, q.era)
	b = append(b, `"content":[`...)
	if empty {
		b = appendText(b, "No tool matches "+strconv.Quote(clip(query))+
			". Rephrase the capability in other words, or there is no tool for it on this server.")
	} else {
		// The text repeats structuredContent, for clients that read only
		// content (MCP recommends it for structured results).
		text := make([]byte, 0, len(tools)+10)
		text = append(append(append(text, `{"tools":`...), tools...), '}')
		b = appendText(b, text)
	}
	b = append(b, `],"structuredContent":{"tools":`...)
	b = append(b, tools...)
	b = append(b, '}')
	b = s.closeResult(b, q.era)
	b = append(b, '}')
	return reply(&Reply{Status: 200, Headers: jsonHeaders(), Body: b})
}

// searchArgs reads search_tools' arguments: query (a non-empty string) and
// limit (an integer 1..shortlist, null or absent for the default). It
// returns every problem found, worded for a model.
func searchArgs(args []byte, shortlist int) (query string, limit int, problems []string) {
	if shortlist <= 0 {
		shortlist = DefaultShortlist
	}
	var rawQuery, rawLimit []byte
	var dup string
	var unknown []string
	members(args, func(key, val []byte) bool {
		k := memberKey(key)
		switch string(k) {
		case "query":
			set(&rawQuery, val, k, &dup)
		case "limit":
			set(&rawLimit, val, k, &dup)
		default:
			unknown = append(unknown, string(k))
		}
		return true
	})
	bad := func(msg string) { problems = append(problems, "search_tools: "+msg) }
	if dup != "" {
		bad("argument " + strconv.Quote(clip(dup)) + " is given twice")
	}
	for _, k := range unknown {
		bad("unknown argument " + strconv.Quote(clip(k)) + "; the arguments are query and limit")
	}
	switch v, ok := stringValue(rawQuery); {
	case rawQuery == nil:
		bad("query is required: a few words naming the capability you need")
	case !ok:
		bad("query must be a string")
	case len(trimSpace([]byte(v))) == 0:
		bad("query must not be empty")
	default:
		query = v
	}
	if rawLimit != nil && !isNull(rawLimit) {
		f, err := strconv.ParseFloat(string(rawLimit), 64)
		switch {
		case !isNumber(rawLimit) || err != nil || f != math.Trunc(f):
			bad("limit must be an integer")
		case f < 1 || f > float64(shortlist):
			bad("limit must be between 1 and " + strconv.Itoa(shortlist))
		default:
			limit = int(f)
		}
	}
	return query, limit, problems
}

// callTool turns call_tool into the Call of the tool it names, resolved as a
// direct tools/call of that tool would be: the caller (the extproc server)
// then validates the inner arguments against that tool's schema and routes
// it unchanged. Malformed call_tool arguments are -32602, as malformed
// tools/call params are. Mcp-Param-* headers are not checked for the inner
// tool: the client named call_tool, whose schema declares none.
func (s *Server) callTool(q *request, cat Catalog, args []byte) Outcome {
	var rawName, rawArgs []byte
	var dup string
	var unknown string
	members(args, func(key, val []byte) bool {
		k := memberKey(key)
		switch string(k) {
		case "name":
			set(&rawName, val, k, &dup)
		case "arguments":
			set(&rawArgs, val, k, &dup)
		default:
			if unknown == "" {
				unknown = string(k)
			}
		}
		return true
	})
	switch {
	case dup != "":
		return fail(200, q.id, CodeInvalidParams, "Invalid params: call_tool argument "+strconv.Quote(clip(dup))+" is given twice")
	case unknown != "":
		return fail(200, q.id, CodeInvalidParams, "Invalid params: call_tool has no argument "+strconv.Quote(clip(unknown))+"; it takes name and arguments")
	}
	name, ok := stringValue(rawName)
	if !ok {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: call_tool arguments.name must be a string")
	}
	switch {
	case rawArgs == nil || isNull(rawArgs):
		rawArgs = []byte("{}")
	case !isObject(rawArgs):
		return fail(200, q.id, CodeInvalidParams, "Invalid params: call_tool arguments.arguments must be an object")
	}
	switch cat.Resolve(name) {
	case ToolFound:
	case ToolAmbiguous:
		return fail(200, q.id, CodeInvalidParams, "ambiguous tool: "+clip(name))
	case ToolQuarantined:
		return fail(200, q.id, CodeInvalidParams, QuarantinedMessage(name))
	default:
		return fail(200, q.id, CodeInvalidParams, "unknown tool: "+clip(name))
	}
	in, bad := callInput(q)
	if bad != nil {
		return *bad
	}
	return Outcome{Call: &Call{ID: append([]byte(nil), q.id...), Era: q.era, Version: q.version, Tool: name, Arguments: rawArgs, Via: ViaCallTool,
		ProgressToken: progressToken(q.p.progressToken), Input: in}}
}

// isEmptyArray reports whether the compact or spaced JSON array raw has no
// elements.
func isEmptyArray(raw []byte) bool {
	if !isArray(raw) {
		return false
	}
	i := skipSpace(raw, 1)
	return i < len(raw) && raw[i] == ']'
}
