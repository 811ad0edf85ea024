// Package scalegen generates large, realistic Portal catalogs for the scale
// benchmarks (docs/benchmarks.md): many routes whose Tool Services are
// partly their own and partly shared with other routes, and tools with
// names, descriptions, input schemas (nested objects, arrays, enums; a few
// hundred bytes to a few KB) and annotations like those of real MCP servers.
// Everything is a pure function of its arguments, so two runs generate the
// same bytes.
package scalegen

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolmesh/toolmesh/registry"
)

// The shape of a catalog: route i has its own Tool Service with OwnTools
// tools and one shared Tool Service (shared i mod Shared(routes)) with
// SharedTools tools; each shared service serves SharedBy routes. A catalog
// of n routes therefore has n*ToolsPerRoute distinct tools (OwnTools*n +
// SharedTools*n/SharedBy) and serves (OwnTools+SharedTools)*n route-tool
// pairs.
const (
	OwnTools      = 90
	SharedTools   = 100
	SharedBy      = 10
	ToolsPerRoute = OwnTools + SharedTools/SharedBy
)

// Catalog is a generated Portal listing and the manifest of every Tool
// Service it names.
type Catalog struct {
	Listing   registry.Listing
	Services  []registry.ToolService        // own services first, then shared, by index
	Manifests map[string]*registry.Manifest // by Tool Service name
}

// Shared is the number of shared Tool Services of a catalog of n routes.
func Shared(n int) int { return max(n/SharedBy, 1) }

// RouteKey is the key of route i.
func RouteKey(i int) string { return fmt.Sprintf("route-%05d", i) }

// OwnService and SharedService are the Tool Service names.
func OwnService(i int) string    { return fmt.Sprintf("own-%05d", i) }
func SharedService(g int) string { return fmt.Sprintf("shared-%04d", g) }

// Generate returns a catalog of n routes. Tool Service URLs are
// http://127.0.0.1:9/<service> (never called by the benchmarks).
func Generate(n int) *Catalog {
	c := Routes(n)
	c.Manifests = make(map[string]*registry.Manifest, len(c.Services))
	for _, s := range c.Services {
		tools := OwnTools
		if strings.HasPrefix(s.Name, "shared-") {
			tools = SharedTools
		}
		c.Manifests[s.Name] = Manifest(s.Name, tools, 0)
	}
	return c
}

// Routes returns the catalog of n routes without its manifests (enough for
// the xDS translation).
func Routes(n int) *Catalog {
	c := &Catalog{}
	svc := func(name string) registry.ToolService {
		return registry.ToolService{Name: name, URL: "http://127.0.0.1:9/" + name}
	}
	shared := make([]registry.ToolService, Shared(n))
	for g := range shared {
		shared[g] = svc(SharedService(g))
	}
	for i := range n {
		own := svc(OwnService(i))
		c.Services = append(c.Services, own)
		c.Listing.Routes = append(c.Listing.Routes, registry.Route{
			Key:          RouteKey(i),
			Description:  fmt.Sprintf("Tools of team %d", i),
			ToolServices: []registry.ToolService{own, shared[i%len(shared)]},
		})
	}
	c.Services = append(c.Services, shared...)
	return c
}

// RoutesOf returns the keys of the routes that use Tool Service name.
func (c *Catalog) RoutesOf(name string) []string {
	var keys []string
	for _, r := range c.Listing.Routes {
		for _, s := range r.ToolServices {
			if s.Name == name {
				keys = append(keys, r.Key)
			}
		}
	}
	return keys
}

// RouteTools is the number of route-tool pairs the catalog serves.
func (c *Catalog) RouteTools() int {
	n := 0
	for _, r := range c.Listing.Routes {
		for _, s := range r.ToolServices {
			n += len(c.Manifests[s.Name].Tools)
		}
	}
	return n
}

// Tools is the number of distinct tools (over all Tool Services).
func (c *Catalog) Tools() int {
	n := 0
	for _, m := range c.Manifests {
		n += len(m.Tools)
	}
	return n
}

// Manifest returns the manifest of Tool Service svc with n tools. rev
// changes every description (a new revision of the same service).
func Manifest(svc string, n, rev int) *registry.Manifest {
	m := &registry.Manifest{Tools: make([]registry.ManifestTool, n)}
	for j := range m.Tools {
		m.Tools[j] = Tool(svc, j, rev)
	}
	return m
}

var (
	domains = []string{"crm", "billing", "tickets", "calendar", "files", "search", "inventory", "hr", "analytics", "deploy", "email", "chat"}
	nouns   = []string{"contact", "invoice", "incident", "event", "document", "query", "item", "employee", "report", "release", "message", "channel", "account", "order", "project"}
	verbs   = []string{"get", "list", "search", "create", "update", "delete", "export", "archive", "assign", "summarize"}
	enums   = [][]string{
		{"open", "pending", "closed"},
		{"low", "normal", "high", "urgent"},
		{"asc", "desc"},
		{"json", "csv", "pdf", "xlsx"},
		{"day", "week", "month", "quarter", "year"},
	}
	words = strings.Fields(`the of each result returned by this tool is filtered by the caller's
		permissions and includes only records the workspace may read; fields that are
		not requested are left out to keep responses small, and timestamps are RFC 3339
		in UTC unless a time zone is given`)
)

