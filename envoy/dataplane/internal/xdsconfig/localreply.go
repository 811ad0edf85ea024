package xdsconfig

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// LocalReplyConfig emulates LocalReplyImpl
// (source/common/local_reply/local_reply.cc): mappers are tried in order and
// the first whose filter matches rewrites the reply; the body is then
// formatted with that mapper's body_format_override, or else the global
// body_format, or else "%LOCAL_REPLY_BODY%" as text/plain.
type LocalReplyConfig struct {
	Mappers []*ResponseMapper
	Body    *BodyFormat
}

type ResponseMapper struct {
	Filter     FilterFunc
	Status     int
	body       *string
	Headers    []HeaderAdd
	bodyFormat *BodyFormat
}

// HeaderAdd is a compiled headers_to_add entry. Values are format strings;
// Router::HeaderParser renders unset operators as "" and drops a header
// whose value ends up empty unless keep_empty_value.
type HeaderAdd struct {
	Key       string
	Value     *TextFormat
	Mode      headers.AppendMode
	keepEmpty bool
}

func compileHeadersToAdd(opts []*corev3.HeaderValueOption) ([]HeaderAdd, error) {
	var out []HeaderAdd
	for _, o := range opts {
		key := o.GetHeader().GetKey()
		if !rules.ValidHeaderName(key) {
			return nil, fmt.Errorf("headers_to_add: invalid header name %q", key)
		}
		v := o.GetHeader().GetValue()
		if len(o.GetHeader().GetRawValue()) > 0 {
			v = string(o.GetHeader().GetRawValue())
		}
		f, err := ParseTextFormat(v)
		if err != nil {
			return nil, fmt.Errorf("headers_to_add %q: %w", key, err)
		}
		f.OmitEmpty = true
		out = append(out, HeaderAdd{Key: strings.ToLower(key), Value: f, Mode: rules.ConfigAppendMode(o), keepEmpty: o.GetKeepEmptyValue()})
	}
	return out, nil
}

func ApplyHeadersToAdd(h *headers.Map, adds []HeaderAdd, c *FmtContext) {
	for _, a := range adds {
		v := a.Value.Format(c)
		if v == "" && !a.keepEmpty {
			continue
		}
		h.Apply(a.Mode, a.Key, v)
	}
}

func compileLocalReply(cfg *hcmv3.LocalReplyConfig) (*LocalReplyConfig, error) {
	lr := &LocalReplyConfig{Body: DefaultBodyFormat}
	if cfg == nil {
		return lr, nil
	}
	if cfg.GetBodyFormat() != nil {
		b, err := compileBodyFormat(cfg.GetBodyFormat())
		if err != nil {
			return nil, fmt.Errorf("local_reply_config body_format: %w", err)
		}
		lr.Body = b
	}
	for i, m := range cfg.GetMappers() {
		rm := &ResponseMapper{}
		var err error
		if rm.Filter, err = compileLogFilter(m.GetFilter()); err != nil {
			return nil, fmt.Errorf("local_reply_config mapper %d filter: %w", i, err)
		}
		rm.Status = int(m.GetStatusCode().GetValue()) // unset: 0, the reply's own
		if m.GetBody() != nil {
			b, err := dataSource(m.GetBody())
			if err != nil {
				return nil, fmt.Errorf("local_reply_config mapper %d body: %w", i, err)
			}
			rm.body = &b
		}
		if rm.Headers, err = compileHeadersToAdd(m.GetHeadersToAdd()); err != nil {
			return nil, fmt.Errorf("local_reply_config mapper %d: %w", i, err)
		}
		if m.GetBodyFormatOverride() != nil {
			if rm.bodyFormat, err = compileBodyFormat(m.GetBodyFormatOverride()); err != nil {
				return nil, fmt.Errorf("local_reply_config mapper %d body_format_override: %w", i, err)
			}
		}
		lr.Mappers = append(lr.Mappers, rm)
	}
	return lr, nil
}

func compileBodyFormat(s *corev3.SubstitutionFormatString) (*BodyFormat, error) {
	if len(s.GetFormatters()) > 0 {
		return nil, errors.New("formatter extensions are not emulated")
	}
	b := &BodyFormat{ContentType: s.GetContentType()}
	var err error
	switch f := s.GetFormat().(type) {
	case *corev3.SubstitutionFormatString_TextFormat:
		b.Text, err = ParseTextFormat(f.TextFormat)
	case *corev3.SubstitutionFormatString_TextFormatSource:
		var src string
		if src, err = dataSource(f.TextFormatSource); err == nil {
			b.Text, err = ParseTextFormat(src)
		}
	default:
		return nil, fmt.Errorf("substitution format %T is not emulated", f)
	}
	if err != nil {
		return nil, err
	}
	b.Text.OmitEmpty = s.GetOmitEmptyValues()
	b.ContentType = cmp.Or(b.ContentType, "text/plain")
	return b, nil
}

