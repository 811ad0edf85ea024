package registry

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/toolmesh/toolmesh/internal/config"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// ListingDecoder decodes Portal listings written as JSON or YAML. The zero
// value ignores unknown fields without a word, as [DecodeListing] does.
//
// Unknown fields are ignored by default so that a Portal that learns a new
// field does not freeze every replica on its last listing (a failed listing
// changes nothing); Strict restores rejection for operators who prefer it.
type ListingDecoder struct {
	// Strict rejects a listing with a field the decoder does not know.
	Strict bool
	// OnUnknownField, when set, is called for every unknown field of a
	// listing that is otherwise decoded (not in Strict mode), in document
	// order. See [NewUnknownFieldReporter].
	OnUnknownField func(UnknownField)
}

// UnknownField is a field of a listing that the decoder does not know.
type UnknownField struct {
	// Path locates the field in the document: routes[2].toolServices[0].protocl.
	Path string
	// Field is Path without indices (routes.toolServices.protocl): the same
	// for every route, so it is a bounded metric label and warning key.
	Field string
	// Line and Column are the field's 1-based position; 0 when unknown.
	Line, Column int
}

// ListingError is an invalid listing: every problem found, each with its
// position in the document where it could be told.
type ListingError struct {
	// Source names the document (a file path or URL) in Error; the Source
	// that read the document sets it.
	Source   string
	Problems []ListingProblem
}

// ListingProblem is one problem of a listing. Line and Column are 1-based;
// 0 means unknown (Column 0 with a Line: the line only).
type ListingProblem struct {
	Line, Column int
	Err          error
}

// Error renders each problem on its own line as source:line:column: problem,
// the form editors and CI annotators jump to.
func (e *ListingError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.prefix(e.Source))
		b.WriteString(p.Err.Error())
	}
	return b.String()
}

// Unwrap returns the problems' errors.
func (e *ListingError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p.Err
	}
	return errs
}

func (p ListingProblem) prefix(source string) string {
	switch {
	case source != "" && p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("%s:%d:%d: ", source, p.Line, p.Column)
	case source != "" && p.Line > 0:
		return fmt.Sprintf("%s:%d: ", source, p.Line)
	case source != "":
		return source + ": "
	case p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("line %d, column %d: ", p.Line, p.Column)
	case p.Line > 0:
		return fmt.Sprintf("line %d: ", p.Line)
	}
	return ""
}

// WithSource sets the source of a *ListingError in err, if any, and returns err.
func WithSource(err error, source string) error {
	var le *ListingError
	if errors.As(err, &le) {
		le.Source = source
	}
	return err
}

