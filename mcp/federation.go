package mcp

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// Federated MCP servers (docs/decisions/0006-federated-mcp-servers.md): a
// route whose catalog also offers resources, resource templates and prompts
// answers their list methods from the snapshot, and hands resources/read,
// prompts/get and completion/complete back as a Forward for the extproc
// server to route to the owning server.

// ItemKind is one kind of federated list.
type ItemKind int

// Item kinds.
const (
	ItemResources ItemKind = iota
	ItemResourceTemplates
	ItemPrompts
)

// Offers says which capabilities beyond tools a route has, and what it
// tells clients about itself.
type Offers struct {
	Resources   bool // resources or resource templates
	Prompts     bool
	Completions bool // some server declared completions (argument completion of prompts or templates)
	// Logging and Subscribe: some legacy-era server declared logging (and
	// resources.subscribe), state a client keeps on its own upstream
	// session (docs/decisions/0022-legacy-client-sessions.md). Declared, and
	// logging/setLevel and resources/(un)subscribe forwarded, to legacy
	// clients only.
	Logging, Subscribe bool
	// Instructions are the route's instructions (its own and its MCP
	// servers', combined and bounded by the registry), passed on after the
	// gateway's Config.Instructions in initialize and server/discover.
	Instructions string
}

// Forward is a request the gateway does not answer itself: it goes to the
// federated MCP server that owns Name.
type Forward struct {
	ID      json.RawMessage // exact bytes of the request id
	Era     Era
	Version string
	Method  string // resources/read, prompts/get or completion/complete
	// Name is what the owner is found by: the prompt name (prompts/get,
	// completion of a ref/prompt) or the URI (resources/read, completion of
	// a ref/resource).
	Name string
	// RefType is completion/complete's params.ref.type (ref/prompt or
	// ref/resource), "" for the other methods.
	RefType string
}

// Completion reference types.
const (
	RefPrompt   = "ref/prompt"
	RefResource = "ref/resource"
)

// offersOf returns what cat offers beyond tools.
func offersOf(cat Catalog) Offers {
	if cat == nil {
		return Offers{}
	}
	return cat.Offers()
}

// itemsListMethod is the list method of kind: resources/list,
// resources/templates/list or prompts/list, offered when the route offers
// that kind.
func itemsListMethod(kind ItemKind) methodHandler {
	member := map[ItemKind]string{ItemResources: "resources", ItemResourceTemplates: "resourceTemplates",
		ItemPrompts: "prompts"}[kind]
	return func(s *Server, q *request, cat Catalog) (Outcome, bool) {
		off := offersOf(cat)
		if (kind == ItemPrompts && !off.Prompts) || (kind != ItemPrompts && !off.Resources) {
			return Outcome{}, false
		}
		return s.itemsList(q, cat, kind, member), true
	}
}

// resourcesRead is forwarded to the server that owns params.uri.
func (s *Server) resourcesRead(q *request, cat Catalog) (Outcome, bool) {
	return forwardNamed(q, offersOf(cat).Resources, q.p.uri, "params.uri")
}

// promptsGet is forwarded to the server that owns params.name.
func (s *Server) promptsGet(q *request, cat Catalog) (Outcome, bool) {
	return forwardNamed(q, offersOf(cat).Prompts, q.p.name, "params.name")
}

// loggingSetLevel and resourcesSubscribe are forwarded to the client's
// own upstream sessions (docs/decisions/0022-legacy-client-sessions.md),
// legacy era only: setLevel to every server that declared logging,
// resources/(un)subscribe to the owner of params.uri.
func (s *Server) loggingSetLevel(q *request, cat Catalog) (Outcome, bool) {
	if !offersOf(cat).Logging {
		return Outcome{}, false
	}
	if v, ok := stringValue(q.p.level); !isObject(q.params) || !ok || v == "" {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: params.level must be a string"), true
	}
	return forward(q, "", ""), true
}

func (s *Server) resourcesSubscribe(q *request, cat Catalog) (Outcome, bool) {
	return forwardNamed(q, offersOf(cat).Subscribe, q.p.uri, "params.uri")
}

