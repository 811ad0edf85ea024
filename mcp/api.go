package mcp

import (
	"encoding/json"
	"time"
)

// Protocol versions the gateway speaks.
const (
	Version20260728 = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

// Era is the protocol era of one request.
type Era int

// Eras.
const (
	EraLegacy    Era = 1 // 2025-03-26 … 2025-11-25: initialize handshake
	EraStateless Era = 2 // 2026-07-28: per-request _meta, server/discover
)

// JSON-RPC and MCP error codes.
const (
	CodeParseError                 = -32700
	CodeInvalidRequest             = -32600
	CodeMethodNotFound             = -32601
	CodeInvalidParams              = -32602
	CodeInternalError              = -32603
	CodeHeaderMismatch             = -32020
	CodeMissingClientCapability    = -32021
	CodeUnsupportedProtocolVersion = -32022
)

// HTTPRequest is the part of an HTTP request the protocol rules look at. The
// extproc server fills it from Envoy's request headers.
type HTTPRequest struct {
	Method             string // :method
	Path               string // :path
	ContentType        string
	Accept             string
	HasAccept          bool
	AcceptEncoding     string // Accept-Encoding, several lines joined with ", "
	ProtocolVersion    string // MCP-Protocol-Version
	HasProtocolVersion bool
	McpMethod          string // Mcp-Method
	HasMcpMethod       bool
	McpName            string // Mcp-Name (may be =?base64?…?= encoded)
	HasMcpName         bool
	Origin             string
	HasOrigin          bool
	Host               string // :authority or Host
	ContentLength      int64  // -1 when unknown
	// ParamHeaders are the request's Mcp-Param-* headers (SEP-2243); Key is
	// the part after "Mcp-Param-", in any case.
	ParamHeaders []Header
}

// Header is one HTTP response header.
type Header struct{ Key, Value string }

// Reply is a complete HTTP answer the gateway gives itself (an Envoy
// ImmediateResponse). Body is empty for 202 and 405.
type Reply struct {
	Status  int
	Headers []Header
	Body    []byte
	// Parts, set only by HandleShared, is the body in pieces, Body being
	// nil: a list page's items stay the array serialized once per snapshot,
	// so a large list is copied to the wire, never concatenated. The pieces
	// may be shared with other requests and must not be modified.
	Parts [][]byte
}

// BodyLen is the length of the body, whole or in parts.
func (r *Reply) BodyLen() int {
	n := len(r.Body)
	for _, p := range r.Parts {
		n += len(p)
	}
	return n
}

// Flatten joins Parts into Body.
func (r *Reply) Flatten() {
	if r.Parts == nil {
		return
	}
	b := make([]byte, 0, r.BodyLen())
	b = append(b, r.Body...)
	for _, p := range r.Parts {
		b = append(b, p...)
	}
	r.Body, r.Parts = b, nil
}

// Tool is a tool as it appears in a tools/list answer. Schema-like fields are
// kept as raw JSON so what a Tool Service declared passes through byte for byte.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Icons        json.RawMessage `json:"icons,omitempty"`
}

// Resolution is the outcome of resolving a tool name within a route.
type Resolution int

// Resolutions.
const (
	ToolUnknown   Resolution = iota // no active tool of that name
	ToolFound                       // exactly one
	ToolAmbiguous                   // two or more active tools of that name
	// ToolQuarantined: the tool's definition changed and is held back
	// until an operator accepts it (pinned definitions).
	ToolQuarantined
)

// Catalog is what one route offers a request: every method the protocol
// asks of a route is here, so a wrapper that implements Catalog cannot hide
// a feature by leaving a method out. registry.Snapshot implements it, and
// extproc's per-request view does.
type Catalog interface {
	// ToolsPageShared returns the JSON array of the tools on the page that starts
	// at cursor ("" for the first page) and the cursor of the next page (""
	// on the last). ok is false for an invalid cursor. shared is the page as
	// SharedItems, built once and shared by the requests that list it, so a
	// large page is answered gzip-compressed without compressing it per
	// request; it is nil for a page made for this request (such as one
	// starting mid-page), which is answered uncompressed.
	ToolsPageShared(cursor string) (tools []byte, shared *SharedItems, next string, ok bool)
	// Resolve says whether name names exactly one active tool.
	Resolve(name string) Resolution
	// ParamHeaders are the x-mcp-header parameters of tool (SEP-2243).
	ParamHeaders(tool string) []ParamHeader

	// SearchMode reports whether the route is in search mode: tools/call
	// of search_tools is then answered by the gateway from SearchTools, and
	// tools/call of call_tool becomes a Call of the tool it names, exactly
	// as a direct call; ToolsPage lists the two meta-tools (see MetaTools).
	SearchMode() bool
	// Shortlist is the most tools one search_tools call returns (and the
	// largest limit it accepts).
	Shortlist() int
	// SearchTools returns the JSON array of the tools that best match query,
	// best first, at most limit (0: Shortlist) of them, each with only the
	// fields its Tool Service declared: name, title, description and
	// inputSchema. An empty array means nothing matched.
	SearchTools(query string, limit int) []byte

	// Offers says what the route offers beyond tools (federated
	// resources, resource templates, prompts, completions).
	Offers() Offers
	// ItemsPage returns the JSON array of one page of items of kind, from
	// cursor ("" for the first page), and the next cursor ("" on the last).
	// ok is false for an invalid cursor.
	ItemsPage(kind ItemKind, cursor string) (items []byte, next string, ok bool)
}