// Decode decodes a Portal listing written as JSON or YAML (chosen by
// content: a document whose first non-blank byte is '{' is JSON) and
// validates it with [Listing.Validate], filling in the defaults. A document
// without a "routes" field is an error, so a Portal answering {} by mistake
// cannot remove every route. A failure is a *[ListingError] that gives, for
// each problem, its line and column: syntax errors where the parser reports
// them, and the field a validation error names.
func (d ListingDecoder) Decode(data []byte) (*Listing, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, &ListingError{Problems: []ListingProblem{{Err: errors.New("decode listing: empty document")}}}
	}
	isJSON := trimmed[0] == '{'

	// The node tree carries the positions; the structs carry none.
	var doc yaml3.Node
	var root *yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err == nil && len(doc.Content) == 1 {
		root = doc.Content[0]
	} else if err != nil && !isJSON {
		return nil, &ListingError{Problems: []ListingProblem{{Line: yamlErrLine(err), Err: fmt.Errorf("decode listing yaml: %s", yamlLineRE.ReplaceAllString(err.Error(), ""))}}}
	}
	var w walker
	if root != nil {
		// Aliases are walked where they are used; the budget stops a
		// document that expands them exponentially (no legitimate listing
		// comes near it).
		w.yaml, w.budget = !isJSON, 10*len(data)+10_000
		w.walk(root, reflect.TypeFor[Listing](), "", "")
		if d.Strict {
			for _, u := range w.unknown {
				w.problems = append(w.problems, ListingProblem{Line: u.Line, Column: u.Column,
					Err: fmt.Errorf("%s: unknown field %q", u.Path, u.Path[strings.LastIndexAny(u.Path, ".]")+1:])})
			}
		}
		if len(w.problems) > 0 {
			sortProblems(w.problems)
			return nil, &ListingError{Problems: w.problems}
		}
	}

	var l Listing
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		if d.Strict {
			dec.DisallowUnknownFields() // only matters when the walker could not run
		}
		if err := dec.Decode(&l); err != nil {
			return nil, jsonProblem(data, err)
		}
		end := int(dec.InputOffset())
		if _, err := dec.Token(); err != io.EOF {
			end += len(data[end:]) - len(bytes.TrimLeft(data[end:], " \t\r\n"))
			line, col := lineCol(data, end)
			return nil, &ListingError{Problems: []ListingProblem{{Line: line, Column: col,
				Err: errors.New("decode listing json: trailing data after the listing")}}}
		}
	} else {
		unmarshal := yaml.Unmarshal
		if d.Strict {
			unmarshal = yaml.UnmarshalStrict
		}
		if err := unmarshal(data, &l); err != nil {
			// The walker caught what it can place; what is left has no position.
			return nil, &ListingError{Problems: []ListingProblem{{Err: fmt.Errorf("decode listing yaml: %s", cleanYAMLErr(err))}}}
		}
	}
	if l.Routes == nil {
		p := ListingProblem{Err: errors.New(`decode listing: missing "routes"`)}
		if root != nil {
			p.Line, p.Column = root.Line, root.Column
		}
		return nil, &ListingError{Problems: []ListingProblem{p}}
	}
	if err := l.Validate(); err != nil {
		return nil, locate(root, err)
	}
	if d.OnUnknownField != nil { // only for a listing that is used
		for _, u := range w.unknown {
			d.OnUnknownField(u)
		}
	}
	return &l, nil
}

// walker checks a node tree against the listing's Go types: it collects the
// unknown fields, and the problems it can place that decoding would report
// without a position (wrong kinds, bad durations, YAML duplicate keys).
type walker struct {
	yaml     bool // YAML rules for scalars and duplicates, else JSON's
	budget   int  // nodes left to visit
	unknown  []UnknownField
	problems []ListingProblem
}

var durationType = reflect.TypeFor[config.Duration]()

func (w *walker) fail(n *yaml3.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	path = cmp.Or(path, "listing")
	msg = path + ": " + msg
	w.problems = append(w.problems, ListingProblem{Line: n.Line, Column: n.Column, Err: errors.New(msg)})
}

// walk checks node n against type t; path locates n (routes[0].key) and
// field is path without indices.
func (w *walker) walk(n *yaml3.Node, t reflect.Type, path, field string) {
	for n.Kind == yaml3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if w.budget--; w.budget == 0 {
		w.fail(n, path, "the document expands too many aliases")
	}
	if w.budget <= 0 {
		return
	}
	if n.Kind == yaml3.ScalarNode && n.Tag == "!!null" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		w.duration(n, path)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml3.MappingNode {
			w.fail(n, path, "want an object, got %s", nodeKind(n))
			return
		}
		w.object(n, t, path, field)
	case t.Kind() == reflect.Map:
		if n.Kind != yaml3.MappingNode {
			w.fail(n, path, "want an object, got %s", nodeKind(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			w.walk(n.Content[i+1], t.Elem(), join(path, k), join(field, k))
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		if n.Kind != yaml3.SequenceNode {
			w.fail(n, path, "want a list, got %s", nodeKind(n))
			return
		}
		for i, c := range n.Content {
			w.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), field)
		}
	case t.Kind() == reflect.Interface, t.Kind() == reflect.Slice:
		// any value
	default:
		if n.Kind != yaml3.ScalarNode {
			w.fail(n, path, "want a %s, got %s", scalarName(t), nodeKind(n))
			return
		}
		w.scalar(n, t, path)
	}
}

