package mcp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParamHeadersOf(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         []ParamHeader
		err          string
	}{
		{name: "none", schema: `{"type":"object","properties":{"q":{"type":"string"}}}`},
		{name: "top level and nested", schema: `{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry-Run"},"n":{"type":"integer","x-mcp-header":"N"}}}}}`,
			want: []ParamHeader{{"Dry-Run", []string{"opts", "dry"}, "boolean"}, {"N", []string{"opts", "n"}, "integer"}, {"Region", []string{"region"}, "string"}}},
		{name: "a property named x-mcp-header is not an annotation", schema: `{"type":"object","properties":{"x-mcp-header":{"type":"string"}}}`},
		{name: "number type refused", schema: `{"type":"object","properties":{"t":{"type":"number","x-mcp-header":"T"}}}`, err: "string, integer or boolean"},
		{name: "not a token", schema: `{"type":"object","properties":{"t":{"type":"string","x-mcp-header":"a b"}}}`, err: "token"},
		{name: "empty", schema: `{"type":"object","properties":{"t":{"type":"string","x-mcp-header":""}}}`, err: "token"},
		{name: "case-insensitive duplicate", schema: `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}`, err: "unique"},
		{name: "under items", schema: `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`, err: "reachable"},
		{name: "under anyOf", schema: `{"type":"object","anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, err: "reachable"},
		{name: "under $defs", schema: `{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}}}`, err: "reachable"},
		{name: "on the root", schema: `{"type":"object","x-mcp-header":"Root"}`, err: "reachable"},
		{name: "inside a default value is data", schema: `{"type":"object","properties":{"o":{"type":"object","default":{"x-mcp-header":"no"}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParamHeadersOf([]byte(tc.schema))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Name != tc.want[i].Name || got[i].Type != tc.want[i].Type || !slices.Equal(got[i].Path, tc.want[i].Path) {
					t.Errorf("[%d] = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// paramCatalog adds x-mcp-header parameters to the test catalog.
type paramCatalog struct {
	*fakeCatalog
	params map[string][]ParamHeader
}

func (c paramCatalog) ParamHeaders(tool string) []ParamHeader { return c.params[tool] }

func TestParamHeaderValidation(t *testing.T) {
	s := NewServer(Config{})
	cat := paramCatalog{testCatalog(t), map[string][]ParamHeader{
		"weather": {{Name: "Region", Path: []string{"region"}, Type: "string"},
			{Name: "Days", Path: []string{"opts", "days"}, Type: "integer"},
			{Name: "Metric", Path: []string{"metric"}, Type: "boolean"}},
	}}
	body := func(args string) []byte {
		return []byte(modernBody("9", "tools/call", `"name":"weather","arguments":`+args))
	}
	req := func(headers ...string) *HTTPRequest {
		r := modernReq("tools/call", "weather")
		for i := 0; i+1 < len(headers); i += 2 {
			r.ParamHeaders = append(r.ParamHeaders, Header{Key: headers[i], Value: headers[i+1]})
		}
		return r
	}
	for _, tc := range []struct {
		name string
		r    *HTTPRequest
		args string
		ok   bool
	}{
		{"all match", req("Region", "us-west1", "Days", "3", "Metric", "true"), `{"region":"us-west1","opts":{"days":3},"metric":true}`, true},
		{"header name case-insensitive", req("region", "us-west1"), `{"region":"us-west1"}`, true},
		{"integer compared numerically", req("Days", "3"), `{"opts":{"days":3.0}}`, true},
		{"base64 value", req("Region", "=?base64?SGVsbG8=?="), `{"region":"Hello"}`, true},
		{"literal without prefix", req("Region", "SGVsbG8="), `{"region":"SGVsbG8="}`, true},
		{"literal without suffix", req("Region", "=?base64?SGVsbG8="), `{"region":"=?base64?SGVsbG8="}`, true},
		{"null value needs no header", req(), `{"region":null}`, true},
		{"absent value needs no header", req(), `{}`, true},
		{"unknown Mcp-Param headers are ignored", req("Other", "x"), `{}`, true},
		{"missing header", req(), `{"region":"us-west1"}`, false},
		{"mismatch", req("Region", "eu"), `{"region":"us-west1"}`, false},
		{"bad padding", req("Region", "=?base64?SGVsbG8?="), `{"region":"Hello"}`, false},
		{"bad characters", req("Region", "=?base64?SGVs!!!bG8=?="), `{"region":"Hello"}`, false},
		{"boolean mismatch", req("Metric", "True"), `{"metric":true}`, false},
		{"header without body value", req("Region", "us"), `{}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := s.Handle(tc.r, body(tc.args), cat)
			if tc.ok {
				if out.Call == nil {
					t.Fatalf("want a routed call, got %d %s", out.Reply.Status, out.Reply.Body)
				}
				return
			}
			if out.Reply == nil || out.Reply.Status != 400 {
				t.Fatalf("want 400, got %+v", out)
			}
			var d struct {
				ID    json.RawMessage
				Error struct{ Code int }
			}
			if err := json.Unmarshal(out.Reply.Body, &d); err != nil || d.Error.Code != CodeHeaderMismatch || string(d.ID) != "9" {
				t.Fatalf("body %s: want -32020 with id 9", out.Reply.Body)
			}
		})
	}
	// The legacy era has no Mcp-Param headers to check.
	legacy := withVersion(legacyReq(), "2025-11-25")
	out := s.Handle(legacy, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"weather","arguments":{"region":"x"}}}`), cat)
	if out.Call == nil {
		t.Fatalf("legacy call was not routed: %+v", out.Reply)
	}
}
