package search

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
)

// The deterministic generator of the evaluation catalog. Each domain names
// its tools in its own house style, as separate teams do, so the catalog has
// near-duplicates such as crm.contacts.create next to crm.contact_create_bulk
// and hr_employee_get next to hr_employees_list. Everything is derived from
// the tables in evaldomains*_test.go; nothing is random.

// nameStyle is how one domain spells its tool names.
type nameStyle int

const (
	styleDotPlural nameStyle = iota // crm.contacts.create, crm.contact_create_bulk
	styleSnake                      // hr_employee_get, hr_employees_list
	styleCamel                      // billingInvoiceCreate, billingInvoicesList
	styleKebab                      // inventory-stock-level-adjust
	styleVerbFirst                  // shop_create_order, shop_list_orders
	styleDotCamel                   // payments.paymentMethod.setDefault
)

type genDomain struct {
	key      string // name prefix
	label    string // how descriptions refer to the domain
	style    nameStyle
	entities []genEntity
}

type genEntity struct {
	one, many string // human words, "leave request" / "leave requests"
	gloss     string // what the entity is, one sentence
	fields    string // field specs
	extras    []string
}

// commonActions are generated for every entity; collection actions are
// spelled with the plural in styles that distinguish.
var commonActions = []struct {
	verb       string
	collection bool
}{
	{"create", false}, {"create_bulk", true}, {"get", false}, {"list", true},
	{"update", false}, {"delete", false}, {"search", true}, {"export", true},
	{"import", true}, {"archive", false}, {"restore", false}, {"count", true},
}

// evalRegions prefix the whole catalog once per region when the generator is
// scaled up for the latency benchmark.
var evalRegions = []string{"", "eu", "apac", "latam", "mea", "gov"}

var validToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// generateCatalog returns the evaluation catalog repeated over the first
// `regions` regions (1 gives the committed catalog of about 2,100 tools).
func generateCatalog(regions int) []Doc {
	var docs []Doc
	seen := map[string]bool{}
	for r := range regions {
		region := evalRegions[r]
		for _, d := range evalDomains {
			for _, e := range d.entities {
				for _, a := range commonActions {
					docs = append(docs, genCommon(d, e, a.verb, a.collection, region))
				}
				for _, x := range e.extras {
					docs = append(docs, genExtra(d, e, x, region))
				}
			}
		}
	}
	for _, doc := range docs {
		if seen[doc.Name] || !validToolName.MatchString(doc.Name) {
			panic(fmt.Sprintf("evaluation catalog: bad or duplicate tool name %q", doc.Name))
		}
		seen[doc.Name] = true
	}
	return docs
}