// dataSource reads a DataSource: inline, or a file read once when the
// configuration is applied (Envoy also reads files at load time; watched
// reloads are not emulated). Environment variables are not emulated.
func dataSource(d *corev3.DataSource) (string, error) {
	switch s := d.GetSpecifier().(type) {
	case *corev3.DataSource_InlineString:
		return s.InlineString, nil
	case *corev3.DataSource_InlineBytes:
		return string(s.InlineBytes), nil
	case *corev3.DataSource_Filename:
		b, err := os.ReadFile(s.Filename)
		if err != nil {
			return "", fmt.Errorf("read data source: %w", err)
		}
		return string(b), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("data source %T is not emulated", s)
	}
}

// FilterFunc emulates the access log filters (source/common/access_log/
// access_log_impl.cc) that toolmesh's local_reply_config mappers use:
// status code, response flag and metadata filters, and and/or of them.
type FilterFunc func(c *FmtContext) bool

// anyFilter is OrFilter (want true) or, negated, AndFilter (want false):
// whether any of subs evaluates to want.
func anyFilter(fs []*accesslogv3.AccessLogFilter, want bool) (FilterFunc, error) {
	subs := make([]FilterFunc, 0, len(fs))
	for _, f := range fs {
		c, err := compileLogFilter(f)
		if err != nil {
			return nil, err
		}
		subs = append(subs, c)
	}
	return func(c *FmtContext) bool {
		for _, f := range subs {
			if f(c) == want {
				return want
			}
		}
		return !want
	}, nil
}

func compileLogFilter(f *accesslogv3.AccessLogFilter) (FilterFunc, error) {
	switch s := f.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		cmp, err := compileComparison(s.StatusCodeFilter.GetComparison())
		if err != nil {
			return nil, err
		}
		return func(c *FmtContext) bool { return cmp(uint64(c.Code)) }, nil
	case *accesslogv3.AccessLogFilter_AndFilter:
		return anyFilter(s.AndFilter.GetFilters(), false)
	case *accesslogv3.AccessLogFilter_OrFilter:
		return anyFilter(s.OrFilter.GetFilters(), true)
	case *accesslogv3.AccessLogFilter_ResponseFlagFilter:
		var want rules.ResponseFlags
		for _, name := range s.ResponseFlagFilter.GetFlags() {
			bit, ok := rules.ParseResponseFlag(name)
			if !ok {
				return nil, fmt.Errorf("response_flag_filter: unknown flag %q", name)
			}
			want |= bit
		}
		// ResponseFlagFilter: with no flags listed, any set flag matches.
		return func(c *FmtContext) bool {
			if want == 0 {
				return c.Flags != 0
			}
			return c.Flags&want != 0
		}, nil
	case *accesslogv3.AccessLogFilter_MetadataFilter:
		return compileMetadataFilter(s.MetadataFilter)
	case nil:
		return nil, errors.New("missing filter")
	default:
		return nil, fmt.Errorf("access log filter %T is not emulated", s)
	}
}

// compileComparison is ComparisonFilter with the runtime key ignored (the
// local data plane has no runtime), so default_value is the value.
func compileComparison(c *accesslogv3.ComparisonFilter) (func(uint64) bool, error) {
	v := uint64(c.GetValue().GetDefaultValue())
	switch c.GetOp() {
	case accesslogv3.ComparisonFilter_EQ:
		return func(x uint64) bool { return x == v }, nil
	case accesslogv3.ComparisonFilter_GE:
		return func(x uint64) bool { return x >= v }, nil
	case accesslogv3.ComparisonFilter_LE:
		return func(x uint64) bool { return x <= v }, nil
	case accesslogv3.ComparisonFilter_NE:
		return func(x uint64) bool { return x != v }, nil
	}
	return nil, fmt.Errorf("comparison op %v is not emulated", c.GetOp())
}

