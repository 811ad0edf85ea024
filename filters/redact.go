package filters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// redact replaces sensitive parts of tool results before clients see them.
//
// Pointers (RFC 6901, relative to the CallToolResult object) replace the
// value they name when it exists. Because the gateway mirrors
// structuredContent as JSON text in content (docs/contracts/mcp.md), a pointer under
// /structuredContent is applied to every text content item that holds a
// JSON document too, so the same value does not leak through the text.
// Patterns (Go regexp syntax) replace every match in every string value.
//
// Configuration:
//
//	pointers: [/structuredContent/ssn]
//	patterns: ['\b\d{3}-\d{2}-\d{4}\b']
//	replacement: "[redacted]"            # default
type redact struct {
	name        string
	pointers    []pointer
	structured  []pointer // the part after /structuredContent of those pointers
	patterns    []*regexp.Regexp
	replacement string
}

var _ StageFilter = (*redact)(nil)

func newRedact(_ *builder, d Definition) (Filter, error) {
	var cfg struct {
		Pointers    []string `json:"pointers"`
		Patterns    []string `json:"patterns"`
		Replacement *string  `json:"replacement"`
	}
	if err := decodeStrict(d.Config, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Pointers) == 0 && len(cfg.Patterns) == 0 {
		return nil, errors.New("at least one pointer or pattern is required")
	}
	f := &redact{name: d.Name, replacement: "[redacted]"}
	if cfg.Replacement != nil {
		f.replacement = *cfg.Replacement
	}
	for _, s := range cfg.Pointers {
		p, err := parsePointer(s)
		if err != nil {
			return nil, err
		}
		f.pointers = append(f.pointers, p)
		if p[0] == "structuredContent" {
			f.structured = append(f.structured, p[1:])
		}
	}
	for _, s := range cfg.Patterns {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", s, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("pattern %q matches the empty string", s)
		}
		f.patterns = append(f.patterns, re)
	}
	return f, nil
}

// Name implements [Filter.Name].
func (f *redact) Name() string { return f.name }

// Runs implements [StageFilter.Runs].
func (f *redact) Runs(s Stage) bool { return s == StageResult }

// OnRequest implements [Filter.OnRequest].
func (f *redact) OnRequest(context.Context, *Request) (Decision, error) { return Decision{}, nil }

// OnResult implements [Filter.OnResult].
func (f *redact) OnResult(_ context.Context, r *Result) (Decision, error) {
	doc, err := decodeJSON(r.Body)
	if err != nil {
		return Decision{}, fmt.Errorf("decode result: %w", err)
	}
	changed := false
	for _, p := range f.pointers {
		changed = p.replace(doc, f.replacement) || changed
	}
	if len(f.structured) > 0 {
		changed = f.redactTextJSON(doc) || changed
	}
	if len(f.patterns) > 0 {
		doc = f.redactStrings(doc, &changed)
	}
	if !changed {
		return Decision{}, nil
	}
	out, err := encodeJSON(doc)
	if err != nil {
		return Decision{}, fmt.Errorf("encode result: %w", err)
	}
	return Decision{Action: ActionRewrite, Result: out}, nil
}

// redactTextJSON applies the structuredContent pointers to text content
// items that hold JSON.
func (f *redact) redactTextJSON(doc any) bool {
	root, _ := doc.(map[string]any)
	items, _ := root["content"].([]any)
	changed := false
	for _, it := range items {
		item, _ := it.(map[string]any)
		text, ok := item["text"].(string)
		if !ok || item["type"] != "text" {
			continue
		}
		inner, err := decodeJSON([]byte(text))
		if err != nil {
			continue
		}
		hit := false
		for _, p := range f.structured {
			if len(p) == 0 {
				inner, hit = f.replacement, true
				continue
			}
			hit = p.replace(inner, f.replacement) || hit
		}
		if !hit {
			continue
		}
		b, err := encodeJSON(inner)
		if err != nil {
			continue
		}
		item["text"] = string(b)
		changed = true
	}
	return changed
}

// redactStrings applies the patterns to every string value in v.
func (f *redact) redactStrings(v any, changed *bool) any {
	switch t := v.(type) {
	case string:
		s := t
		for _, re := range f.patterns {
			s = re.ReplaceAllLiteralString(s, f.replacement)
		}
		if s != t {
			*changed = true
		}
		return s
	case map[string]any:
		for k, e := range t {
			t[k] = f.redactStrings(e, changed)
		}
	case []any:
		for i, e := range t {
			t[i] = f.redactStrings(e, changed)
		}
	}
	return v
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep numbers exactly as the Tool Service wrote them
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
