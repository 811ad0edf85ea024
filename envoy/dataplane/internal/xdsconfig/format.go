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
// "-").
func (op *operator) value(c *FmtContext) (s string, ok bool) {
	str := func(s string) (string, bool) { return s, s != "" } // "": unset
	switch op.cmd {
	case "RESPONSE_CODE":
		return strconv.Itoa(c.Code), true
	case "RESPONSE_FLAGS":
		return str(c.Flags.String())
	case "RESPONSE_CODE_DETAILS":
		return str(c.Details)
	case "LOCAL_REPLY_BODY":
		return c.LocalBody, true
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
			return "", false
		}
		return c.Start.UTC().Format("2006-01-02T15:04:05.000Z"), true
	case "REQ", "RESP":
		h := c.ReqH
		if op.cmd == "RESP" {
			h = c.RespH
		}
		if h == nil {
			return "", false
		}
		v, ok := h.Get(op.main)
		if !ok && op.alt != "" {
			v, ok = h.Get(op.alt)
		}
		return v, ok
	case "DYNAMIC_METADATA":
		return metadataValue(c.Meta, op.ns, op.path)
	}
	return "", false
}

// metadataValue is MetadataFormatter: a string value renders unquoted, any
// other value as compact JSON; a missing value is unset.
func metadataValue(meta map[string]*structpb.Struct, ns string, path []string) (string, bool) {
	v, ok := lookupMetadata(meta, ns, path)
	if !ok {
		return "", false
	}
	if sv, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return sv.StringValue, true
	}
	b, err := marshalJSON(v.AsInterface())
	return string(b), err == nil
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
			v, ok := p.op.value(c)
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

// BodyFormat is a compiled SubstitutionFormatString: the text formatter and
// the content type (local_reply.cc BodyFormatter: content_type if set, else
// text/plain). json_format is not emulated: toolmesh's mappers write their
// JSON as text formats.
type BodyFormat struct {
	Text        *TextFormat
	ContentType string
}

// DefaultBodyFormat is BodyFormatter's default: "%LOCAL_REPLY_BODY%" as
// Text/plain.
var DefaultBodyFormat = &BodyFormat{
	Text:        &TextFormat{parts: []fmtPart{{op: &operator{cmd: "LOCAL_REPLY_BODY", maxLen: -1}}}},
	ContentType: "text/plain",
}
