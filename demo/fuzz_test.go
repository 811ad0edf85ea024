package demo

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FuzzToolCall feeds arbitrary bodies to every active demo tool: the argument
// parser must never panic, must answer a known status, and every JSON reply
// must be valid JSON.
func FuzzToolCall(f *testing.F) {
	for _, seed := range []string{`{}`, `{"ms":0}`, `{"a":1,"b":2}`, `{"message":"x"}`, `[]`, `null`, `{"a":1e999}`, `{"message":"\ud800"}`, ``} {
		f.Add(seed)
	}
	handlers := map[string]http.Handler{}
	var tools []string
	for _, name := range []string{ClockService, CalcService, TextService} {
		svc := newService(name)
		handlers[name] = svc.handler(discard())
		for _, tl := range svc.tools {
			if tl.Active && tl.Name != "time.sleep" { // sleep is bounded by 60s; keep the fuzzer fast
				tools = append(tools, name+"/"+tl.Name)
			}
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, st := range tools {
			svc, tool, _ := strings.Cut(st, "/")
			rec := post(t, t.Context(), handlers[svc], tool, body)
			switch rec.Code {
			case 200, 400, 403, 413, 422, 500:
			default:
				t.Fatalf("%s %q: status %d", tool, body, rec.Code)
			}
			if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %q: invalid JSON reply %q", tool, body, rec.Body)
			}
		}
	})
}
