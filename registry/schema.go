package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/toolmesh/toolmesh/registry/argsjson"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaLoc names the one schema document of a compiler. It is hierarchical
// so that a relative reference ("other.json") resolves to another URL, which
// the loader refuses, rather than back to the document itself. Only fragment
// references (#/$defs/...) and the embedded meta-schemas resolve.
const schemaLoc = "toolmesh:///input-schema.json"

// maxArgumentMessages bounds the messages returned for one call, so a huge
// invalid argument object cannot produce a huge error result.
const maxArgumentMessages = 20

var printer = message.NewPrinter(language.English)

// pointerEscaper escapes a JSON Pointer reference token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// noRemote refuses every schema reference the compiler would have to load: a
// Tool Service's schema must not make the gateway fetch URLs or read files.
// The standard meta-schemas are embedded and never reach a loader.
type noRemote struct{}

func (noRemote) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed", url)
}

// compileInputSchema checks that raw is a JSON object schema with
// "type": "object" and compiles it (JSON Schema 2020-12 unless its $schema
// names another draft). Each call gets its own Compiler holding only this
// document, so one tool's schema can never $ref another's: a reference that
// leaves the document reaches noRemote and fails.
func compileInputSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	if obj["type"] != "object" {
		return nil, errors.New(`must have "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemote{})
	if err := c.AddResource(schemaLoc, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	sch, err := c.Compile(schemaLoc)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	// A schema can compile and still loop ({"$ref": "#"}); the library finds
	// the loop only while validating. Catch the unconditional ones now
	// rather than on every call.
	if err := sch.Validate(map[string]any{}); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) || hasRefCycle(ve) {
			return nil, errors.New("$ref cycle: " + oneLine(err.Error()))
		}
	}
	return sch, nil
}

// validateArguments returns readable messages for args that fail sch, such
// as "arguments: missing property 'a'" or "arguments/n: got string, want
// number", sorted; none when args are valid.
func validateArguments(sch *jsonschema.Schema, args json.RawMessage) []string {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := argsjson.Value(args)
	if err != nil {
		return []string{"arguments: not valid JSON"}
	}
	if _, ok := v.(map[string]any); !ok {
		return []string{"arguments: must be an object"}
	}
	err = sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"arguments: " + oneLine(err.Error())}
	}
	var msgs []string
	collectMessages(ve, &msgs)
	if len(msgs) == 0 { // cannot happen: a failing validation has a leaf
		msgs = append(msgs, "arguments: "+oneLine(ve.Error()))
	}
	slices.Sort(msgs)
	msgs = slices.Compact(msgs)
	if len(msgs) > maxArgumentMessages {
		more := len(msgs) - maxArgumentMessages
		msgs = append(msgs[:maxArgumentMessages], fmt.Sprintf("... and %d more", more))
	}
	return msgs
}

// collectMessages walks the error tree and keeps the leaves: they say what is
// wrong; inner nodes only say which keyword (allOf, $ref, ...) led there.
func collectMessages(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectMessages(c, out)
		}
		return
	}
	var loc strings.Builder
	loc.WriteString("arguments")
	for _, tok := range ve.InstanceLocation {
		loc.WriteByte('/')
		loc.WriteString(pointerEscaper.Replace(tok))
	}
	msg := ve.ErrorKind.LocalizedString(printer)
	if _, ok := ve.ErrorKind.(*kind.RefCycle); ok {
		msg = "the tool's input schema loops ($ref cycle) here"
	}
	*out = append(*out, loc.String()+": "+msg)
}

// hasRefCycle reports whether a validation failed on a $ref loop.
func hasRefCycle(ve *jsonschema.ValidationError) bool {
	if _, ok := ve.ErrorKind.(*kind.RefCycle); ok {
		return true
	}
	return slices.ContainsFunc(ve.Causes, hasRefCycle)
}

// oneLine flattens a multi-line library message into one line for reports.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:500], "") + "..."
	}
	return s
}
