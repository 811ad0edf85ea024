package wasm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestExampleDenyArgument(t *testing.T) {
	h := newTestHost(t, nil)
	defaults := loadGuest(t, h, "deny-argument", Options{})
	configured := loadGuest(t, h, "deny-argument", Options{
		Name:   "deny-configured",
		Config: []byte(`{"tool":"run_sql","argument":"database","prefix":"prod"}`),
	})
	tests := []struct {
		name       string
		m          *Module
		tool, args string
		wantAction string
		wantReason string
	}{
		{"denied path", defaults, "delete_file", `{"path":"/etc/passwd"}`, ActionDeny, "path under /etc/ is not allowed"},
		{"allowed path", defaults, "delete_file", `{"path":"/tmp/x"}`, ActionPass, ""},
		{"other tool", defaults, "read_file", `{"path":"/etc/passwd"}`, ActionPass, ""},
		{"argument not a string", defaults, "delete_file", `{"path":["/etc/passwd"]}`, ActionPass, ""},
		{"escaped value", defaults, "delete_file", `{"path":"\/etc\/shadow"}`, ActionDeny, "/etc/"},
		{"configured deny", configured, "run_sql", `{"database":"prod-eu","q":"select 1"}`, ActionDeny, "database under prod"},
		{"configured pass", configured, "run_sql", `{"database":"staging"}`, ActionPass, ""},
		{"configured ignores default", configured, "delete_file", `{"path":"/etc/passwd"}`, ActionPass, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := call(tt.args)
			in.Tool = tt.tool
			d, err := tt.m.Filter(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.wantAction || !strings.Contains(d.Reason, tt.wantReason) {
				t.Fatalf("decision = %+v, want action %q with reason containing %q", d, tt.wantAction, tt.wantReason)
			}
			if d.Action == ActionDeny && d.As != "" && d.As != AsToolError {
				t.Fatalf("deny kind = %q, want a tool error", d.As)
			}
		})
	}
}

func TestExampleRedactResult(t *testing.T) {
	h := newTestHost(t, nil)
	m := loadGuest(t, h, "redact-result", Options{})
	custom := loadGuest(t, h, "redact-result", Options{
		Name: "redact-custom", Config: []byte(`{"fields":["token"],"replacement":"***"}`),
	})
	tests := []struct {
		name   string
		m      *Module
		result string
		want   string // "" means pass
	}{
		{
			"structured and text",
			m,
			`{"content":[{"type":"text","text":"{\"name\":\"ann\",\"ssn\":\"123-45-6789\"}"}],"structuredContent":{"name":"ann","ssn":"123-45-6789","n":1.50}}`,
			`{"content":[{"text":"{\"name\":\"ann\",\"ssn\":\"[redacted]\"}","type":"text"}],"structuredContent":{"n":1.50,"name":"ann","ssn":"[redacted]"}}`,
		},
		{
			"nested arrays",
			m,
			`{"content":[],"structuredContent":{"users":[{"password":"x"},{"password":"y","id":2}]}}`,
			`{"content":[],"structuredContent":{"users":[{"password":"[redacted]"},{"id":2,"password":"[redacted]"}]}}`,
		},
		{"nothing sensitive", m, `{"content":[{"type":"text","text":"sunny"}]}`, ""},
		{"text that is not JSON", m, `{"content":[{"type":"text","text":"ssn: 1"}]}`, ""},
		{"configured field", custom, `{"content":[],"structuredContent":{"token":"t","ssn":"kept"}}`, `{"content":[],"structuredContent":{"ssn":"kept","token":"***"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Input{Stage: StageResult, Route: "core", Tool: "lookup", Result: json.RawMessage(tt.result)}
			d, err := tt.m.Filter(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if d.Action != ActionPass {
					t.Fatalf("decision = %+v, want pass", d)
				}
				return
			}
			if d.Action != ActionRewrite || string(d.Result) != tt.want {
				t.Fatalf("decision = %s %s\nwant rewrite %s", d.Action, d.Result, tt.want)
			}
		})
	}
	t.Run("request stage passes", func(t *testing.T) {
		d, err := m.Filter(t.Context(), call(`{"ssn":"1"}`))
		if err != nil || d.Action != ActionPass {
			t.Fatalf("decision = %+v, %v; want pass", d, err)
		}
	})
}

func TestExampleAddHeader(t *testing.T) {
	h := newTestHost(t, nil)
	tests := []struct {
		name, config, header, value string
	}{
		{"defaults", "", "x-policy", "wasm-example"},
		{"configured", `{"name":"x-tenant","value":"acme \"blue\""}`, "x-tenant", `acme "blue"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadGuest(t, h, "add-header", Options{Name: "add-header-" + tt.name, Config: []byte(tt.config)})
			d, err := m.Filter(t.Context(), call(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != ActionRewrite || len(d.Headers) != 1 || d.Headers[tt.header] != tt.value {
				t.Fatalf("decision = %+v, want header %s: %s", d, tt.header, tt.value)
			}
			res, err := m.Filter(t.Context(), &Input{Stage: StageResult, Result: json.RawMessage(`{"content":[]}`)})
			if err != nil || res.Action != ActionPass {
				t.Fatalf("result stage = %+v, %v; want pass", res, err)
			}
		})
	}
	t.Run("bad config fails the load", func(t *testing.T) {
		_, err := h.Load(t.Context(), Options{Name: "add-header-bad", Path: guestModule(t, "add-header"), Config: []byte(`{"name":""}`)})
		if err == nil || !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "non-empty") {
			t.Fatalf("Load error = %v, want the guest's configure error", err)
		}
	})
}
