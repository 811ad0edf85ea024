package filters

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// mustBuild builds one built-in filter from a type and a JSON config.
func mustBuild(t *testing.T, typ, config string) Filter {
	t.Helper()
	f, err := types[typ](&builder{ctx: t.Context()}, Definition{Name: "f", Type: typ, Config: json.RawMessage(config)})
	if err != nil {
		t.Fatalf("build %s %s: %v", typ, config, err)
	}
	return f
}

func TestInputSchema(t *testing.T) {
	f := mustBuild(t, TypeInputSchema, ``)
	tests := []struct {
		name     string
		validate func(json.RawMessage) []string
		want     Decision
	}{
		{"no validator", nil, Decision{}},
		{"valid", func(json.RawMessage) []string { return nil }, Decision{}},
		{
			"invalid",
			func(a json.RawMessage) []string { return []string{"/city: missing", "/days: want integer"} },
			Deny(`invalid arguments: /city: missing; /days: want integer`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := f.OnRequest(t.Context(), &Request{Tool: "get_weather", Arguments: json.RawMessage(`{}`), Validate: tt.validate})
			if err != nil || !reflect.DeepEqual(d, tt.want) {
				t.Fatalf("decision = %+v, %v; want %+v", d, err, tt.want)
			}
		})
	}
	if sf := f.(StageFilter); !sf.Runs(StageRequest) || sf.Runs(StageResult) {
		t.Fatal("input_schema must run on the request stage only")
	}
}

func TestToolACL(t *testing.T) {
	tests := []struct {
		config string
		tool   string
		want   Decision
	}{
		{`{"allow":["get_*"]}`, "get_weather", Decision{}},
		{`{"allow":["get_*"]}`, "set_weather", DenyRPC(0, `tool "set_weather" is not allowed on route "core"`)},
		{`{"deny":["*_admin","db.?"]}`, "user_admin", DenyRPC(0, `tool "user_admin" is not allowed on route "core"`)},
		{`{"deny":["*_admin","db.?"]}`, "db.x", DenyRPC(0, `tool "db.x" is not allowed on route "core"`)},
		{`{"deny":["*_admin","db.?"]}`, "db.xy", Decision{}},
		{`{"allow":["*"],"deny":["rm"]}`, "rm", DenyRPC(0, `tool "rm" is not allowed on route "core"`)},
		{`{"allow":["[a-c]*"]}`, "b", Decision{}},
		{`{"allow":["[a-c]*"]}`, "d", DenyRPC(0, `tool "d" is not allowed on route "core"`)},
		{`{"deny":["x"],"denyAs":"tool_error","reason":"ask an admin"}`, "x", Deny("ask an admin")},
		{`{"deny":["x"],"code":-32001}`, "x", DenyRPC(-32001, `tool "x" is not allowed on route "core"`)},
	}
	for _, tt := range tests {
		t.Run(tt.config+"/"+tt.tool, func(t *testing.T) {
			f := mustBuild(t, TypeToolACL, tt.config)
			d, err := f.OnRequest(t.Context(), &Request{Route: "core", Tool: tt.tool})
			if err != nil || !reflect.DeepEqual(d, tt.want) {
				t.Fatalf("decision = %+v, %v; want %+v", d, err, tt.want)
			}
			if allowed := f.(ToolLister).ToolAllowed(tt.tool); allowed != (tt.want.Action == ActionPass) {
				t.Fatalf("ToolAllowed = %v, disagrees with the decision", allowed)
			}
		})
	}
}

func TestArgumentSize(t *testing.T) {
	tests := []struct {
		config, args string
		want         Decision
	}{
		{`{"maxBytes":10}`, `{"a":"b"}`, Decision{}},
		{`{"maxBytes":10}`, `{"a":"bc"}`, Decision{}}, // exactly at the limit
		{`{"maxBytes":9}`, `{"a":"bcd"}`, Deny("arguments of 11 bytes exceed the limit of 9 bytes")},
		{`{"maxBytes":1,"denyAs":"rpc_error"}`, `{}`, DenyRPC(0, "arguments of 2 bytes exceed the limit of 1 bytes")},
	}
	for _, tt := range tests {
		t.Run(tt.config+tt.args, func(t *testing.T) {
			d, err := mustBuild(t, TypeArgumentSize, tt.config).OnRequest(t.Context(), &Request{Arguments: json.RawMessage(tt.args)})
			if err != nil || !reflect.DeepEqual(d, tt.want) {
				t.Fatalf("decision = %+v, %v; want %+v", d, err, tt.want)
			}
		})
	}
}

