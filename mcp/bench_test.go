package mcp

import (
	"encoding/json"
	"fmt"
	"testing"
)

func benchCatalog(b *testing.B, n int) *fakeCatalog {
	tools := make([]Tool, n)
	for i := range tools {
		tools[i] = Tool{
			Name:        fmt.Sprintf("tool_%05d", i),
			Title:       fmt.Sprintf("Tool %d", i),
			Description: "Looks things up in system " + fmt.Sprint(i) + " and returns a short summary.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look up"},"limit":{"type":"integer","minimum":1}},"required":["query"]}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true}`),
		}
	}
	return newFakeCatalog(b, n, tools...)
}

// BenchmarkHandleToolsList measures tools/list over 10,000 tools: the tools
// array is serialized once, so a request costs one copy into the envelope.
func BenchmarkHandleToolsList(b *testing.B) {
	s := NewServer(Config{})
	cat := benchCatalog(b, 10000)
	for _, era := range []struct {
		name string
		req  *HTTPRequest
		body []byte
	}{
		{"legacy", legacyReq(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)},
		{"stateless", modernReq("tools/list", ""), []byte(modernBody("1", "tools/list", ""))},
	} {
		b.Run(era.name, func(b *testing.B) {
			page, _, _ := cat.ToolsPage("")
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				out := s.Handle(era.req, era.body, cat)
				if out.Reply == nil || out.Reply.Status != 200 {
					b.Fatal("no reply")
				}
			}
		})
	}
}

// BenchmarkHandleToolsCall measures parsing and checking a tools/call that
// is then routed.
func BenchmarkHandleToolsCall(b *testing.B) {
	s := NewServer(Config{})
	cat := benchCatalog(b, 10000)
	args := `{"query":"the weather in Lisbon next week, with hourly detail","limit":5,"filters":{"units":"metric","lang":"en"}}`
	for _, era := range []struct {
		name string
		req  *HTTPRequest
		body []byte
	}{
		{"legacy", legacyReq(), []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"tool_04242","arguments":` + args + `}}`)},
		{"stateless", modernReq("tools/call", "tool_04242"), []byte(modernBody("42", "tools/call", `"name":"tool_04242","arguments":`+args))},
	} {
		b.Run(era.name, func(b *testing.B) {
			b.SetBytes(int64(len(era.body)))
			b.ReportAllocs()
			for b.Loop() {
				if out := s.Handle(era.req, era.body, cat); out.Call == nil {
					b.Fatal("no call")
				}
			}
		})
	}
}

// BenchmarkCallResult measures mapping a typical Tool Service reply.
func BenchmarkCallResult(b *testing.B) {
	s := NewServer(Config{})
	c := &Call{ID: json.RawMessage("42"), Era: EraStateless, Version: Version20260728, Tool: "t"}
	up := Upstream{Status: 200, ContentType: "application/json",
		Body: []byte(`{"content":[{"type":"text","text":"21°C and sunny in Lisbon"}],"structuredContent":{"temp":21,"sky":"clear"}}`)}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.CallResult(c, up)
	}
}