// forwardNamed forwards a method the route offers (offered) to the owner
// of the name in the string member of params at path.
func forwardNamed(q *request, offered bool, member []byte, path string) (Outcome, bool) {
	if !offered {
		return Outcome{}, false
	}
	v, ok := stringValue(member)
	if !isObject(q.params) || !ok || v == "" {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: "+path+" must be a string"), true
	}
	return forward(q, v, ""), true
}

// completionComplete is forwarded to the server that owns the prompt or
// resource params.ref names.
func (s *Server) completionComplete(q *request, cat Catalog) (Outcome, bool) {
	if !offersOf(cat).Completions {
		return Outcome{}, false
	}
	if !isObject(q.p.ref) {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: params.ref must be an object"), true
	}
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = json.Unmarshal(q.p.ref, &ref)
	var name string
	switch ref.Type {
	case RefPrompt:
		name = ref.Name
	case RefResource:
		name = ref.URI
	default:
		return fail(200, q.id, CodeInvalidParams, "Invalid params: params.ref.type must be ref/prompt or ref/resource"), true
	}
	if name == "" {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: params.ref names nothing"), true
	}
	return forward(q, name, ref.Type), true
}

// forward is the Forward of q to the owner of name. A 2026 resources/read
// or prompts/get names it in Mcp-Name too, and the two must agree.
func forward(q *request, name, refType string) Outcome {
	if q.era == EraStateless && (q.method == "resources/read" || q.method == "prompts/get") {
		r := q.r
		if !r.HasMcpName {
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: missing required Mcp-Name header")
		}
		if h, ok := DecodeHeaderValue(r.McpName); !ok || h != name {
			return fail(400, q.id, CodeHeaderMismatch, "Header mismatch: Mcp-Name header value "+
				strconv.Quote(clip(r.McpName))+" does not match body value "+strconv.Quote(clip(name)))
		}
	}
	return Outcome{Forward: &Forward{ID: append([]byte(nil), q.id...), Era: q.era, Version: q.version, Method: q.method,
		Name: name, RefType: refType}}
}

// itemsList answers resources/list, resources/templates/list and
// prompts/list from the snapshot, paged like tools/list.
func (s *Server) itemsList(q *request, fc Catalog, kind ItemKind, member string) Outcome {
	cursor, bad := listCursor(q)
	if bad != nil {
		return *bad
	}
	items, next, ok := fc.ItemsPage(kind, cursor)
	if !ok {
		return fail(200, q.id, CodeInvalidParams, "Invalid params: invalid cursor")
	}
	if len(items) == 0 {
		items = []byte("[]")
	}
	return s.listPage(q, member, items, next)
}

// capabilities is the capabilities object of initialize and server/discover
// for a route that offers off beyond tools. listChanged is declared true
// only when the gateway serves change-notification streams; the legacy era
// also spells out false, as it always has.
func capabilities(legacy, listChanged bool, off Offers) []byte {
	lc := `{}`
	switch {
	case listChanged:
		lc = `{"listChanged":true}`
	case legacy:
		lc = `{"listChanged":false}`
	}
	b := append([]byte(`{"tools":`), lc...)
	if off.Resources {
		b = append(b, `,"resources":`...)
		if legacy && off.Subscribe {
			b = append(append(b, `{"subscribe":true,`...), lc[1:]...)
		} else {
			b = append(b, lc...)
		}
	}
	if legacy && off.Logging {
		b = append(b, `,"logging":{}`...)
	}
	if off.Prompts {
		b = append(append(b, `,"prompts":`...), lc...)
	}
	if off.Completions {
		b = append(b, `,"completions":{}`...)
	}
	return append(b, '}')
}

// EncodeHeaderValue is the inverse of DecodeHeaderValue: v itself when it
// is plain printable ASCII without leading or trailing spaces, otherwise
// the =?base64?…?= sentinel form of the Streamable HTTP transport.
func EncodeHeaderValue(v string) string {
	plain := v != "" && v[0] != ' ' && v[len(v)-1] != ' '
	for i := 0; plain && i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			plain = false
		}
	}
	if plain && !(len(v) >= 9 && v[:9] == "=?base64?") {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