func genCommon(d genDomain, e genEntity, verb string, collection bool, region string) Doc {
	name := toolName(d, e, verb, collection, region)
	v := nameVariant(name)
	one, many := e.one, e.many
	idParam := param{name: snake(one) + "_id", desc: "ID of the " + one + "."}
	fields := parseParams(e.fields, one)
	var desc string
	var props []param
	required := []string{idParam.name}
	switch verb {
	case "create":
		desc = pick(v, "Create a new %[1]s in %[3]s. %[4]s", "Adds a %[1]s to %[3]s and returns it with its ID. %[4]s", "Create a %[1]s. %[4]s Returns the new %[1]s.")
		props, required = fields, []string{fields[0].name}
	case "create_bulk":
		desc = pick(v, "Create many %[2]s in one call (up to 500). Each item takes the same fields as a single %[1]s.", "Bulk-create %[2]s in %[3]s; returns the created records and per-item errors.")
		props, required = []param{{name: "items", typ: "array", desc: "The " + many + " to create.", items: fields}}, []string{"items"}
	case "get":
		desc = pick(v, "Get one %[1]s by ID, with all its fields. %[4]s", "Fetch the details of a single %[1]s from %[3]s.", "Return a %[1]s by its ID. %[4]s")
		props = []param{idParam}
	case "list":
		desc = pick(v, "List %[2]s in %[3]s, newest first, with cursor paging and an optional status filter.", "Return a page of %[2]s. Use cursor to fetch the next page. %[4]s")
		props, required = []param{
			{name: "page_size", typ: "integer", desc: "Maximum number of " + many + " to return (1-100)."},
			{name: "cursor", desc: "Opaque cursor from the previous page."},
			{name: "status", desc: "Only " + many + " with this status."},
		}, nil
	case "update":
		desc = pick(v, "Update fields of an existing %[1]s. Only the fields you pass are changed.", "Modify a %[1]s in %[3]s; omitted fields keep their values.")
		props = append([]param{idParam}, fields...)
	case "delete":
		desc = pick(v, "Permanently delete a %[1]s. This cannot be undone.", "Remove a %[1]s from %[3]s for good.")
		props = []param{idParam}
	case "search":
		desc = pick(v, "Full-text search over %[2]s by keyword; returns matches ranked by relevance.", "Find %[2]s in %[3]s whose fields match a text query.")
		props, required = []param{
			{name: "query", desc: "Text to search for."},
			{name: "limit", typ: "integer", desc: "Maximum number of results."},
		}, []string{"query"}
	case "export":
		desc = pick(v, "Export %[2]s to a CSV or JSON file and return a download URL.", "Write all %[2]s matching a date range to a file for download.")
		props, required = []param{
			{name: "format", desc: "File format.", enum: []string{"csv", "json"}},
			{name: "created_after", desc: "Only " + many + " created on or after this date."},
			{name: "created_before", desc: "Only " + many + " created before this date."},
		}, nil
	case "import":
		desc = pick(v, "Import %[2]s from a CSV or JSON file at a URL.", "Load %[2]s into %[3]s from an uploaded spreadsheet file; use dry_run to validate first.")
		props, required = []param{
			{name: "file_url", desc: "URL of the file to import."},
			{name: "format", desc: "File format.", enum: []string{"csv", "json"}},
			{name: "dry_run", typ: "boolean", desc: "Validate without writing."},
		}, []string{"file_url"}
	case "archive":
		desc = pick(v, "Archive a %[1]s so it no longer shows in default lists; it can be restored later.", "Hide a %[1]s without deleting it.")
		props = []param{idParam, {name: "reason", desc: "Why the " + one + " is archived."}}
	case "restore":
		desc = pick(v, "Restore an archived %[1]s so it shows in lists again.", "Un-archive a %[1]s.")
		props = []param{idParam}
	case "count":
		desc = pick(v, "Count %[2]s that match a filter, without returning them.", "Return how many %[2]s exist, optionally filtered by status.")
		props, required = []param{
			{name: "status", desc: "Only count " + many + " with this status."},
			{name: "created_after", desc: "Only count " + many + " created on or after this date."},
		}, nil
	default:
		panic("unknown common action " + verb)
	}
	desc = strings.TrimSpace(fmt.Sprintf(desc, one, many, d.label, e.gloss))
	title := ""
	if v%4 != 0 { // a quarter of the tools declare no title
		if verb == "create_bulk" {
			title = capitalize("create " + many + " in bulk")
		} else if collection {
			title = capitalize(words(verb) + " " + many)
		} else {
			title = capitalize(words(verb) + " " + one)
		}
	}
	return newDoc(d, name, title, desc, props, required, region)
}

func genExtra(d genDomain, e genEntity, spec, region string) Doc {
	parts := strings.SplitN(spec, "|", 3)
	if len(parts) != 3 {
		panic("bad extra action " + spec)
	}
	verb, desc := parts[0], parts[1]
	name := toolName(d, e, verb, false, region)
	props := parseParams(parts[2], e.one)
	var required []string
	if len(props) > 0 {
		required = []string{props[0].name}
	}
	title := ""
	if nameVariant(name)%4 != 0 {
		title = capitalize(words(verb) + " " + e.one)
	}
	return newDoc(d, name, title, desc, props, required, region)
}

func newDoc(d genDomain, name, title, desc string, props []param, required []string, region string) Doc {
	if region != "" {
		desc += " Serves the " + strings.ToUpper(region) + " region."
	}
	camelCase := d.style == styleCamel || d.style == styleDotCamel
	for i := range required {
		required[i] = propName(required[i], camelCase)
	}
	schema := map[string]any{"type": "object", "properties": schemaProps(props, camelCase)}
	if len(required) > 0 {
		schema["required"] = required
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(err)
	}
	return Doc{Name: name, Title: title, Description: desc, InputSchema: raw}
}

