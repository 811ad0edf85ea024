package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// post calls tool on the handler h with body and returns the recorded reply.
func post(t *testing.T, ctx context.Context, h http.Handler, tool, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestToolCalls(t *testing.T) {
	fixed := time.Date(2026, 7, 28, 12, 30, 0, 0, time.FixedZone("CEST", 2*3600))
	clock := clockService(func() time.Time { return fixed }).handler(discard())
	calc := Handler(CalcService)
	text := Handler(TextService)

	tests := []struct {
		name       string
		h          http.Handler
		tool, body string
		wantStatus int
		wantType   string // media type prefix
		wantBody   string // exact body; "" skips the check
		wantIn     string // substring of the body
	}{
		{"time.now", clock, "time.now", `{}`, 200, "application/json", `{"utc":"2026-07-28T10:30:00Z","unix":1785234600}`, ""},
		{"time.now empty body", clock, "time.now", ``, 200, "application/json", `{"utc":"2026-07-28T10:30:00Z","unix":1785234600}`, ""},
		{"time.now unknown argument", clock, "time.now", `{"tz":"UTC"}`, 400, "application/json", "", `unknown field \"tz\"`},
		{"time.sleep zero", clock, "time.sleep", `{"ms":0}`, 200, "application/json", `{"sleptMs":0}`, ""},
		{"time.sleep missing ms", clock, "time.sleep", `{}`, 400, "application/json", "", `\"ms\" is required`},
		{"time.sleep too long", clock, "time.sleep", `{"ms":60001}`, 400, "application/json", "", "between 0 and 60000"},
		{"time.sleep negative", clock, "time.sleep", `{"ms":-1}`, 400, "application/json", "", "between 0 and 60000"},
		{"time.sleep huge", clock, "time.sleep", `{"ms":9223372036854775807}`, 400, "application/json", "", "between 0 and 60000"},
		{"time.sleep fraction", clock, "time.sleep", `{"ms":1.5}`, 400, "application/json", "", "invalid arguments"},
		{"math.add", calc, "math.add", `{"a":2,"b":3}`, 200, "application/json", `{"content":[{"text":"5","type":"text"}],"structuredContent":{"sum":5}}`, ""},
		{"math.add fractions", calc, "math.add", `{"a":0.5,"b":-2}`, 200, "application/json", `{"content":[{"text":"-1.5","type":"text"}],"structuredContent":{"sum":-1.5}}`, ""},
		{"math.add missing b", calc, "math.add", `{"a":2}`, 400, "application/json", "", `\"a\" and \"b\" are required`},
		{"math.add string", calc, "math.add", `{"a":"2","b":3}`, 400, "application/json", "", "invalid arguments"},
		{"math.add overflow", calc, "math.add", `{"a":1e308,"b":1e308}`, 422, "application/json", "", "not a finite number"},
		{"math.multiply", calc, "math.multiply", `{"a":4,"b":2.5}`, 200, "application/json", `10`, ""},
		{"text.echo", text, "text.echo", `{"message":"héllo"}`, 200, "text/plain", `héllo`, ""},
		{"text.echo empty", text, "text.echo", `{"message":""}`, 200, "text/plain", ``, ""},
		{"text.echo too long", text, "text.echo", `{"message":"` + strings.Repeat("x", maxMessageRunes+1) + `"}`, 400, "application/json", "", "longer than 4096"},
		{"text.upper", text, "text.upper", `{"message":"MCP gateway"}`, 200, "text/plain", `MCP GATEWAY`, ""},
		{"text.fail", text, "text.fail", `{"reason":"on purpose"}`, 500, "application/json", `{"error":{"message":"text.fail always fails: on purpose","status":500}}`, ""},
		{"text.forbidden", text, "text.forbidden", `{}`, 403, "application/json", "", "may not use text.forbidden"},
		{"unknown tool", text, "text.nope", `{}`, 404, "application/json", "", `unknown tool \"text.nope\"`},
		{"tool of another service", text, "math.add", `{"a":1,"b":2}`, 404, "application/json", "", "unknown tool"},
		{"arguments not an object", calc, "math.add", `[1,2]`, 400, "application/json", "", "arguments JSON object"},
		{"arguments null", calc, "math.add", `null`, 400, "application/json", "", "arguments JSON object"},
		{"not JSON", calc, "math.add", `{"a":`, 400, "application/json", "", "arguments JSON object"},
		{"trailing data", calc, "math.add", `{"a":1,"b":2} {}`, 400, "application/json", "", "arguments JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := post(t, t.Context(), tt.h, tt.tool, tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("content-type = %q, want %s", ct, tt.wantType)
			}
			got := rec.Body.String()
			if tt.wantBody != "" || (tt.wantIn == "" && got != "") {
				if tt.wantType == "application/json" {
					requireJSONEqual(t, got, tt.wantBody)
				} else if got != tt.wantBody {
					t.Errorf("body = %q, want %q", got, tt.wantBody)
				}
			}
			if !strings.Contains(got, tt.wantIn) {
				t.Errorf("body %s does not contain %q", got, tt.wantIn)
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	h := Handler(CalcService)
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		wantStatus  int
	}{
		{"wrong content type", http.MethodPost, "/tools/math.add", "text/plain", http.StatusUnsupportedMediaType},
		{"json with charset", http.MethodPost, "/tools/math.add", "application/json; charset=utf-8", http.StatusOK},
		{"GET a tool", http.MethodGet, "/tools/math.add", "", http.StatusMethodNotAllowed},
		{"POST the manifest", http.MethodPost, "/manifest", "application/json", http.StatusMethodNotAllowed},
		{"healthz", http.MethodGet, "/healthz", "", http.StatusOK},
		{"unknown path", http.MethodGet, "/nope", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(t.Context(), tt.method, tt.path, strings.NewReader(`{"a":1,"b":2}`))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
		})
	}
}

func TestArgumentsTooLarge(t *testing.T) {
	body := `{"message":"` + strings.Repeat("x", maxArgumentBytes) + `"}`
	rec := post(t, t.Context(), Handler(TextService), "text.echo", body)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", rec.Code)
	}
}

// TestSleepHonoursCancellation checks that time.sleep gives up when its caller
// goes away instead of sleeping for the full minute.
func TestSleepHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := post(t, ctx, Handler(ClockService), "time.sleep", `{"ms":60000}`)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "sleep cancelled") {
		t.Fatalf("got %d %s, want 503 sleep cancelled", rec.Code, rec.Body)
	}
}

func TestHandlerUnknownService(t *testing.T) {
	if h := Handler("weather"); h != nil {
		t.Fatalf("Handler(weather) = %v, want nil", h)
	}
}

// requireJSONEqual compares two JSON documents by value.
func requireJSONEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got invalid JSON %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %q: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("body = %s, want %s", gb, wb)
	}
}
