package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Large catalogs (ADR 0004) through the real binary: a route in search mode
// (search_tools, call_tool, direct calls, the no-route answer), and tools/list
// pagination across a snapshot change, in both protocol eras.

// setCatalog adds a catalog object to the routes of a Portal file written by
// writePortal, by route key.
func setCatalog(t *testing.T, path string, catalogs map[string]map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Routes []map[string]any `json:"routes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Routes {
		if c, ok := catalogs[r["key"].(string)]; ok {
			r["catalog"] = c
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// catalogTools generates a catalog of 35 tools, {domain}_{entity}_{action},
// with schemas and descriptions in the entity's words, plus a real tool
// named call_tool, which a search-mode route must reject.
func catalogTools() []map[string]any {
	entities := [][2]string{
		{"billing", "invoice"}, {"crm", "customer"}, {"support", "ticket"}, {"hr", "employee"},
		{"logistics", "shipment"}, {"catalog", "product"}, {"calendar", "meeting"},
	}
	actions := [][2]string{
		{"create", "Create a new %s."}, {"get", "Get one %s by its id."}, {"list", "List %ss, newest first."},
		{"update", "Update the fields of a %s."}, {"delete", "Delete a %s for good."},
	}
	var tools []map[string]any
	for _, de := range entities {
		domain, entity := de[0], de[1]
		for _, a := range actions {
			props := map[string]any{entity + "_id": map[string]any{"type": "string", "description": "The " + entity + "'s id."}}
			required := []string{entity + "_id"}
			if a[0] == "create" || a[0] == "list" {
				props = map[string]any{"name": map[string]any{"type": "string"}, "amount": map[string]any{"type": "number"}}
				required = []string{"name"}
			}
			tools = append(tools, map[string]any{
				"name": domain + "_" + entity + "_" + a[0], "version": "1",
				"title":       strings.ToUpper(a[0][:1]) + a[0][1:] + " " + entity,
				"description": fmt.Sprintf(a[1], entity),
				"inputSchema": map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false},
				"annotations": map[string]any{"readOnlyHint": a[0] == "get" || a[0] == "list"},
			})
		}
	}
	return append(tools, map[string]any{"name": "call_tool", "version": "1", "description": "A real tool with a reserved name.",
		"inputSchema": objectSchema})
}

// catalogService is a Tool Service that answers every tool with the tool
// name and arguments it received, and records the last call's path and body.
type catalogService struct {
	*toolService
	lastPath atomic.Pointer[string]
}

func newCatalogService(t *testing.T, name string, tools []map[string]any) *catalogService {
	t.Helper()
	s := &catalogService{toolService: &toolService{name: name}}
	s.setTools(tools)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"tools": *s.tools.Load()})
	})
	mux.HandleFunc("POST /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		h := r.Header.Clone()
		s.lastHeaders.Store(&h)
		path := r.URL.Path
		s.lastPath.Store(&path)
		body, _ := io.ReadAll(r.Body)
		s.lastBody.Store(&body)
		w.Header().Set("content-type", "application/json")
		fmt.Fprintf(w, `{"content":[{"type":"text","text":"ran %s"}],"structuredContent":{"tool":%q,"arguments":%s}}`,
			r.PathValue("tool"), r.PathValue("tool"), body)
	})
	s.srv = newLoopbackServer(t, mux)
	return s
}

// eras are the two protocol eras a raw request can speak.
var eras = []string{"legacy", "stateless"}

// rpcReply is a decoded JSON-RPC answer.
type rpcReply struct {
	Status int
	Raw    []byte
	Result map[string]json.RawMessage
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

// postMCP posts one JSON-RPC request to route in era: legacy is a 2025-11-25
// request; stateless carries the 2026-07-28 headers (Mcp-Method, Mcp-Name
// for tools/call) and _meta.
func postMCP(t *testing.T, base, route, era string, id int, method string, params map[string]any) rpcReply {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params = maps.Clone(params)
	req, err := http.NewRequest(http.MethodPost, base+"/mcp/"+route, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json, text/event-stream")
	switch era {
	case "legacy":
		req.Header.Set("mcp-protocol-version", "2025-11-25")
	case "stateless":
		req.Header.Set("mcp-protocol-version", "2026-07-28")
		req.Header.Set("mcp-method", method)
		if name, ok := params["name"].(string); ok && method == "tools/call" {
			req.Header.Set("mcp-name", name)
		}
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}
	default:
		t.Fatalf("unknown era %q", era)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", era, method, err)
	}
	defer resp.Body.Close()
	out := rpcReply{Status: resp.StatusCode}
	out.Raw, _ = io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		// A streamed answer (a federated MCP server's): the response is the
		// last event's data.
		for line := range strings.SplitSeq(string(out.Raw), "\n") {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: "); ok {
				out.Raw = []byte(d)
			}
		}
	}
	var top struct {
		ID     json.RawMessage            `json:"id"`
		Result map[string]json.RawMessage `json:"result"`
		Error  json.RawMessage            `json:"error"`
	}
	if err := json.Unmarshal(out.Raw, &top); err != nil {
		t.Fatalf("%s %s: reply %d is not JSON-RPC: %v: %s", era, method, resp.StatusCode, err, out.Raw)
	}
	if string(top.ID) != fmt.Sprint(id) {
		t.Fatalf("%s %s: reply id %s, want %d", era, method, top.ID, id)
	}
	out.Result = top.Result
	if top.Error != nil {
		_ = json.Unmarshal(top.Error, &out.Error)
	}
	return out
}

// result fails unless r is an HTTP 200 result, checking the era's framing.
func (r rpcReply) result(t *testing.T, era string) map[string]json.RawMessage {
	t.Helper()
	if r.Status != http.StatusOK || r.Error != nil || r.Result == nil {
		t.Fatalf("got %d %s, want a result", r.Status, r.Raw)
	}
	_, typed := r.Result["resultType"]
	if (era == "stateless") != typed {
		t.Fatalf("%s result with resultType present=%v: %s", era, typed, r.Raw)
	}
	return r.Result
}

// wantError fails unless r is the JSON-RPC error code.
func (r rpcReply) wantError(t *testing.T, code int, contains string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != code || !strings.Contains(r.Error.Message, contains) {
		t.Fatalf("got %d %s, want error %d containing %q", r.Status, r.Raw, code, contains)
	}
}

// shortlistEntry is one tool of a search_tools answer.
type shortlistEntry map[string]json.RawMessage

func (e shortlistEntry) name() string {
	var s string
	_ = json.Unmarshal(e["name"], &s)
	return s
}

// callResult decodes a CallToolResult's content texts, isError and
// structuredContent.
func callResult(t *testing.T, res map[string]json.RawMessage) (texts []string, isError bool, structured json.RawMessage) {
	t.Helper()
	var content []struct{ Type, Text string }
	if err := json.Unmarshal(res["content"], &content); err != nil {
		t.Fatalf("content %s: %v", res["content"], err)
	}
	for _, c := range content {
		texts = append(texts, c.Text)
	}
	return texts, string(res["isError"]) == "true", res["structuredContent"]
}

// TestSearchMode drives a search-mode route over a catalog of 35 tools with
// raw HTTP in both eras and with the official Go SDK client: tools/list
// shows the two meta-tools; search_tools returns a shortlist with the
// declared fields; call_tool reaches the Tool Service exactly as a direct
// call does; a query nothing matches gets an empty shortlist.
func TestSearchMode(t *testing.T) {
	svc := newCatalogService(t, "catalog", catalogTools())
	portal := writePortal(t, portalRoute{Key: "big", Services: []*toolService{svc.toolService}})
	setCatalog(t, portal, map[string]map[string]any{"big": {"mode": "search", "shortlist": 4, "pageSize": 2}})
	gw := startGateway(t, portal)

	declared := map[string]map[string]any{}
	for _, tool := range catalogTools() {
		declared[tool["name"].(string)] = tool
	}
	if _, body := gw.get(t, "/health"); !bytes.Contains(body, []byte("reserved for a meta-tool")) {
		t.Errorf("/health does not report the real call_tool as rejected: %s", body)
	}

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			// tools/list: exactly the meta-tools, unpaged.
			list := postMCP(t, gw.URL, "big", era, 1, "tools/list", nil).result(t, era)
			var tools []struct {
				Name         string          `json:"name"`
				InputSchema  json.RawMessage `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			}
			if err := json.Unmarshal(list["tools"], &tools); err != nil {
				t.Fatal(err)
			}
			if len(tools) != 2 || tools[0].Name != "call_tool" || tools[1].Name != "search_tools" || list["nextCursor"] != nil {
				t.Fatalf("tools/list = %s, want call_tool and search_tools on one page", list["tools"])
			}
			if len(tools[1].OutputSchema) == 0 || !bytes.Contains(tools[1].InputSchema, []byte(`"maximum":4`)) {
				t.Errorf("search_tools definition: inputSchema %s outputSchema %s", tools[1].InputSchema, tools[1].OutputSchema)
			}

			// search_tools: a shortlist of real tools with their declared fields.
			res := postMCP(t, gw.URL, "big", era, 2, "tools/call", map[string]any{
				"name": "search_tools", "arguments": map[string]any{"query": "create an invoice"}}).result(t, era)
			texts, isErr, sc := callResult(t, res)
			var shortlist struct {
				Tools []shortlistEntry `json:"tools"`
			}
			if err := json.Unmarshal(sc, &shortlist); err != nil || isErr || len(texts) != 1 {
				t.Fatalf("search_tools result %s: %v", res, err)
			}
			if n := len(shortlist.Tools); n == 0 || n > 4 || shortlist.Tools[0].name() != "billing_invoice_create" {
				t.Fatalf("shortlist = %s, want billing_invoice_create first and at most 4 tools", sc)
			}
			if texts[0] != string(sc) {
				t.Errorf("text %q does not repeat structuredContent %s", texts[0], sc)
			}
			for _, e := range shortlist.Tools {
				if got := slices.Sorted(maps.Keys(e)); !slices.Equal(got, []string{"description", "inputSchema", "name", "title"}) {
					t.Errorf("shortlist entry %s has fields %v", e.name(), got)
				}
				want, _ := json.Marshal(declared[e.name()]["inputSchema"])
				if string(e["inputSchema"]) != string(want) {
					t.Errorf("%s inputSchema = %s, want the declared %s", e.name(), e["inputSchema"], want)
				}
			}
			res = postMCP(t, gw.URL, "big", era, 3, "tools/call", map[string]any{
				"name": "search_tools", "arguments": map[string]any{"query": "customer", "limit": 2}}).result(t, era)
			if _, _, sc := callResult(t, res); json.Unmarshal(sc, &shortlist) != nil || len(shortlist.Tools) != 2 {
				t.Errorf("search_tools with limit 2 = %s", sc)
			}

			// call_tool: routed to the Tool Service with the inner tool's
			// path and arguments.
			before := svc.calls.Load()
			res = postMCP(t, gw.URL, "big", era, 4, "tools/call", map[string]any{
				"name": "call_tool", "arguments": map[string]any{
					"name": "billing_invoice_create", "arguments": map[string]any{"name": "ACME", "amount": 12.5}}}).result(t, era)
			texts, isErr, _ = callResult(t, res)
			if isErr || len(texts) != 1 || texts[0] != "ran billing_invoice_create" {
				t.Fatalf("call_tool result = %s", res)
			}
			if svc.calls.Load() != before+1 || *svc.lastPath.Load() != "/tools/billing_invoice_create" {
				t.Fatalf("Tool Service saw %d calls, last path %q", svc.calls.Load()-before, *svc.lastPath.Load())
			}
			if got := svc.lastHeaders.Load().Get("x-toolmesh-tool"); got != "billing_invoice_create" {
				t.Errorf("x-toolmesh-tool = %q, want the inner tool", got)
			}
			var args map[string]any
			if err := json.Unmarshal(*svc.lastBody.Load(), &args); err != nil || args["name"] != "ACME" || args["amount"] != 12.5 || len(args) != 2 {
				t.Errorf("Tool Service got body %s, want the inner arguments", *svc.lastBody.Load())
			}

			// The inner arguments are validated against the inner tool's schema.
			res = postMCP(t, gw.URL, "big", era, 5, "tools/call", map[string]any{
				"name": "call_tool", "arguments": map[string]any{
					"name": "billing_invoice_create", "arguments": map[string]any{"amount": "twelve"}}}).result(t, era)
			if _, isErr, _ := callResult(t, res); !isErr || svc.calls.Load() != before+1 {
				t.Errorf("schema-invalid inner arguments: %s; Tool Service calls %d", res, svc.calls.Load()-before)
			}

			// Unknown and malformed call_tool, and a direct call of a real tool.
			postMCP(t, gw.URL, "big", era, 6, "tools/call", map[string]any{
				"name": "call_tool", "arguments": map[string]any{"name": "nope"}}).wantError(t, -32602, "unknown tool")
			postMCP(t, gw.URL, "big", era, 7, "tools/call", map[string]any{
				"name": "call_tool", "arguments": map[string]any{"name": 42}}).wantError(t, -32602, "name must be a string")
			res = postMCP(t, gw.URL, "big", era, 8, "tools/call", map[string]any{
				"name": "hr_employee_get", "arguments": map[string]any{"employee_id": "e-1"}}).result(t, era)
			if texts, isErr, _ := callResult(t, res); isErr || texts[0] != "ran hr_employee_get" || *svc.lastPath.Load() != "/tools/hr_employee_get" {
				t.Errorf("direct call in search mode = %s", res)
			}

			// A query no tool matches: an ordinary result, empty shortlist.
			res = postMCP(t, gw.URL, "big", era, 9, "tools/call", map[string]any{
				"name": "search_tools", "arguments": map[string]any{"query": "order a large pepperoni pizza"}}).result(t, era)
			texts, isErr, sc = callResult(t, res)
			if isErr || string(sc) != `{"tools":[]}` || len(texts) != 1 || !strings.Contains(texts[0], "No tool matches") {
				t.Errorf("no-route search = %s", res)
			}

			// Invalid search arguments are an isError result.
			res = postMCP(t, gw.URL, "big", era, 10, "tools/call", map[string]any{
				"name": "search_tools", "arguments": map[string]any{"query": "invoice", "limit": 9}}).result(t, era)
			if texts, isErr, _ := callResult(t, res); !isErr || !strings.Contains(texts[0], "between 1 and 4") {
				t.Errorf("search_tools with limit 9 = %s", res)
			}
		})
	}

	for _, tc := range []struct{ name, pin string }{{"go-sdk-stateless", ""}, {"go-sdk-legacy", "2025-11-25"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e-search", Version: "1.0.0"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint: gw.URL + "/mcp/big", DisableStandaloneSSE: true, MaxRetries: -1,
			}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if len(lt.Tools) != 2 || lt.Tools[0].Name != "call_tool" || lt.Tools[1].Name != "search_tools" || lt.Tools[1].OutputSchema == nil {
				t.Fatalf("tools/list = %+v", lt.Tools)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "update a shipment"}})
			if err != nil || res.IsError {
				t.Fatalf("search_tools: %v %+v", err, res)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			var shortlist struct {
				Tools []struct {
					Name        string         `json:"name"`
					InputSchema map[string]any `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(sc, &shortlist); err != nil || len(shortlist.Tools) == 0 || shortlist.Tools[0].Name != "logistics_shipment_update" {
				t.Fatalf("search_tools structuredContent = %s", sc)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{
				"name": shortlist.Tools[0].Name, "arguments": map[string]any{"shipment_id": "s-9"}}})
			if err != nil || res.IsError || textOf(t, res) != "ran logistics_shipment_update" {
				t.Fatalf("call_tool: %v %+v", err, res)
			}
			if got := string(*svc.lastBody.Load()); got != `{"shipment_id":"s-9"}` {
				t.Errorf("Tool Service got %s", got)
			}
		})
	}
}

// pagedTools is a manifest of trivial tools with the given names.
func pagedTools(names ...string) []map[string]any {
	var tools []map[string]any
	for _, n := range names {
		tools = append(tools, map[string]any{"name": n, "version": "1", "description": "Tool " + n, "inputSchema": objectSchema})
	}
	return tools
}

// listPage asks route for one tools/list page and returns its names and the
// next cursor.
func listPage(t *testing.T, base, route, era string, cursor string) ([]string, string) {
	t.Helper()
	params := map[string]any{}
	if cursor != "" {
		params["cursor"] = cursor
	}
	res := postMCP(t, base, route, era, 1, "tools/list", params).result(t, era)
	var tools []struct{ Name string }
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	var next string
	if raw, ok := res["nextCursor"]; ok {
		if err := json.Unmarshal(raw, &next); err != nil || next == "" {
			t.Fatalf("nextCursor = %s", raw)
		}
	}
	return names, next
}

// TestToolsListPagination walks a full-mode route with pageSize 3 in both
// eras: every page in order, the same walk twice, and a walk whose cursor
// crosses a snapshot change (the Tool Service's manifest changes mid-walk):
// no unchanged tool is repeated or skipped, a removed tool is not listed, a
// tool added after the cursor point is.
func TestToolsListPagination(t *testing.T) {
	initial := []string{"p00", "p01", "p02", "p03", "p04", "p05", "p06", "p07", "p08", "p09"}
	services := map[string]*toolService{}
	var routes []portalRoute
	catalogs := map[string]map[string]any{}
	for _, era := range eras {
		s := newToolService(t, "pages-"+era, pagedTools(initial...))
		services[era] = s
		routes = append(routes, portalRoute{Key: "pages-" + era, Services: []*toolService{s}})
		catalogs["pages-"+era] = map[string]any{"mode": "full", "pageSize": 3}
	}
	portal := writePortal(t, routes...)
	setCatalog(t, portal, catalogs)
	gw := startGateway(t, portal, "--refresh-interval", "200ms")

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			route := "pages-" + era
			walk := func(cursor string) (names []string, sizes []int, cursors []string) {
				for range 20 {
					page, next := listPage(t, gw.URL, route, era, cursor)
					names, sizes = append(names, page...), append(sizes, len(page))
					if next == "" {
						return names, sizes, cursors
					}
					cursors = append(cursors, next)
					cursor = next
				}
				t.Fatalf("walk of %s did not end", route)
				return nil, nil, nil
			}
			names, sizes, cursors := walk("")
			if !slices.Equal(names, initial) || !slices.Equal(sizes, []int{3, 3, 3, 1}) {
				t.Fatalf("walk = %v in pages of %v, want %v in pages of 3,3,3,1", names, sizes, initial)
			}
			again, _, cursors2 := walk("")
			if !slices.Equal(again, names) || !slices.Equal(cursors2, cursors) {
				t.Fatalf("second walk %v (cursors %v) differs from the first %v (%v)", again, cursors2, names, cursors)
			}
			postMCP(t, gw.URL, route, era, 2, "tools/list", map[string]any{"cursor": "not-a-cursor"}).wantError(t, -32602, "cursor")

			// Walk one page, change the manifest, wait for the new snapshot,
			// and continue with the old cursor.
			first, cursor := listPage(t, gw.URL, route, era, "")
			version := healthRoutes(t, gw)[route].SnapshotVersion
			changed := []string{"p00", "p01", "p015", "p02", "p03", "p04", "p05", "p06", "p07", "p075", "p09"}
			services[era].setTools(pagedTools(changed...))
			eventually(t, 20*time.Second, route+" to take the new manifest", func() bool {
				return healthRoutes(t, gw)[route].SnapshotVersion != version
			})
			rest, _, _ := walk(cursor)
			all := append(first, rest...)
			want := []string{"p00", "p01", "p02", "p03", "p04", "p05", "p06", "p07", "p075", "p09"}
			if !slices.Equal(all, want) {
				t.Fatalf("walk across the change = %v, want %v (p015 was added before the cursor, p08 removed, p075 added after)", all, want)
			}
			services[era].setTools(pagedTools(initial...)) // leave the route as it was
		})
	}
}
