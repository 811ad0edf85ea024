// Command redact-result is an example toolmesh WebAssembly filter: it
// replaces the values of sensitive fields in tool results, both in
// structuredContent and in text content items that hold JSON.
//
// Configuration (optional), with these defaults:
//
//	{"fields": ["ssn", "password"], "replacement": "[redacted]"}
//
// It uses encoding/json, which is simple to write but makes the module
// larger and each call slower than the guest SDK's own helpers.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o redact-result.wasm .
package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolmesh/toolmesh/filters/wasm/guest"
)

func main() {}

func init() {
	guest.Configure(configure)
	guest.Handle(filter)
}

var settings = struct {
	Fields      []string `json:"fields"`
	Replacement string   `json:"replacement"`
}{Fields: []string{"ssn", "password"}, Replacement: "[redacted]"}

var fields = map[string]bool{"ssn": true, "password": true}

func configure(config []byte) error {
	if len(bytes.TrimSpace(config)) == 0 || string(config) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&settings); err != nil {
		return fmt.Errorf("redact-result config: %w", err)
	}
	fields = make(map[string]bool, len(settings.Fields))
	for _, f := range settings.Fields {
		fields[f] = true
	}
	return nil
}

func filter(req guest.Request) guest.Decision {
	if req.Stage != guest.StageResult || len(req.Result) == 0 {
		return guest.Pass()
	}
	var result map[string]any
	dec := json.NewDecoder(bytes.NewReader(req.Result))
	dec.UseNumber()
	if err := dec.Decode(&result); err != nil {
		return guest.Pass() // not an object: nothing this filter understands
	}
	changed := false
	if sc, ok := result["structuredContent"]; ok {
		result["structuredContent"] = redact(sc, &changed)
	}
	if items, ok := result["content"].([]any); ok {
		for _, item := range items {
			text, ok := item.(map[string]any)
			if !ok || text["type"] != "text" {
				continue
			}
			s, _ := text["text"].(string)
			if out, ok := redactJSONText(s); ok {
				text["text"] = out
				changed = true
			}
		}
	}
	if !changed {
		return guest.Pass()
	}
	out, err := json.Marshal(result)
	if err != nil {
		panic(err) // the SDK turns this into a failed call
	}
	return guest.Rewrite().WithResult(out)
}

// redact replaces the configured fields anywhere in v.
func redact(v any, changed *bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if fields[k] {
				t[k] = settings.Replacement
				*changed = true
			} else {
				t[k] = redact(e, changed)
			}
		}
	case []any:
		for i, e := range t {
			t[i] = redact(e, changed)
		}
	}
	return v
}

// redactJSONText redacts a text item that holds a JSON document.
func redactJSONText(s string) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		return "", false
	}
	changed := false
	v = redact(v, &changed)
	if !changed {
		return "", false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(out), true
}
