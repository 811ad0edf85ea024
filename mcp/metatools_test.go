package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// searchCatalog is a catalog in search mode (or not) over testCatalog's
// tools; SearchTools answers from results by query and records its calls.
type searchCatalog struct {
	*fakeCatalog
	search    bool
	shortlist int
	results   map[string]string // query → JSON array
	params    map[string][]ParamHeader
	searched  []string // "query|limit" of each SearchTools call
}

func newSearchCatalog(t testing.TB, search bool) *searchCatalog {
	c := &searchCatalog{fakeCatalog: testCatalog(t), search: search, shortlist: 5,
		results: map[string]string{
			"weather": `[{"name":"weather","description":"Tool weather","inputSchema":{"type":"object"}}]`,
		},
		params: map[string][]ParamHeader{"weather": {{Name: "Region", Path: []string{"region"}}}},
	}
	return c
}

func (c *searchCatalog) SearchMode() bool { return c.search }
func (c *searchCatalog) Shortlist() int   { return c.shortlist }
func (c *searchCatalog) SearchTools(query string, limit int) []byte {
	c.searched = append(c.searched, fmt.Sprintf("%s|%d", query, limit))
	if r, ok := c.results[query]; ok {
		return []byte(r)
	}
	return []byte("[]")
}
func (c *searchCatalog) ParamHeaders(name string) []ParamHeader { return c.params[name] }

// metaCase is one tools/call against a search-mode catalog.
type metaCase struct {
	name, tool, args string // args "" means no arguments member
	status           int    // 0: a Call is expected
	code             int    // 0: a result; else the JSON-RPC error code
	want             *Call  // for a Call: Tool, Arguments and Via
	isError          []string
	tools            string // for a search result: structuredContent.tools
	text             string // for a search result: a part of the text
	searched         string // the expected SearchTools call, "" for none
}