func TestHeaderPropagation(t *testing.T) {
	f := mustBuild(t, TypeHeaderPropagation, `{"headers":["X-Tenant","x-b3-traceid","x-absent"]}`)
	tests := []struct {
		name    string
		headers map[string]string
		want    Decision
	}{
		{"none present", map[string]string{"user-agent": "x"}, Decision{}},
		{"some present", map[string]string{"x-tenant": "acme", "x-b3-traceid": "abc", "cookie": "secret"},
			Decision{Action: ActionRewrite, AddHeaders: map[string]string{"x-tenant": "acme", "x-b3-traceid": "abc"}}},
		{"empty value is copied", map[string]string{"x-tenant": ""},
			Decision{Action: ActionRewrite, AddHeaders: map[string]string{"x-tenant": ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := f.OnRequest(t.Context(), &Request{Headers: tt.headers})
			if err != nil || !reflect.DeepEqual(d, tt.want) {
				t.Fatalf("decision = %+v, %v; want %+v", d, err, tt.want)
			}
		})
	}
	if _, err := types[TypeHeaderPropagation](nil, Definition{Config: json.RawMessage(`{"headers":["a","A"]}`)}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate header: %v", err)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, config, body string
		want               string // "" means pass
		wantErr            string
	}{
		{
			name:   "pointer into structuredContent and its text mirror",
			config: `{"pointers":["/structuredContent/ssn"]}`,
			body:   `{"content":[{"type":"text","text":"{\"name\":\"ann\",\"ssn\":\"123-45-6789\"}"}],"structuredContent":{"name":"ann","ssn":"123-45-6789"}}`,
			want:   `{"content":[{"text":"{\"name\":\"ann\",\"ssn\":\"[redacted]\"}","type":"text"}],"structuredContent":{"name":"ann","ssn":"[redacted]"}}`,
		},
		{
			name:   "array index and escaped token",
			config: `{"pointers":["/structuredContent/users/1/a~1b","/structuredContent/users/01/a~1b"],"replacement":"***"}`,
			body:   `{"content":[],"structuredContent":{"users":[{"a/b":1},{"a/b":2.50}]}}`,
			want:   `{"content":[],"structuredContent":{"users":[{"a/b":1},{"a/b":"***"}]}}`,
		},
		{
			name:   "absent pointer passes",
			config: `{"pointers":["/structuredContent/ssn","/content/5/text"]}`,
			body:   `{"content":[{"type":"text","text":"fine"}],"structuredContent":{"name":"ann"}}`,
		},
		{
			name:   "pattern in every string",
			config: `{"patterns":["\\b\\d{3}-\\d{2}-\\d{4}\\b"],"replacement":"$1<x>"}`,
			body:   `{"content":[{"type":"text","text":"ssn 123-45-6789 and 987-65-4321"}],"structuredContent":{"k":["123-45-6789"],"n":12345678}}`,
			want:   `{"content":[{"text":"ssn $1<x> and $1<x>","type":"text"}],"structuredContent":{"k":["$1<x>"],"n":12345678}}`,
		},
		{
			name:   "pattern without match passes",
			config: `{"patterns":["secret-[0-9]+"]}`,
			body:   `{"content":[{"type":"text","text":"nothing here"}]}`,
		},
		{
			name:    "a body that is not JSON is an error",
			config:  `{"patterns":["x"]}`,
			body:    `{"content":`,
			wantErr: "decode result",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustBuild(t, TypeRedact, tt.config)
			d, err := f.OnResult(t.Context(), &Result{Body: json.RawMessage(tt.body)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if d.Action != ActionPass {
					t.Fatalf("decision = %s %s, want pass", d.Action, d.Result)
				}
				return
			}
			if d.Action != ActionRewrite || string(d.Result) != tt.want {
				t.Fatalf("result = %s\nwant     %s", d.Result, tt.want)
			}
		})
	}
}

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in      string
		want    pointer
		wantErr bool
	}{
		{"/a", pointer{"a"}, false},
		{"/a/b/0", pointer{"a", "b", "0"}, false},
		{"/", pointer{""}, false},
		{"/a~1b/c~0d/~01", pointer{"a/b", "c~d", "~1"}, false},
		{"//x", pointer{"", "x"}, false},
		{"", nil, true},
		{"a", nil, true},
		{"/a~", nil, true},
		{"/a~2", nil, true},
	}
	for _, tt := range tests {
		got, err := parsePointer(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parsePointer(%q) = %q, %v; want %q, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}

func TestArrayIndex(t *testing.T) {
	for _, tt := range []struct {
		tok string
		n   int
		ok  bool
	}{{"0", 1, true}, {"2", 3, true}, {"3", 3, false}, {"01", 3, false}, {"-", 3, false}, {"", 3, false}, {"1a", 3, false}, {"99999999999999999999", 3, false}} {
		if _, ok := arrayIndex(tt.tok, tt.n); ok != tt.ok {
			t.Errorf("arrayIndex(%q, %d) ok = %v, want %v", tt.tok, tt.n, ok, tt.ok)
		}
	}
}

func FuzzParsePointer(f *testing.F) {
	for _, s := range []string{"/a", "/a~1b", "/~0/~1", "/a~", "", "x", "/0/-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePointer(s)
		if err != nil {
			return
		}
		if p.String() != s {
			t.Fatalf("round trip %q -> %q", s, p.String())
		}
		doc, _ := decodeJSON([]byte(`{"a":[{"b":1}],"":{"":2},"a/b":{"~":3}}`))
		p.replace(doc, "x")
	})
}