// compileMetadataFilter is MetadataFilter: when the path names a value in
// the dynamic metadata, the matcher decides; otherwise
// match_if_key_not_found, which defaults to true.
func compileMetadataFilter(f *accesslogv3.MetadataFilter) (FilterFunc, error) {
	m := f.GetMatcher()
	if m == nil {
		return nil, errors.New("metadata_filter: missing matcher")
	}
	vm, err := compileValueMatcher(m.GetValue())
	if err != nil {
		return nil, fmt.Errorf("metadata_filter: %w", err)
	}
	ns := m.GetFilter()
	var path []string
	for _, seg := range m.GetPath() {
		path = append(path, seg.GetKey())
	}
	notFound := f.GetMatchIfKeyNotFound() == nil || f.GetMatchIfKeyNotFound().GetValue()
	invert := m.GetInvert()
	return func(c *FmtContext) bool {
		v, ok := lookupMetadata(c.Meta, ns, path)
		if !ok {
			return notFound
		}
		return vm(v) != invert
	}, nil
}

func lookupMetadata(meta map[string]*structpb.Struct, ns string, path []string) (*structpb.Value, bool) {
	st, ok := meta[ns]
	if !ok {
		return nil, false
	}
	v := structpb.NewStructValue(st)
	for _, k := range path {
		s := v.GetStructValue()
		if s == nil {
			return nil, false
		}
		if v, ok = s.GetFields()[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// compileValueMatcher emulates Matchers::ValueMatcher
// (source/common/common/matchers.cc) for the bool, present, string and or
// matches toolmesh's mappers use.
func compileValueMatcher(m *matcherv3.ValueMatcher) (func(*structpb.Value) bool, error) {
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_BoolMatch:
		return func(v *structpb.Value) bool {
			b, ok := v.GetKind().(*structpb.Value_BoolValue)
			return ok && b.BoolValue == p.BoolMatch
		}, nil
	case *matcherv3.ValueMatcher_PresentMatch:
		return func(v *structpb.Value) bool {
			_, isNull := v.GetKind().(*structpb.Value_NullValue)
			return (v.GetKind() != nil && !isNull) == p.PresentMatch
		}, nil
	case *matcherv3.ValueMatcher_StringMatch:
		sm, err := compileStringMatcher(p.StringMatch)
		if err != nil {
			return nil, err
		}
		return func(v *structpb.Value) bool {
			s, ok := v.GetKind().(*structpb.Value_StringValue)
			return ok && sm.match(s.StringValue)
		}, nil
	case *matcherv3.ValueMatcher_OrMatch:
		var subs []func(*structpb.Value) bool
		for _, vm := range p.OrMatch.GetValueMatchers() {
			s, err := compileValueMatcher(vm)
			if err != nil {
				return nil, err
			}
			subs = append(subs, s)
		}
		return func(v *structpb.Value) bool {
			for _, s := range subs {
				if s(v) {
					return true
				}
			}
			return false
		}, nil
	}
	return nil, fmt.Errorf("value matcher %T is not emulated", m.GetMatchPattern())
}

// LocalReply is one reply Envoy generates itself (sendLocalReply).
type LocalReply struct {
	Code    int
	Body    string
	Details string
	// Modify applies ImmediateResponse.headers before the mappers run.
	Modify func(*headers.Map)
	// Extra applies route response_headers_to_add (direct responses).
	Extra func(*headers.Map)
}

// Prepare emulates Utility::prepareLocalReply (source/common/http/utility.cc)
// with the local_reply_config rewrite: it returns the final headers and body.
func (lr *LocalReplyConfig) Prepare(l LocalReply, c *FmtContext) (*headers.Map, string) {
	h := &headers.Map{}
	h.Add(":status", strconv.Itoa(l.Code))
	if l.Modify != nil {
		l.Modify(h)
	}
	if l.Extra != nil {
		l.Extra(h)
	}
	ctBefore, _ := h.Get("content-type")
	code, body := l.Code, l.Body
	h.Set(":status", strconv.Itoa(code))
	c.Code, c.RespH = code, h
	var final *BodyFormat
	for _, m := range lr.Mappers {
		if !m.Filter(c) {
			continue
		}
		if m.body != nil {
			body = *m.body
		}
		ApplyHeadersToAdd(h, m.Headers, c)
		if m.Status != 0 && m.Status != code {
			code = m.Status
			h.Set(":status", strconv.Itoa(code))
			c.Code = code
		}
		final = m.bodyFormat
		break
	}
	final = cmp.Or(final, lr.Body)
	c.LocalBody = body
	out := final.Text.Format(c)
	ctAfter, _ := h.Get("content-type")
	custom := ctBefore != ctAfter
	if out != "" {
		h.Set("content-length", strconv.Itoa(len(out)))
		if !h.Has("content-type") || (out != l.Body && !custom) {
			h.Set("content-type", final.ContentType)
		}
	} else {
		h.Del("content-length")
		h.Del("content-type")
	}
	return h, out
}