// object checks a mapping against struct type t.
func (w *walker) object(n *yaml3.Node, t reflect.Type, path, field string) {
	fields := jsonFields(t)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" { // YAML merge key: the merged mappings belong here
			if v.Kind == yaml3.SequenceNode {
				for _, c := range v.Content {
					w.walk(c, t, path, field)
				}
			} else {
				w.walk(v, t, path, field)
			}
			continue
		}
		name := k.Value
		if w.yaml && seen[name] {
			w.fail(k, join(path, name), "field is set twice")
		}
		seen[name] = true
		ft, ok := fields[name]
		if !ok {
			w.unknown = append(w.unknown, UnknownField{Path: join(path, name), Field: join(field, name), Line: k.Line, Column: k.Column})
			continue
		}
		w.walk(v, ft, join(path, name), join(field, name))
	}
}

// scalar checks what the decoders would refuse, so the refusal has a position.
func (w *walker) scalar(n *yaml3.Node, t reflect.Type, path string) {
	switch t.Kind() {
	case reflect.Bool:
		if n.Tag != "!!bool" {
			w.fail(n, path, "want true or false, got %q", n.Value)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); n.Tag != "!!int" || err != nil {
			w.fail(n, path, "want an integer, got %q", n.Value)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); n.Tag != "!!int" || err != nil {
			w.fail(n, path, "want an integer from 0 to %d, got %q", uint64(1)<<t.Bits()-1, n.Value)
		}
	case reflect.String:
		// JSON needs a string; YAML's scalars all become strings here.
		if !w.yaml && n.Tag != "!!str" {
			w.fail(n, path, "want a string, got %s", n.Value)
		}
	}
}

// duration applies config.Duration's own rules to a scalar.
func (w *walker) duration(n *yaml3.Node, path string) {
	if n.Kind != yaml3.ScalarNode {
		w.fail(n, path, "want a duration string such as \"1s\", got %s", nodeKind(n))
		return
	}
	raw := []byte(n.Value)
	if n.Tag == "!!str" {
		raw, _ = json.Marshal(n.Value)
	}
	var d config.Duration
	if err := d.UnmarshalJSON(raw); err != nil {
		w.fail(n, path, "%v", err)
	}
}

// jsonFields maps the JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		name = cmp.Or(name, f.Name)
		m[name] = f.Type
	}
	return m
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func nodeKind(n *yaml3.Node) string {
	switch n.Kind {
	case yaml3.MappingNode:
		return "an object"
	case yaml3.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func scalarName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	}
	return "number"
}

func sortProblems(ps []ListingProblem) {
	// Document order; a stable insertion sort, the lists are short.
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && (ps[j].Line < ps[j-1].Line || ps[j].Line == ps[j-1].Line && ps[j].Column < ps[j-1].Column); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// lineCol turns a byte offset of data into a 1-based line and column.
func lineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte{'\n'})
	return line, off - bytes.LastIndexByte(data[:off], '\n')
}

// jsonProblem places an encoding/json error.
func jsonProblem(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	msg := err.Error()
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offset is just past the bad byte
	case errors.As(err, &te):
		off = te.Offset
		if te.Field != "" {
			msg = fmt.Sprintf("%s: cannot decode JSON %s into %s", te.Field, te.Value, te.Type)
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(data))
	}
	p := ListingProblem{Err: fmt.Errorf("decode listing json: %s", strings.TrimPrefix(msg, "json: "))}
	if off >= 0 {
		p.Line, p.Column = lineCol(data, int(off))
	}
	return &ListingError{Problems: []ListingProblem{p}}
}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

// yamlErrLine is the line of a YAML syntax error, 0 when it names none.
func yamlErrLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil && m[1] != "" {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// cleanYAMLErr drops the JSON plumbing that sigs.k8s.io/yaml's errors spell out.
func cleanYAMLErr(err error) string {
	msg := err.Error()
	for _, noise := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: ", "yaml: "} {
		msg = strings.ReplaceAll(msg, noise, "")
	}
	return msg
}
