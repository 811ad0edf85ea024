package xdsconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// This file emulates Envoy's substitution format strings
// (source/common/formatter/substitution_formatter.cc), used by
// local_reply_config body formats and header values. Only the command
// operators toolmesh needs are emulated; any other operator is a
// configuration error, as an unknown operator is in Envoy ("Not supported
// field in StreamInfo").

// commandRe is Envoy's commandWithArgsRegex: % COMMAND(SUBCOMMAND):LENGTH %.
var commandRe = regexp.MustCompile(`^%((?:[A-Z]|[0-9]|_)+)(?:\((.*?)\))?(?::([0-9]+))?%`)

// FmtContext is what a format string can see of one stream.
type FmtContext struct {
	ReqH, RespH  *headers.Map
	Code         int
	Flags        rules.ResponseFlags
	Details      string
	LocalBody    string
	Meta         map[string]*structpb.Struct
	Protocol     string
	Cluster      string
	UpstreamHost string
	RouteName    string
	Start        time.Time
}

// operator is one parsed command operator.
type operator struct {
	cmd    string
	arg    string
	maxLen int // -1: none
	// DYNAMIC_METADATA
	ns   string
	path []string
	// REQ / RESP
	main, alt string
}

// fmtPart is a literal (op == nil) or an operator.
type fmtPart struct {
	lit string
	op  *operator
}

// TextFormat is a parsed text format string.
type TextFormat struct {
	parts     []fmtPart
	OmitEmpty bool
}

// ParseTextFormat parses a format string the way SubstitutionFormatParser::parse
// does: "%%" is a literal '%', every other '%' must start a valid command.
func ParseTextFormat(s string) (*TextFormat, error) {
	f := &TextFormat{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.parts = append(f.parts, fmtPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for pos := 0; pos < len(s); {
		if s[pos] != '%' {
			lit.WriteByte(s[pos])
			pos++
			continue
		}
		if pos+1 < len(s) && s[pos+1] == '%' {
			lit.WriteByte('%')
			pos += 2
			continue
		}
		flush()
		m := commandRe.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			return nil, fmt.Errorf("incorrect configuration: %q: couldn't find valid command at position %d", s, pos)
		}
		op := &operator{cmd: s[pos+m[2] : pos+m[3]], maxLen: -1}
		hasArg := m[4] >= 0
		if hasArg {
			op.arg = s[pos+m[4] : pos+m[5]]
		}
		if m[6] >= 0 {
			n, err := strconv.ParseUint(s[pos+m[6]:pos+m[7]], 10, 31)
			if err != nil {
				return nil, fmt.Errorf("incorrect configuration: %q: couldn't find valid command at position %d", s, pos)
			}
			op.maxLen = int(n)
		}
		if err := op.compile(hasArg); err != nil {
			return nil, err
		}
		f.parts = append(f.parts, fmtPart{op: op})
		pos += m[1]
	}
	flush()
	return f, nil
}

func (op *operator) compile(hasArg bool) error {
	noArg := func() error {
		if hasArg {
			return fmt.Errorf("command operator %s does not take a parameter", op.cmd)
		}
		return nil
	}
	switch op.cmd {
	case "RESPONSE_CODE", "RESPONSE_FLAGS", "RESPONSE_CODE_DETAILS", "LOCAL_REPLY_BODY", "PROTOCOL",
		"UPSTREAM_CLUSTER", "UPSTREAM_HOST", "ROUTE_NAME", "START_TIME":
		return noArg()
	case "DYNAMIC_METADATA":
		parts := strings.Split(op.arg, ":")
		if !hasArg || parts[0] == "" {
			return fmt.Errorf("command operator DYNAMIC_METADATA needs a namespace")
		}
		op.ns, op.path = parts[0], parts[1:]
		return nil
	case "REQ", "RESP":
		if !hasArg || op.arg == "" {
			return fmt.Errorf("command operator %s needs a header name", op.cmd)
		}
		main, alt, _ := strings.Cut(op.arg, "?")
		op.main, op.alt = strings.ToLower(main), strings.ToLower(alt)
		return nil
	}
	return fmt.Errorf("command operator %%%s%% is not supported by the local data plane", op.cmd)
}

// Value evaluates the operator. ok is false for an unset value (rendered
// "-" in text formats, null in JSON formats). typed is the JSON value when
// the operator has one (numbers, metadata values).
func (op *operator) value(c *FmtContext) (s string, typed any, ok bool) {
	str := func(s string) (string, any, bool) { return s, s, s != "" } // "": unset
	switch op.cmd {
	case "RESPONSE_CODE":
		return strconv.Itoa(c.Code), float64(c.Code), true
	case "RESPONSE_FLAGS":
		return str(c.Flags.String())
	case "RESPONSE_CODE_DETAILS":
		return str(c.Details)
	case "LOCAL_REPLY_BODY":
		return c.LocalBody, c.LocalBody, true
	case "PROTOCOL":
		return str(c.Protocol)
	case "UPSTREAM_CLUSTER":
		return str(c.Cluster)
	case "UPSTREAM_HOST":
		return str(c.UpstreamHost)
	case "ROUTE_NAME":
		return str(c.RouteName)
	case "START_TIME":
		if c.Start.IsZero() {
			return "", nil, false
		}
		t := c.Start.UTC().Format("2006-01-02T15:04:05.000Z")
		return t, t, true
	case "REQ", "RESP":
		h := c.ReqH
		if op.cmd == "RESP" {
			h = c.RespH
		}
		if h == nil {
			return "", nil, false
		}
		v, ok := h.Get(op.main)
		if !ok && op.alt != "" {
			v, ok = h.Get(op.alt)
		}
		return v, v, ok
	case "DYNAMIC_METADATA":
		return metadataValue(c.Meta, op.ns, op.path)
	}
	return "", nil, false
}

// metadataValue is MetadataFormatter: a string value renders unquoted, any
// other value as compact JSON; a missing value is unset.
func metadataValue(meta map[string]*structpb.Struct, ns string, path []string) (string, any, bool) {
	v, ok := lookupMetadata(meta, ns, path)
	if !ok {
		return "", nil, false
	}
	if sv, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return sv.StringValue, sv.StringValue, true
	}
	typed := v.AsInterface()
	b, err := marshalJSON(typed)
	if err != nil {
		return "", nil, false
	}
	return string(b), typed, true
}