func metaCases() []metaCase {
	return []metaCase{
		{name: "search", tool: "search_tools", args: `{"query":"weather"}`,
			tools: `[{"name":"weather","description":"Tool weather","inputSchema":{"type":"object"}}]`,
			text:  `{"tools":[{"name":"weather"`, searched: "weather|0"},
		{name: "search with limit", tool: "search_tools", args: `{"query":"weather","limit":2}`,
			tools: `[{"name":"weather","description":"Tool weather","inputSchema":{"type":"object"}}]`, searched: "weather|2"},
		{name: "search limit 5.0", tool: "search_tools", args: `{"limit":5.0,"query":"weather"}`,
			tools: `[{"name":"weather","description":"Tool weather","inputSchema":{"type":"object"}}]`, searched: "weather|5"},
		{name: "search limit null", tool: "search_tools", args: `{"query":"weather","limit":null}`,
			tools: `[{"name":"weather","description":"Tool weather","inputSchema":{"type":"object"}}]`, searched: "weather|0"},
		{name: "search escaped key", tool: "search_tools", args: `{"qu\u0065ry":"weather"}`,
			tools: `[{"name":"weather","description":"Tool weather","inputSchema":{"type":"object"}}]`, searched: "weather|0"},
		{name: "search no route", tool: "search_tools", args: `{"query":"order a pizza"}`,
			tools: `[]`, text: `No tool matches "order a pizza"`, searched: "order a pizza|0"},
		{name: "search without arguments", tool: "search_tools", isError: []string{"query is required"}},
		{name: "search query number", tool: "search_tools", args: `{"query":7}`, isError: []string{"query must be a string"}},
		{name: "search query empty", tool: "search_tools", args: `{"query":"  "}`, isError: []string{"query must not be empty"}},
		{name: "search limit zero", tool: "search_tools", args: `{"query":"x","limit":0}`, isError: []string{"between 1 and 5"}},
		{name: "search limit over shortlist", tool: "search_tools", args: `{"query":"x","limit":6}`, isError: []string{"between 1 and 5"}},
		{name: "search limit fraction", tool: "search_tools", args: `{"query":"x","limit":2.5}`, isError: []string{"limit must be an integer"}},
		{name: "search limit string", tool: "search_tools", args: `{"query":"x","limit":"3"}`, isError: []string{"limit must be an integer"}},
		{name: "search limit huge", tool: "search_tools", args: `{"query":"x","limit":1e400}`, isError: []string{"limit must be an integer"}},
		{name: "search unknown argument", tool: "search_tools", args: `{"query":"x","top":3}`, isError: []string{`unknown argument "top"`}},
		// A repeated argument is refused before any tool reads it (argcheck.go).
		{name: "search duplicate query", tool: "search_tools", args: `{"query":"x","query":"weather"}`, status: 200, code: CodeInvalidParams},
		{name: "search every problem", tool: "search_tools", args: `{"limit":-1,"x":1}`,
			isError: []string{`unknown argument "x"`, "query is required", "between 1 and 5"}},
		{name: "search arguments array", tool: "search_tools", args: `[]`, status: 200, code: CodeInvalidParams},

		{name: "call_tool", tool: "call_tool", args: `{"name":"weather","arguments":{"city":"Oslo"}}`,
			want: &Call{Tool: "weather", Arguments: json.RawMessage(`{"city":"Oslo"}`), Via: ViaCallTool}},
		{name: "call_tool arguments absent", tool: "call_tool", args: `{"name":"echo"}`,
			want: &Call{Tool: "echo", Arguments: json.RawMessage(`{}`), Via: ViaCallTool}},
		{name: "call_tool arguments null", tool: "call_tool", args: `{"arguments":null,"name":"echo"}`,
			want: &Call{Tool: "echo", Arguments: json.RawMessage(`{}`), Via: ViaCallTool}},
		{name: "call_tool unknown", tool: "call_tool", args: `{"name":"nope"}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool ambiguous", tool: "call_tool", args: `{"name":"dup"}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool of a meta-tool", tool: "call_tool", args: `{"name":"search_tools","arguments":{"query":"x"}}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool name missing", tool: "call_tool", args: `{"arguments":{}}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool without arguments", tool: "call_tool", status: 200, code: CodeInvalidParams},
		{name: "call_tool name number", tool: "call_tool", args: `{"name":1}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool arguments array", tool: "call_tool", args: `{"name":"echo","arguments":[1]}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool arguments string", tool: "call_tool", args: `{"name":"echo","arguments":"{}"}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool unknown member", tool: "call_tool", args: `{"name":"echo","args":{}}`, status: 200, code: CodeInvalidParams},
		{name: "call_tool duplicate name", tool: "call_tool", args: `{"name":"echo","name":"weather"}`, status: 200, code: CodeInvalidParams},

		{name: "direct call", tool: "echo", args: `{"q":"x"}`,
			want: &Call{Tool: "echo", Arguments: json.RawMessage(`{"q":"x"}`)}},
		{name: "direct unknown", tool: "nope", status: 200, code: CodeInvalidParams},
	}
}

// TestMetaTools runs search_tools, call_tool and direct calls against a
// catalog in search mode, in both eras.
func TestMetaTools(t *testing.T) {
	s := NewServer(Config{ServerName: "gw", ServerVersion: "9"})
	for _, era := range []Era{EraLegacy, EraStateless} {
		for _, tc := range metaCases() {
			t.Run(era.String()+"/"+tc.name, func(t *testing.T) {
				cat := newSearchCatalog(t, true)
				r, body := callRequest(era, "7", tc.tool, tc.args)
				out := s.Handle(r, []byte(body), cat)
				checkMetaOutcome(t, era, tc, out)
				got := strings.Join(cat.searched, ",")
				if got != tc.searched {
					t.Errorf("SearchTools calls = %q, want %q", got, tc.searched)
				}
			})
		}
	}
}

// callRequest is a tools/call of tool in era; args "" leaves arguments out.
func callRequest(era Era, id, tool, args string) (*HTTPRequest, string) {
	params := fmt.Sprintf(`"name":%q`, tool)
	if args != "" {
		params += `,"arguments":` + args
	}
	if era == EraStateless {
		return modernReq("tools/call", tool), modernBody(id, "tools/call", params)
	}
	r := legacyReq()
	r.ProtocolVersion, r.HasProtocolVersion = Version20251125, true
	return r, `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + params + `}}`
}

func checkMetaOutcome(t *testing.T, era Era, tc metaCase, out Outcome) {
	t.Helper()
	if (out.Reply == nil) == (out.Call == nil) {
		t.Fatalf("Outcome = %+v, want exactly one of Reply and Call", out)
	}
	if tc.want != nil {
		if out.Call == nil {
			t.Fatalf("reply %d %s, want a call", out.Reply.Status, out.Reply.Body)
		}
		c := out.Call
		if string(c.ID) != "7" || c.Era != era || c.Tool != tc.want.Tool ||
			string(c.Arguments) != string(tc.want.Arguments) || c.Via != tc.want.Via {
			t.Fatalf("call = {ID:%s Era:%v Tool:%q Arguments:%s Via:%q}, want {ID:7 Era:%v Tool:%q Arguments:%s Via:%q}",
				c.ID, c.Era, c.Tool, c.Arguments, c.Via, era, tc.want.Tool, tc.want.Arguments, tc.want.Via)
		}
		return
	}
	if out.Reply == nil {
		t.Fatalf("call %+v, want a reply", out.Call)
	}
	status := tc.status
	if status == 0 {
		status = 200
	}
	d := checkReply(t, out.Reply, status, tc.code, "7")
	if tc.code != 0 {
		return
	}
	if era == EraStateless {
		wantComplete(t, d)
		wantServerInfo("gw", "9")(t, d)
	} else if _, ok := d.result["resultType"]; ok {
		t.Errorf("legacy result carries resultType: %s", out.Reply.Body)
	}
	var content []struct{ Type, Text string }
	if err := json.Unmarshal(d.result["content"], &content); err != nil || len(content) == 0 {
		t.Fatalf("content = %s: %v", d.result["content"], err)
	}
	if len(tc.isError) > 0 {
		if string(d.result["isError"]) != "true" {
			t.Fatalf("isError = %s, want true; body %s", d.result["isError"], out.Reply.Body)
		}
		if len(content) != len(tc.isError) {
			t.Fatalf("%d messages %+v, want %d", len(content), content, len(tc.isError))
		}
		for i, want := range tc.isError {
			if !strings.Contains(content[i].Text, want) {
				t.Errorf("message %d = %q, want it to contain %q", i, content[i].Text, want)
			}
		}
		return
	}
	if _, ok := d.result["isError"]; ok {
		t.Errorf("search result has isError: %s", out.Reply.Body)
	}
	if len(content) != 1 || content[0].Type != "text" || !strings.Contains(content[0].Text, tc.text) {
		t.Errorf("content = %+v, want one text item containing %q", content, tc.text)
	}
	var sc struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(d.result["structuredContent"], &sc); err != nil || string(sc.Tools) != tc.tools {
		t.Errorf("structuredContent = %s (%v), want {\"tools\":%s}", d.result["structuredContent"], err, tc.tools)
	}
	if tc.tools != "[]" {
		// The text is the structured content as JSON, for clients that read
		// only content.
		if content[0].Text != string(d.result["structuredContent"]) {
			t.Errorf("text %q differs from structuredContent %s", content[0].Text, d.result["structuredContent"])
		}
	}
}

// TestMetaToolsOutsideSearchMode: with search mode off (or a catalog that
// cannot search), the meta-tool names resolve as ordinary names.
func TestMetaToolsOutsideSearchMode(t *testing.T) {
	s := NewServer(Config{})
	full := newSearchCatalog(t, false)
	plain := testCatalog(t)
	withReal := newSearchCatalog(t, false)
	withReal.res["search_tools"] = ToolFound
	for _, era := range []Era{EraLegacy, EraStateless} {
		for _, tc := range []struct {
			name string
			cat  Catalog
			tool string
			code int // 0: a Call
		}{
			{"full mode search_tools", full, "search_tools", CodeInvalidParams},
			{"full mode call_tool", full, "call_tool", CodeInvalidParams},
			{"plain catalog call_tool", plain, "call_tool", CodeInvalidParams},
			{"nil catalog search_tools", nil, "search_tools", CodeInvalidParams},
			{"full mode real search_tools", withReal, "search_tools", 0},
		} {
			t.Run(era.String()+"/"+tc.name, func(t *testing.T) {
				r, body := callRequest(era, "1", tc.tool, `{"query":"weather"}`)
				out := s.Handle(r, []byte(body), tc.cat)
				if tc.code == 0 {
					if out.Call == nil || out.Call.Tool != tc.tool || out.Call.Via != "" ||
						string(out.Call.Arguments) != `{"query":"weather"}` {
						t.Fatalf("outcome %+v, want a direct call of %s", out, tc.tool)
					}
					return
				}
				if out.Reply == nil {
					t.Fatalf("call %+v, want error %d", out.Call, tc.code)
				}
				checkReply(t, out.Reply, 200, tc.code, "1")
			})
		}
	}
	if len(full.searched) != 0 || len(withReal.searched) != 0 {
		t.Errorf("SearchTools called outside search mode: %v %v", full.searched, withReal.searched)
	}
}

// TestMetaToolsStatelessHeaders: a stateless call_tool names call_tool in
// Mcp-Name (the inner name is not a header), and the inner tool's
// Mcp-Param-* headers are not required, while a direct call still needs
// them.
func TestMetaToolsStatelessHeaders(t *testing.T) {
	s := NewServer(Config{})
	cat := newSearchCatalog(t, true)
	inner := `"name":"call_tool","arguments":{"name":"weather","arguments":{"region":"eu"}}`
	for _, tc := range []struct {
		name, header, params string
		status, code         int // status 0: a Call
	}{
		{"call_tool", "call_tool", inner, 0, 0},
		{"Mcp-Name of the inner tool", "weather", inner, 400, CodeHeaderMismatch},
		{"direct call without Mcp-Param", "weather", `"name":"weather","arguments":{"region":"eu"}`, 400, CodeHeaderMismatch},
		{"search_tools Mcp-Name mismatch", "call_tool", `"name":"search_tools","arguments":{"query":"weather"}`, 400, CodeHeaderMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := s.Handle(modernReq("tools/call", tc.header), []byte(modernBody("1", "tools/call", tc.params)), cat)
			if tc.status == 0 {
				if out.Call == nil || out.Call.Tool != "weather" || out.Call.Via != ViaCallTool {
					t.Fatalf("outcome %+v, want a call of weather via call_tool", out)
				}
				return
			}
			if out.Reply == nil {
				t.Fatalf("call %+v, want %d", out.Call, tc.status)
			}
			checkReply(t, out.Reply, tc.status, tc.code, "1")
		})
	}
}

// TestMetaToolDefinitions checks the meta-tools a search-mode route lists.
func TestMetaToolDefinitions(t *testing.T) {
	for _, k := range []int{0, 3, 50} {
		tools := MetaTools(k)
		b, err := EncodeTools(tools)
		if err != nil {
			t.Fatal(err)
		}
		var list []struct {
			Name         string
			InputSchema  map[string]any
			OutputSchema map[string]any
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatalf("meta-tools do not decode: %v: %s", err, b)
		}
		if len(list) != 2 || list[0].Name != MetaToolCall || list[1].Name != MetaToolSearch {
			t.Fatalf("meta-tools = %s, want call_tool then search_tools", b)
		}
		for _, tl := range list {
			if tl.InputSchema["type"] != "object" || tl.InputSchema["additionalProperties"] != false {
				t.Errorf("%s inputSchema = %v", tl.Name, tl.InputSchema)
			}
		}
		want := k
		if k == 0 {
			want = DefaultShortlist
		}
		limit := list[1].InputSchema["properties"].(map[string]any)["limit"].(map[string]any)
		if limit["maximum"] != float64(want) || limit["minimum"] != float64(1) {
			t.Errorf("shortlist %d: limit schema = %v", k, limit)
		}
		if list[1].OutputSchema["type"] != "object" || list[0].OutputSchema != nil {
			t.Errorf("outputSchema: search_tools %v, call_tool %v", list[1].OutputSchema, list[0].OutputSchema)
		}
		if !IsMetaToolName(tools[0].Name) || !IsMetaToolName(tools[1].Name) || IsMetaToolName("search") {
			t.Error("IsMetaToolName disagrees with MetaTools")
		}
	}
}

// FuzzMetaToolArguments sends arbitrary search_tools and call_tool argument
// objects through Handle: never a panic, a search never asks for more than
// the shortlist, and a call_tool Call names a resolvable tool with object
// arguments.
func FuzzMetaToolArguments(f *testing.F) {
	for _, s := range []string{`{"query":"weather","limit":3}`, `{"name":"echo","arguments":{"q":1}}`,
		`{"limit":1e308}`, `{"query":"\u0000"}`, `{}`, `{"name":"dup"}`, `{"limit":-0.0,"query":""}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	s := NewServer(Config{})
	f.Fuzz(func(t *testing.T, args []byte, search bool) {
		if !json.Valid(args) {
			return
		}
		cat := newSearchCatalog(t, true)
		tool := "call_tool"
		if search {
			tool = "search_tools"
		}
		r, body := callRequest(EraLegacy, "1", tool, string(args))
		out := s.Handle(r, []byte(body), cat)
		if (out.Reply == nil) == (out.Call == nil) {
			t.Fatalf("Outcome %+v", out)
		}
		for _, q := range cat.searched {
			var limit int
			if _, err := fmt.Sscanf(q[strings.LastIndexByte(q, '|')+1:], "%d", &limit); err != nil || limit < 0 || limit > 5 {
				t.Fatalf("SearchTools asked for %q", q)
			}
		}
		if c := out.Call; c != nil {
			if search || cat.Resolve(c.Tool) != ToolFound || !isObject(c.Arguments) || c.Via != ViaCallTool {
				t.Fatalf("call %+v from %s", c, args)
			}
			return
		}
		if !json.Valid(out.Reply.Body) {
			t.Fatalf("reply is not JSON: %s", out.Reply.Body)
		}
	})
}