// Tool returns tool j of Tool Service svc at revision rev. Its name is
// unique across the catalog (it starts with the service's suffix); its input
// schema is one of three shapes chosen by j: small (~300 B), nested
// (~1 KB) or large (~3 KB).
func Tool(svc string, j, rev int) registry.ManifestTool {
	id := svc[strings.LastIndexByte(svc, '-')+1:]
	if strings.HasPrefix(svc, "shared") {
		id = "g" + id
	} else {
		id = "o" + id
	}
	d, nn, v := domains[j%len(domains)], nouns[(j/3)%len(nouns)], verbs[(j/7)%len(verbs)]
	name := fmt.Sprintf("%s_%s_%s_%s_%02d", id, d, nn, v, j)
	var desc strings.Builder
	fmt.Fprintf(&desc, "%s the %s %ss of the %s system (revision %d). ", strings.ToUpper(v[:1])+v[1:], d, nn, d, rev)
	for k := range 12 + j%30 {
		desc.WriteString(words[(j+k)%len(words)])
		desc.WriteByte(' ')
	}
	readOnly := v == "get" || v == "list" || v == "search" || v == "export" || v == "summarize"
	ann, _ := json.Marshal(map[string]any{
		"title":           fmt.Sprintf("%s %s (%s)", v, nn, d),
		"readOnlyHint":    readOnly,
		"destructiveHint": v == "delete" || v == "archive",
		"idempotentHint":  readOnly,
		"openWorldHint":   d == "search" || d == "email",
	})
	return registry.ManifestTool{
		Name:        name,
		Version:     fmt.Sprintf("1.%d.0", rev),
		Title:       fmt.Sprintf("%s %s", d, nn),
		Description: strings.TrimSpace(desc.String()),
		InputSchema: schema(name, nn, j),
		Annotations: ann,
	}
}

// schema returns the input schema of tool name: distinct per tool (its
// property descriptions name it), so every schema compiles on its own.
func schema(name, noun string, j int) json.RawMessage {
	str := func(desc string, minLen int) map[string]any {
		return map[string]any{"type": "string", "minLength": minLen, "maxLength": 256, "description": desc}
	}
	enum := func(k int) map[string]any {
		return map[string]any{"type": "string", "enum": enums[k%len(enums)], "description": "one of the listed values"}
	}
	props := map[string]any{
		noun + "_id": str(fmt.Sprintf("identifier of the %s that %s acts on", noun, name), 1),
		"limit":      map[string]any{"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
	}
	required := []string{noun + "_id"}
	switch j % 3 {
	case 1, 2:
		props["status"] = enum(j)
		props["filter"] = map[string]any{
			"type":        "object",
			"description": "conditions every returned " + noun + " meets",
			"properties": map[string]any{
				"created_after":  map[string]any{"type": "string", "format": "date-time"},
				"created_before": map[string]any{"type": "string", "format": "date-time"},
				"owner":          str("user id or email of the owner", 3),
				"priority":       enum(j + 1),
				"tags":           map[string]any{"type": "array", "items": str("tag", 1), "maxItems": 20, "uniqueItems": true},
			},
			"additionalProperties": false,
		}
		props["sort"] = map[string]any{"type": "object", "properties": map[string]any{
			"field": map[string]any{"type": "string", "enum": []string{"created", "updated", "name", "priority"}},
			"order": enum(2),
		}, "required": []string{"field"}}
		if j%3 == 1 {
			break
		}
		// The large shape: a batch of nested records.
		props["items"] = map[string]any{
			"type": "array", "minItems": 1, "maxItems": 100,
			"description": "the " + noun + "s to write in one request",
			"items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name":        str("display name", 1),
					"description": str("free text shown to people", 0),
					"format":      enum(3),
					"period":      enum(4),
					"amount":      map[string]any{"type": "number", "minimum": 0, "exclusiveMaximum": 1e9},
					"address": map[string]any{"type": "object", "properties": map[string]any{
						"street":  str("street and number", 1),
						"city":    str("city", 1),
						"country": map[string]any{"type": "string", "pattern": "^[A-Z]{2}$"},
						"zip":     str("postal code", 3),
					}, "required": []string{"city", "country"}},
					"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "maxProperties": 16},
				},
				"required":             []string{"name"},
				"additionalProperties": false,
			},
		}
		props["dry_run"] = map[string]any{"type": "boolean", "default": false, "description": "validate without writing"}
		required = append(required, "items")
	}
	b, err := json.Marshal(map[string]any{
		"type": "object", "properties": props, "required": required, "additionalProperties": false,
		"description": "arguments of " + name,
	})
	if err != nil {
		panic(err)
	}
	return b
}
