package filters

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

func TestBuildSet(t *testing.T) {
	cfg, err := ParseConfig([]byte(exampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	tests := []struct {
		route string
		want  []string
	}{
		{"core", []string{"schema", "size", "acl", "tenant", "redact"}},
		{"lab", []string{"schema", "redact"}},
		{"elsewhere", []string{"schema", "acl", "redact"}},
	}
	for _, tt := range tests {
		if got := s.Chain(tt.route).Names(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Chain(%q) = %v, want %v", tt.route, got, tt.want)
		}
	}
	if s.Chain("core").ToolAllowed("user_admin") || !s.Chain("lab").ToolAllowed("user_admin") {
		t.Error("the acl hides user_admin on core only")
	}

	// One request through the core chain: size passes, acl passes, tenant
	// propagates, schema rejects.
	r := &Request{Route: "core", Tool: "get_weather", Arguments: json.RawMessage(`{"city":1}`),
		Headers:  map[string]string{"x-tenant": "acme"},
		Validate: func(json.RawMessage) []string { return []string{"/city: want string"} }}
	out := s.Chain("core").RunRequest(t.Context(), r)
	if !out.Denied() || out.Filter != "schema" || out.DenyAs != ToolError {
		t.Fatalf("outcome = %+v, want a schema deny", out)
	}
	r.Validate = nil
	out = s.Chain("core").RunRequest(t.Context(), r)
	if out.Action != ActionRewrite || out.AddHeaders["x-tenant"] != "acme" {
		t.Fatalf("outcome = %+v, want the tenant header", out)
	}
	res := &Result{Route: "core", Body: json.RawMessage(`{"content":[{"type":"text","text":"id 123-45-6789"}]}`)}
	if out := s.Chain("core").RunResult(t.Context(), res); out.Action != ActionRewrite ||
		string(res.Body) != `{"content":[{"text":"id [redacted]","type":"text"}]}` {
		t.Fatalf("result outcome = %+v, body %s", out, res.Body)
	}
}

func TestBuildRejectsInvalidConfig(t *testing.T) {
	_, err := Build(t.Context(), Config{Defaults: []string{"nope"}}, nil, nil)
	if err == nil {
		t.Fatal("Build accepted an unknown filter")
	}
}

func TestSetUpdate(t *testing.T) {
	cfg, err := ParseConfig([]byte(exampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	before := s.state.Load().filters
	oldCore := s.Chain("core")

	next, err := ParseConfig([]byte(`
definitions:
  - {name: schema, type: input_schema}
  - {name: size, type: argument_size, config: {maxBytes: 2048}}
  - {name: acl, type: tool_acl, config: {deny: ["*_admin"]}}
defaults: [schema, acl]
routes:
  core: [size]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	after := s.state.Load().filters
	if after["schema"] != before["schema"] || after["acl"] != before["acl"] {
		t.Error("unchanged definitions were rebuilt")
	}
	if after["size"] == before["size"] {
		t.Error("a changed definition was kept")
	}
	if got := s.Chain("core").Names(); !reflect.DeepEqual(got, []string{"schema", "size", "acl"}) {
		t.Errorf("core after update = %v", got)
	}
	if got := s.Chain("lab").Names(); !reflect.DeepEqual(got, []string{"schema", "acl"}) {
		t.Errorf("lab after update = %v (its list is gone, so it runs the defaults)", got)
	}
	// A chain captured before the update keeps working.
	if out := oldCore.RunRequest(t.Context(), &Request{Arguments: json.RawMessage(`{}`)}); out.Denied() {
		t.Errorf("old chain after update: %+v", out)
	}
	if err := s.Update(t.Context(), Config{Defaults: []string{"ghost"}}); err == nil {
		t.Fatal("Update accepted an invalid config")
	}
	if got := s.Chain("core").Names(); !reflect.DeepEqual(got, []string{"schema", "size", "acl"}) {
		t.Errorf("a failed update changed the chains: %v", got)
	}
}

// TestFiltersResults: only a chain with a result-stage filter needs the
// whole result (the extproc server streams event-stream answers otherwise).
func TestFiltersResults(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
definitions:
  - {name: schema, type: input_schema}
  - name: redact
    type: redact
    config: {pointers: [/structuredContent/ssn]}
defaults: [schema]
routes:
  hr: [redact]
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	for route, want := range map[string]bool{"core": false, "hr": true} {
		if got := s.Chain(route).FiltersResults(); got != want {
			t.Errorf("Chain(%q).FiltersResults() = %v, want %v", route, got, want)
		}
	}
	if (*Chain)(nil).FiltersResults() {
		t.Error("a nil chain filters results")
	}
}