func truncate(s string, n int) string {
	if n >= 0 && len(s) > n {
		return s[:n]
	}
	return s
}

// Format renders the format string. One operator alone (the default
// "%LOCAL_REPLY_BODY%") is its value, not copied (a local reply body can be
// megabytes).
func (f *TextFormat) Format(c *FmtContext) string {
	var b strings.Builder
	for _, p := range f.parts {
		s := p.lit
		if p.op != nil {
			v, _, ok := p.op.value(c)
			switch {
			case ok:
				s = truncate(v, p.op.maxLen)
			case !f.OmitEmpty:
				s = rules.UnspecifiedValue
			}
			if len(f.parts) == 1 {
				return s
			}
		}
		b.WriteString(s)
	}
	return b.String()
}

// jsonFormat is a parsed json_format Struct (JsonFormatterImpl): keys are
// emitted sorted (encoding/json sorts map keys); a string value with exactly
// one command operator keeps the operator's type, any other string with a
// '%' is a string template; the output ends with a newline.
type jsonFormat struct {
	root      jsonNode
	OmitEmpty bool
}

type jsonNode struct {
	object  map[string]jsonNode // a struct (non-nil)
	list    []jsonNode          // a list (isList)
	isList  bool
	literal json.RawMessage // a constant, encoded once
	tmpl    *TextFormat     // a template string
}

func ParseJSONFormat(s *structpb.Struct) (*jsonFormat, error) {
	root, err := compileJSONValue(structpb.NewStructValue(s))
	if err != nil {
		return nil, err
	}
	return &jsonFormat{root: root}, nil
}

func compileJSONValue(v *structpb.Value) (jsonNode, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		n := jsonNode{object: make(map[string]jsonNode, len(k.StructValue.GetFields()))}
		for key, e := range k.StructValue.GetFields() {
			c, err := compileJSONValue(e)
			if err != nil {
				return n, err
			}
			n.object[key] = c
		}
		return n, nil
	case *structpb.Value_ListValue:
		n := jsonNode{isList: true}
		for _, e := range k.ListValue.GetValues() {
			c, err := compileJSONValue(e)
			if err != nil {
				return n, err
			}
			n.list = append(n.list, c)
		}
		return n, nil
	case *structpb.Value_StringValue:
		if !strings.Contains(k.StringValue, "%") {
			return jsonNode{literal: rawJSON(k.StringValue)}, nil
		}
		t, err := ParseTextFormat(k.StringValue)
		return jsonNode{tmpl: t}, err
	default:
		return jsonNode{literal: rawJSON(v.AsInterface())}, nil
	}
}

func (f *jsonFormat) Format(c *FmtContext) string {
	return string(rawJSON(f.value(f.root, c))) + "\n"
}

// value is the node's value for one stream: maps, lists and values
// encoded each on its own (a value that cannot be encoded is null).
func (f *jsonFormat) value(n jsonNode, c *FmtContext) any {
	switch {
	case n.object != nil:
		m := make(map[string]any, len(n.object))
		for k, v := range n.object {
			if !f.OmitEmpty || v.tmpl == nil || v.tmpl.hasValue(c) {
				m[k] = f.value(v, c)
			}
		}
		return m
	case n.isList:
		l := make([]any, len(n.list))
		for i, e := range n.list {
			l[i] = f.value(e, c)
		}
		return l
	case n.tmpl != nil:
		if len(n.tmpl.parts) == 1 && n.tmpl.parts[0].op != nil {
			op := n.tmpl.parts[0].op
			s, typed, ok := op.value(c)
			switch {
			case !ok:
				return nil
			case op.maxLen >= 0:
				return truncate(s, op.maxLen)
			}
			return rawJSON(typed)
		}
		return (&TextFormat{parts: n.tmpl.parts, OmitEmpty: f.OmitEmpty}).Format(c)
	}
	return n.literal
}

func (t *TextFormat) hasValue(c *FmtContext) bool {
	if len(t.parts) != 1 || t.parts[0].op == nil {
		return true
	}
	_, _, ok := t.parts[0].op.value(c)
	return ok
}

// rawJSON is v encoded, null if it cannot be.
func rawJSON(v any) json.RawMessage {
	b, err := marshalJSON(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// marshalJSON encodes without HTML escaping, as Envoy's serializer does.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// BodyFormat is a compiled SubstitutionFormatString: the text or JSON
// formatter and the content type it implies (local_reply.cc BodyFormatter:
// content_type if set, else application/json for json_format, else
// Text/plain).
type BodyFormat struct {
	Text        *TextFormat
	json        *jsonFormat
	ContentType string
}

func (b *BodyFormat) format(c *FmtContext) string {
	if b.json != nil {
		return b.json.Format(c)
	}
	return b.Text.Format(c)
}

// DefaultBodyFormat is BodyFormatter's default: "%LOCAL_REPLY_BODY%" as
// Text/plain.
var DefaultBodyFormat = &BodyFormat{
	Text:        &TextFormat{parts: []fmtPart{{op: &operator{cmd: "LOCAL_REPLY_BODY", maxLen: -1}}}},
	ContentType: "text/plain",
}