func toolName(d genDomain, e genEntity, verb string, collection bool, region string) string {
	noun := e.one
	if collection {
		noun = e.many
	}
	var n string
	switch d.style {
	case styleDotPlural:
		if verb == "create_bulk" {
			n = d.key + "." + snake(e.one) + "_create_bulk"
		} else {
			n = d.key + "." + snake(e.many) + "." + verb
		}
	case styleSnake:
		n = d.key + "_" + snake(noun) + "_" + verb
	case styleCamel:
		n = d.key + pascal(noun) + pascal(words(verb))
	case styleKebab:
		if verb == "create_bulk" {
			verb = "bulk_create"
		}
		n = d.key + "-" + strings.ReplaceAll(snake(e.one), "_", "-") + "-" + strings.ReplaceAll(verb, "_", "-")
	case styleVerbFirst:
		if verb == "create_bulk" {
			verb = "bulk_create"
		}
		n = d.key + "_" + verb + "_" + snake(noun)
	case styleDotCamel:
		n = d.key + "." + lowerFirst(pascal(e.one)) + "." + lowerFirst(pascal(words(verb)))
	}
	if region != "" {
		n = region + "." + n
	}
	return n
}

// param is one input-schema property.
type param struct {
	name, typ, desc string
	enum            []string
	items           []param // object properties of array items
}

var typeNames = map[string]string{"": "string", "int": "integer", "num": "number", "bool": "boolean", "arr": "array", "obj": "object"}

func parseParams(spec, one string) []param {
	var out []param
	for _, s := range strings.Split(spec, ";") {
		if s == "" {
			continue
		}
		parts := strings.SplitN(s, ":", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		p := param{name: parts[0], typ: typeNames[parts[1]], desc: parts[2]}
		if p.typ == "" {
			panic("bad type in " + s)
		}
		if p.desc == "" {
			switch {
			case p.name == snake(one)+"_id":
				p.desc = "ID of the " + one + "."
			case strings.HasSuffix(p.name, "_ids"):
				p.desc = "IDs of the " + words(strings.TrimSuffix(p.name, "_ids")) + "s."
			case strings.HasSuffix(p.name, "_id"):
				p.desc = "ID of the " + words(strings.TrimSuffix(p.name, "_id")) + "."
			default:
				p.desc = capitalize(words(p.name)) + "."
			}
		}
		out = append(out, p)
	}
	return out
}

func schemaProps(ps []param, camelCase bool) map[string]any {
	props := map[string]any{}
	for _, p := range ps {
		typ := p.typ
		if typ == "" {
			typ = "string"
		}
		s := map[string]any{"type": typ, "description": p.desc}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
		switch {
		case len(p.items) > 0:
			s["items"] = map[string]any{"type": "object", "properties": schemaProps(p.items, camelCase)}
		case typ == "array":
			s["items"] = map[string]any{"type": "string"}
		}
		props[propName(p.name, camelCase)] = s
	}
	return props
}

func propName(n string, camelCase bool) string {
	if !camelCase {
		return n
	}
	return lowerFirst(pascal(words(n)))
}

func nameVariant(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % 1024)
}

func pick(v int, formats ...string) string { return formats[v%len(formats)] }

func snake(s string) string { return strings.ReplaceAll(s, " ", "_") }
func words(s string) string { return strings.ReplaceAll(s, "_", " ") }

func pascal(s string) string {
	var b strings.Builder
	for _, w := range strings.Fields(s) {
		b.WriteString(capitalize(w))
	}
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// marshalCatalog writes docs in the Tool Service manifest shape, one tool per
// line so that a regenerated catalog diffs readably.
func marshalCatalog(docs []Doc) []byte {
	var b bytes.Buffer
	b.WriteString("{\"tools\": [\n")
	for i, d := range docs {
		line, err := json.Marshal(d)
		if err != nil {
			panic(err)
		}
		b.Write(line)
		if i < len(docs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes()
}
