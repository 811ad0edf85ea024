package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The client side of the protocol: the JSON-RPC messages toolmesh sends to
// an MCP server it federates, and the results it reads back. The HTTP
// client that carries them lives in registry/upstream; this package does
// no I/O.

// MetaClientInfo is the _meta key of the client's Implementation in the
// stateless era.
const MetaClientInfo = "io.modelcontextprotocol/clientInfo"

// Header names of the Streamable HTTP transport that a client sends or reads.
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderName            = "Mcp-Name"
)

// Implementation names a client or a server.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ClientRequest is a JSON-RPC request (ID set) or notification (ID nil).
type ClientRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	// Params is absent when nil: JSON-RPC 2.0 allows an object or an array
	// there, never null, and the TypeScript SDK refuses a null (-32700).
	Params json.RawMessage `json:"params,omitempty"`
}

// NewClientRequest returns the request method with the numeric id id
// (0: a notification) and params; params that encode as null (a nil map
// included) are left out.
func NewClientRequest(id int64, method string, params any) ClientRequest {
	r := ClientRequest{JSONRPC: "2.0", Method: method}
	if params != nil {
		if b, err := json.Marshal(params); err == nil && string(b) != "null" {
			r.Params = b
		}
	}
	if id != 0 {
		r.ID = json.RawMessage(strconv.FormatInt(id, 10))
	}
	return r
}

// StatelessMeta is the _meta every stateless-era request carries: protocol
// version, client identity and client capabilities (none: toolmesh lists,
// it offers no sampling, elicitation or roots).
func StatelessMeta(client Implementation) map[string]any {
	return map[string]any{
		MetaProtocolVersion:    Version20260728,
		MetaClientInfo:         client,
		MetaClientCapabilities: map[string]any{},
	}
}

// InitializeParams are the params of a legacy-era initialize.
type InitializeParams struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Capabilities    map[string]any `json:"capabilities"`
	ClientInfo      Implementation `json:"clientInfo"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// ClientResponse is a JSON-RPC message as a client reads it: a response
// (ID with Result or Error), or a notification or request from the server
// (Method set), which a client waiting for its response skips.
type ClientResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
	// Raw is the message as the server wrote it.
	Raw json.RawMessage `json:"-"`
}

// IsResponseTo reports whether m is the response to the request with id
// (compared as JSON text, as the id was sent).
func (m *ClientResponse) IsResponseTo(id json.RawMessage) bool {
	return m.Method == "" && string(m.ID) == string(id) && (m.Result != nil || m.Error != nil)
}

// DecodeClientResponse decodes one JSON-RPC message read from a server.
func DecodeClientResponse(data []byte) (*ClientResponse, error) {
	var m ClientResponse
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a JSON-RPC message: %w", err)
	}
	if m.JSONRPC != "2.0" {
		return nil, errors.New(`not a JSON-RPC 2.0 message: "jsonrpc" is not "2.0"`)
	}
	m.Raw = append(json.RawMessage(nil), data...)
	return &m, nil
}

// ListCapability is the tools, resources or prompts member of a server's
// capabilities.
type ListCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
	Subscribe   bool `json:"subscribe,omitempty"`
}

// ServerCapabilities are the capabilities a server declares; a nil member
// is a capability it does not have.
type ServerCapabilities struct {
	Tools     *ListCapability `json:"tools,omitempty"`
	Resources *ListCapability `json:"resources,omitempty"`
	Prompts   *ListCapability `json:"prompts,omitempty"`
	// Completions is present when the server answers completion/complete.
	Completions json.RawMessage `json:"completions,omitempty"`
	// Logging is present when the server takes logging/setLevel.
	Logging json.RawMessage `json:"logging,omitempty"`
}

// ResultMeta is the part of a result's _meta a client reads.
type ResultMeta struct {
	ServerInfo *Implementation `json:"io.modelcontextprotocol/serverInfo,omitempty"`
}

// CacheFields are the ttlMs and cacheScope of a stateless-era cacheable
// result (server/discover and the list methods); TTLMs is nil when absent.
type CacheFields struct {
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// DiscoverResult is the result of server/discover (2026-07-28).
type DiscoverResult struct {
	ResultType        string             `json:"resultType,omitempty"`
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
	Meta              ResultMeta         `json:"_meta"`
	CacheFields
}

// InitializeResult is the result of a legacy-era initialize.
type InitializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

// ListResult is one page of tools/list, resources/list,
// resources/templates/list or prompts/list, with each item kept as the
// server wrote it.
type ListResult struct {
	ResultType        string            `json:"resultType,omitempty"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	Resources         []json.RawMessage `json:"resources,omitempty"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates,omitempty"`
	Prompts           []json.RawMessage `json:"prompts,omitempty"`
	NextCursor        *string           `json:"nextCursor,omitempty"`
	CacheFields
}

// ListMethod is one of the list methods a federating client calls, with the
// ListResult member it fills.
type ListMethod struct {
	Method string
	Kind   string // what it lists, in words
	Items  func(*ListResult) []json.RawMessage
}

// List methods.
var (
	ListTools             = ListMethod{"tools/list", "tools", func(r *ListResult) []json.RawMessage { return r.Tools }}
	ListResources         = ListMethod{"resources/list", "resources", func(r *ListResult) []json.RawMessage { return r.Resources }}
	ListResourceTemplates = ListMethod{"resources/templates/list", "resource templates", func(r *ListResult) []json.RawMessage { return r.ResourceTemplates }}
	ListPrompts           = ListMethod{"prompts/list", "prompts", func(r *ListResult) []json.RawMessage { return r.Prompts }}
)

// ResultComplete is the resultType of a final result. A result without
// resultType (any legacy-era server) counts as complete.
const ResultComplete = "complete"

// UnsupportedVersionData is the data of an UnsupportedProtocolVersion error.
type UnsupportedVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested,omitempty"`
}

// IsModernError reports whether e is one of the errors by which a
// 2026-07-28 server answers a request it cannot take (unsupported version,
// header mismatch, missing client capability). A dual-era client that sees
// one knows the server is modern and must not fall back to initialize.
func IsModernError(e *RPCError) bool {
	switch e.Code {
	case CodeUnsupportedProtocolVersion, CodeHeaderMismatch, CodeMissingClientCapability:
		return true
	}
	return false
}
