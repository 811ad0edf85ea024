package demo

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// toolNameRE is the MCP tool name rule of docs/contracts/toolservice.md.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// exampleArgs are valid arguments for each active tool; the test checks them
// against the declared input schema and calls the tool with them.
var exampleArgs = map[string]string{
	"time.now":       `{}`,
	"time.sleep":     `{"ms":1}`,
	"math.add":       `{"a":2,"b":3}`,
	"math.multiply":  `{"a":2,"b":3}`,
	"text.echo":      `{"message":"hi"}`,
	"text.upper":     `{"message":"hi"}`,
	"text.fail":      `{}`,
	"text.forbidden": `{}`,
}

// badArgs break each input schema, through a required field or an extra one.
var badArgs = map[string]string{
	"time.now":       `{"extra":1}`,
	"time.sleep":     `{}`,
	"math.add":       `{"a":2}`,
	"math.multiply":  `{"a":2,"b":3,"c":4}`,
	"text.echo":      `{}`,
	"text.upper":     `{"message":1}`,
	"text.fail":      `{"reason":"x","more":true}`,
	"text.forbidden": `{"x":1}`,
}

func TestManifests(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range []string{ClockService, CalcService, TextService} {
		t.Run(name, func(t *testing.T) {
			h := Handler(name)
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, manifestPath, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("GET %s = %d %q", manifestPath, rec.Code, rec.Header().Get("Content-Type"))
			}
			var m struct {
				Tools []map[string]json.RawMessage `json:"tools"`
			}
			dec := json.NewDecoder(rec.Body)
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("decode manifest: %v", err)
			}
			if len(m.Tools) == 0 {
				t.Fatal("manifest lists no tools")
			}
			for _, raw := range m.Tools {
				checkManifestTool(t, h, raw, seen)
			}
		})
	}
	for name := range exampleArgs {
		if !seen[name] {
			t.Errorf("tool %s is in exampleArgs but no manifest lists it active", name)
		}
	}
}

// checkManifestTool checks one manifest entry against docs/contracts/toolservice.md and the MCP
// tool rules, compiles its schemas, and calls it with good and bad arguments.
func checkManifestTool(t *testing.T, h http.Handler, raw map[string]json.RawMessage, seen map[string]bool) {
	t.Helper()
	for _, field := range []string{"name", "version", "active", "title", "description", "inputSchema", "annotations", "path"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("tool %s: field %q missing", raw["name"], field)
		}
	}
	var tl struct {
		Name         string
		Version      string
		Active       bool
		Description  string
		InputSchema  json.RawMessage
		OutputSchema json.RawMessage
		Annotations  map[string]any
		Path         string
	}
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &tl); err != nil {
		t.Fatalf("decode tool: %v", err)
	}
	if !toolNameRE.MatchString(tl.Name) {
		t.Errorf("tool name %q breaks the MCP rule", tl.Name)
	}
	if tl.Description == "" || tl.Version == "" {
		t.Errorf("tool %s: empty description or version", tl.Name)
	}
	if tl.Path != "/tools/"+tl.Name {
		t.Errorf("tool %s: path %q", tl.Name, tl.Path)
	}
	if _, ok := tl.Annotations["readOnlyHint"]; !ok {
		t.Errorf("tool %s: annotations lack readOnlyHint", tl.Name)
	}

	in := compileSchema(t, tl.Name+"/input", tl.InputSchema)
	var obj struct {
		Type                 string
		Properties           map[string]any
		Required             []string
		AdditionalProperties *bool
	}
	if err := json.Unmarshal(tl.InputSchema, &obj); err != nil {
		t.Fatalf("tool %s: input schema: %v", tl.Name, err)
	}
	if obj.Type != "object" || obj.AdditionalProperties == nil || *obj.AdditionalProperties {
		t.Errorf("tool %s: input schema must be an object with additionalProperties false", tl.Name)
	}
	for _, r := range obj.Required {
		if _, ok := obj.Properties[r]; !ok {
			t.Errorf("tool %s: required %q is not a property", tl.Name, r)
		}
	}
	if tl.OutputSchema != nil {
		compileSchema(t, tl.Name+"/output", tl.OutputSchema)
	}
	if !tl.Active {
		return
	}
	if seen[tl.Name] {
		t.Errorf("tool %s: two active versions", tl.Name)
	}
	seen[tl.Name] = true

	good, ok := exampleArgs[tl.Name]
	if !ok {
		t.Fatalf("tool %s: add it to exampleArgs and badArgs", tl.Name)
	}
	if err := in.Validate(mustJSON(t, good)); err != nil {
		t.Errorf("tool %s: example arguments fail the input schema: %v", tl.Name, err)
	}
	if err := in.Validate(mustJSON(t, badArgs[tl.Name])); err == nil {
		t.Errorf("tool %s: bad arguments %s pass the input schema", tl.Name, badArgs[tl.Name])
	}
	// The service itself refuses what the schema refuses.
	if rec := post(t, t.Context(), h, tl.Name, badArgs[tl.Name]); rec.Code != http.StatusBadRequest {
		t.Errorf("tool %s: bad arguments answered %d, want 400", tl.Name, rec.Code)
	}
	rec := post(t, t.Context(), h, tl.Name, good)
	wantOK := !slices.Contains([]string{"text.fail", "text.forbidden"}, tl.Name)
	if (rec.Code == http.StatusOK) != wantOK {
		t.Errorf("tool %s: example call answered %d %s", tl.Name, rec.Code, rec.Body)
	}
	if tl.OutputSchema != nil && wantOK {
		out := compileSchema(t, tl.Name+"/output", tl.OutputSchema)
		body := mustJSON(t, rec.Body.String())
		if m, ok := body.(map[string]any); ok && m["structuredContent"] != nil {
			body = m["structuredContent"]
		}
		if err := out.Validate(body); err != nil {
			t.Errorf("tool %s: reply fails its output schema: %v", tl.Name, err)
		}
	}
}

// compileSchema compiles a JSON Schema 2020-12 document.
func compileSchema(t *testing.T, name string, schema json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: compile: %v", name, err)
	}
	return s
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s)))
	if err != nil {
		t.Fatalf("invalid JSON %q: %v", s, err)
	}
	return v
}
