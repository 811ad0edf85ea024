package xdsconfig

import (
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

func testFmtContext(t testing.TB) *FmtContext {
	t.Helper()
	meta, err := structpb.NewStruct(map[string]any{
		"id": "7", "quoted": `"abc"`, "n": 3.5, "obj": map[string]any{"k": "v"}, "b": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &headers.Map{}
	req.Add(":path", "/mcp/core")
	req.Add("x-request-id", "rid")
	return &FmtContext{
		ReqH: req, Code: 504, Flags: rules.FlagUT | rules.FlagURX, Details: "upstream_response_timeout",
		LocalBody: "upstream request timeout", Protocol: "HTTP/1.1", Cluster: "toolsvc_a",
		Meta: map[string]*structpb.Struct{"toolmesh": meta},
	}
}

func TestTextFormat(t *testing.T) {
	tests := []struct {
		format, want string
	}{
		{"plain", "plain"},
		{"", ""},
		{"100%% sure", "100% sure"},
		{"%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%", "504 UT,URX upstream_response_timeout"},
		{"%LOCAL_REPLY_BODY%", "upstream request timeout"},
		{"%LOCAL_REPLY_BODY%:%RESPONSE_CODE%:path=%REQ(:path)%", "upstream request timeout:504:path=/mcp/core"},
		{`{"id":%DYNAMIC_METADATA(toolmesh:id)%}`, `{"id":7}`},
		{`{"id":%DYNAMIC_METADATA(toolmesh:quoted)%}`, `{"id":"abc"}`},
		{`%DYNAMIC_METADATA(toolmesh:missing)%`, "-"},
		{`%DYNAMIC_METADATA(nope:id)%`, "-"},
		{`%DYNAMIC_METADATA(toolmesh:n)% %DYNAMIC_METADATA(toolmesh:b)%`, "3.5 true"},
		{`%DYNAMIC_METADATA(toolmesh:obj)%`, `{"k":"v"}`},
		{`%DYNAMIC_METADATA(toolmesh:obj:k)%`, "v"},
		{`%DYNAMIC_METADATA(toolmesh:id:deeper)%`, "-"},
		{`%DYNAMIC_METADATA(toolmesh:quoted):2%`, `"a`},
		{`%REQ(X-REQUEST-ID)% %REQ(x-missing?x-request-id)% %REQ(x-missing)%`, "rid rid -"},
		{`%RESP(content-type)%`, "-"},
		{`%UPSTREAM_CLUSTER% %PROTOCOL% %ROUTE_NAME%`, "toolsvc_a HTTP/1.1 -"},
		// A format that is one operator (its output is the value as is).
		{`%LOCAL_REPLY_BODY:8%`, "upstream"},
		{`%ROUTE_NAME%`, "-"},
		{`%DYNAMIC_METADATA(toolmesh:id)%`, "7"},
	}
	c := testFmtContext(t)
	for _, tt := range tests {
		f, err := ParseTextFormat(tt.format)
		if err != nil {
			t.Errorf("parse %q: %v", tt.format, err)
			continue
		}
		if got := f.Format(c); got != tt.want {
			t.Errorf("format %q = %q, want %q", tt.format, got, tt.want)
		}
	}
}

func TestTextFormatOmitEmpty(t *testing.T) {
	f, err := ParseTextFormat("[%DYNAMIC_METADATA(toolmesh:missing)%]")
	if err != nil {
		t.Fatal(err)
	}
	f.OmitEmpty = true
	if got := f.Format(testFmtContext(t)); got != "[]" {
		t.Fatalf("got %q", got)
	}
}

// TestTextFormatOneOperator: a format that is one operator yields its
// value, or "-" or "" (omit_empty_values) when it has none, and does not
// copy it (a local reply body can be megabytes).
func TestTextFormatOneOperator(t *testing.T) {
	missing, err := ParseTextFormat("%DYNAMIC_METADATA(toolmesh:missing)%")
	if err != nil {
		t.Fatal(err)
	}
	c := testFmtContext(t)
	if got := missing.Format(c); got != "-" {
		t.Errorf("missing value = %q, want -", got)
	}
	missing.OmitEmpty = true
	if got := missing.Format(c); got != "" {
		t.Errorf("missing value with omit_empty_values = %q, want empty", got)
	}
	c.LocalBody = strings.Repeat("x", 1<<20)
	got := DefaultBodyFormat.Text.Format(c)
	if got != c.LocalBody {
		t.Fatal("the default body format changed the body")
	}
	if unsafe.StringData(got) != unsafe.StringData(c.LocalBody) {
		t.Error("the default body format copied the body")
	}
}

func TestTextFormatErrors(t *testing.T) {
	for _, bad := range []string{
		"100%",                        // a lone % is not a command
		"%lower%",                     // commands are upper case
		"%NOT_A_COMMAND%",             // unknown operator
		"%REQ%",                       // needs a header
		"%DYNAMIC_METADATA()%",        // needs a namespace
		"%RESPONSE_CODE(x)%",          // takes no parameter
		"%RESPONSE_CODE:99999999999%", // length does not fit
		"%START_TIME(%s)%",            // sub-formats are not emulated
	} {
		if _, err := ParseTextFormat(bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// FuzzTextFormat checks that any format string either fails to parse or
// renders without panicking, and that formats without '%' are literals.
func FuzzTextFormat(f *testing.F) {
	for _, seed := range []string{
		"plain", "100%% sure", "%RESPONSE_CODE%", "%DYNAMIC_METADATA(toolmesh:id)%",
		`{"id":%DYNAMIC_METADATA(toolmesh:quoted):3%}`, "%REQ(a?b)%", "%", "%%%", "%A(%", "%REQ(x))%",
	} {
		f.Add(seed)
	}
	c := testFmtContext(f)
	f.Fuzz(func(t *testing.T, s string) {
		tf, err := ParseTextFormat(s)
		if err != nil {
			return
		}
		out := tf.Format(c)
		if !strings.Contains(s, "%") && out != s {
			t.Fatalf("literal %q rendered as %q", s, out)
		}
		if utf8.ValidString(s) && !strings.Contains(s, "%") && !utf8.ValidString(out) {
			t.Fatalf("valid input %q produced invalid UTF-8", s)
		}
	})
}