// Config configures the protocol answers and HTTP rules.
type Config struct {
	ServerName    string
	ServerVersion string
	Instructions  string
	// ListTTL is ttlMs on cacheable 2026 results (server/discover, tools/list).
	ListTTL time.Duration
	// CacheScope is "public" or "private" (default "public").
	CacheScope string
	// AllowedOrigins lists the Origin values (scheme://host[:port] or
	// host[:port], "*" for any port) accepted; a present Origin not listed → 403.
	// Empty means the loopback defaults (localhost, 127.0.0.1, [::1], any port).
	AllowedOrigins []string
	// AllowedHosts, when not empty, lists the Host values accepted (403 otherwise).
	AllowedHosts []string
	// MaxBodyBytes is the request body limit (default 1 MiB) → 413.
	MaxBodyBytes int64
	// MaxDepth bounds JSON nesting of a request body (default 64).
	MaxDepth int
	// ListChanged says the gateway serves change-notification streams
	// (subscriptions/listen, and the legacy GET stream): initialize and
	// server/discover then declare listChanged true, subscriptions/listen
	// becomes a Listen outcome and CheckStream admits a legacy GET. False
	// keeps listChanged false, subscriptions/listen -32601 and GET 405.
	ListChanged bool
}

// Listen is a subscriptions/listen request (2026-07-28) or a legacy GET
// stream that passed every protocol rule: the caller opens the stream.
type Listen struct {
	// ID is the exact JSON text of the request id, the subscription id
	// every message on the stream carries; nil for a legacy GET stream.
	ID json.RawMessage
	// The list_changed notifications the stream carries: what the client
	// opted into and the route serves.
	Tools, Prompts, Resources bool
}

// Call is a tools/call that passed every protocol rule and must be routed.
type Call struct {
	ID        json.RawMessage // exact bytes of the request id
	Era       Era
	Version   string // effective protocol version
	Tool      string
	Arguments json.RawMessage // the arguments object, "{}" when absent
	// Via is ViaCallTool when the call came through the search-mode
	// call_tool meta-tool (Tool and Arguments are then the inner ones), ""
	// for a direct call. It is for logs and metrics: the call is resolved,
	// validated and routed the same either way.
	Via string
	// ProgressToken is a copy of params._meta.progressToken (a JSON string
	// or number), nil when the client asked for no progress notifications.
	ProgressToken json.RawMessage
	// Input is what the request carries for a multi round-trip request
	// (params.requestState, params.inputResponses) and whether the client
	// declared form elicitation; nil when it carries none of them.
	Input *CallInput
}

// Outcome is what Handle decided; Kind says which member holds it.
// Answer comes only with a 202 Reply, the answer to give when the caller
// does not deliver the Answer.
type Outcome struct {
	// Method is the request's method once it was read as a string, for
	// labels and logs; "" when the body failed before that.
	Method  string
	Reply   *Reply
	Call    *Call
	Forward *Forward
	Listen  *Listen
	Answer  *Answer
}

// OutcomeKind is what a request turned out to be.
type OutcomeKind int

// Outcome kinds. A switch over them names every one: a new kind is a
// compile-time-visible change of each caller's switch (see extproc's
// requestBody).
const (
	OutcomeReply   OutcomeKind = iota // the gateway answers: Reply
	OutcomeCall                       // a tools/call to route: Call
	OutcomeForward                    // a federated method to route: Forward
	OutcomeListen                     // a change-notification stream to open: Listen
	OutcomeAnswer                     // a client's response that may answer a relayed request: Answer (and Reply)
)

// Kind says which member of o holds the outcome. An Outcome with none
// set is a Reply kind with a nil Reply, which a caller answers as an
// internal error.
func (o *Outcome) Kind() OutcomeKind {
	switch {
	case o.Forward != nil:
		return OutcomeForward
	case o.Listen != nil:
		return OutcomeListen
	case o.Answer != nil:
		return OutcomeAnswer
	case o.Reply == nil && o.Call != nil:
		return OutcomeCall
	}
	return OutcomeReply
}

// Answer is a client's JSON-RPC response (result or error) with a string id:
// it may answer a request a federated server sent through the gateway. The
// caller decides; what it does not deliver gets the Reply (202) and is
// dropped, as every other response a client sends.
type Answer struct {
	ID json.RawMessage // exact bytes of the id
}

// Failure says how a routed call failed before a Tool Service answered.
type Failure int

// Failures.
const (
	FailureNone        Failure = iota
	FailureTimeout             // upstream timeout (Envoy 504 UT)
	FailureUnavailable         // no healthy upstream, connect failure, overflow (Envoy 503)
	FailureReset               // the upstream reset the stream
	FailureTooLarge            // the Tool Service reply exceeded the limit
)

// Upstream is what came back for a routed call.
type Upstream struct {
	Status      int
	ContentType string
	Body        []byte
	Failure     Failure
}

// QuarantinedMessage is the -32602 error message of a call to a tool held
// back by pinning: the client learns the name is known but not callable,
// and why, without the definition that changed.
func QuarantinedMessage(name string) string {
	return "tool held for review: " + clip(name) + ": its definition changed and an operator has not accepted it yet"
}
