package mcp

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestCheckHeaders(t *testing.T) {
	def := NewServer(Config{})
	conf := NewServer(Config{
		AllowedOrigins: []string{"https://app.example.com", "tools.example.com:8443", "ide.example.org", "https://[2001:db8::1]:9000"},
		AllowedHosts:   []string{"gw.example.com", "localhost:8080"},
		MaxBodyBytes:   100,
	})
	anyOrigin := NewServer(Config{AllowedOrigins: []string{"*"}})
	tests := []struct {
		name   string
		s      *Server
		mod    func(*HTTPRequest)
		status int // 0: passes
		code   int // -1: empty body
	}{
		{"post passes", def, nil, 0, 0},
		{"GET is 405", def, func(r *HTTPRequest) { r.Method = "GET" }, 405, -1},
		{"DELETE is 405", def, func(r *HTTPRequest) { r.Method = "DELETE" }, 405, -1},
		{"lower-case post is 405", def, func(r *HTTPRequest) { r.Method = "post" }, 405, -1},

		{"charset parameter", def, func(r *HTTPRequest) { r.ContentType = "application/json; charset=utf-8" }, 0, 0},
		{"json-rpc media type", def, func(r *HTTPRequest) { r.ContentType = "application/json-rpc" }, 0, 0},
		{"media type case", def, func(r *HTTPRequest) { r.ContentType = "Application/JSON" }, 0, 0},
		{"text/plain is 415", def, func(r *HTTPRequest) { r.ContentType = "text/plain" }, 415, CodeInvalidRequest},
		{"missing content type is 415", def, func(r *HTTPRequest) { r.ContentType = "" }, 415, CodeInvalidRequest},
		{"json suffix is 415", def, func(r *HTTPRequest) { r.ContentType = "application/jsonx" }, 415, CodeInvalidRequest},

		{"accept absent", def, func(r *HTTPRequest) { r.Accept, r.HasAccept = "", false }, 0, 0},
		{"accept empty", def, func(r *HTTPRequest) { r.Accept = "" }, 0, 0},
		{"accept json alone", def, func(r *HTTPRequest) { r.Accept = "application/json" }, 0, 0},
		{"accept sse alone", def, func(r *HTTPRequest) { r.Accept = "text/event-stream" }, 0, 0},
		{"accept any", def, func(r *HTTPRequest) { r.Accept = "*/*" }, 0, 0},
		{"accept application any", def, func(r *HTTPRequest) { r.Accept = "application/*;q=0.5" }, 0, 0},
		{"accept among others", def, func(r *HTTPRequest) { r.Accept = "text/html, Application/Json;q=0.9" }, 0, 0},
		{"accept html is 406", def, func(r *HTTPRequest) { r.Accept = "text/html" }, 406, CodeInvalidRequest},
		{"accept text any is 406", def, func(r *HTTPRequest) { r.Accept = "text/*" }, 406, CodeInvalidRequest},
		{"accept json q=0 is 406", def, func(r *HTTPRequest) { r.Accept = "application/json;q=0, text/html" }, 406, CodeInvalidRequest},

		{"no origin", def, func(r *HTTPRequest) { r.Origin, r.HasOrigin = "", false }, 0, 0},
		{"origin localhost any port", def, originAt("http://localhost:5173", ""), 0, 0},
		{"origin 127.0.0.1", def, originAt("https://127.0.0.1", ""), 0, 0},
		{"origin ipv6 loopback", def, originAt("http://[::1]:3000", ""), 0, 0},
		{"origin case", def, originAt("HTTP://LocalHost:1", ""), 0, 0},
		{"origin evil is 403", def, originAt("http://evil.example.com", ""), 403, CodeInvalidRequest},
		{"origin localhost suffix is 403", def, originAt("http://localhost.evil.com", ""), 403, CodeInvalidRequest},
		{"origin null is 403", def, originAt("null", ""), 403, CodeInvalidRequest},
		{"empty origin is 403", def, originAt("", ""), 403, CodeInvalidRequest},

		{"configured scheme host", conf, originAt("https://app.example.com", "gw.example.com"), 0, 0},
		{"configured scheme default port", conf, originAt("https://app.example.com:443", "gw.example.com"), 0, 0},
		{"configured scheme other port is 403", conf, originAt("https://app.example.com:8443", "gw.example.com"), 403, CodeInvalidRequest},
		{"configured scheme other scheme is 403", conf, originAt("http://app.example.com", "gw.example.com"), 403, CodeInvalidRequest},
		{"configured host:port", conf, originAt("http://tools.example.com:8443", "gw.example.com"), 0, 0},
		{"configured host:port other port is 403", conf, originAt("https://tools.example.com", "gw.example.com"), 403, CodeInvalidRequest},
		{"configured host any port", conf, originAt("https://ide.example.org:1234", "gw.example.com"), 0, 0},
		{"configured ipv6", conf, originAt("https://[2001:db8::1]:9000", "gw.example.com"), 0, 0},
		{"configured list drops loopback", conf, originAt("http://localhost", "gw.example.com"), 403, CodeInvalidRequest},
		{"wildcard origin", anyOrigin, originAt("https://anything.example", ""), 0, 0},

		{"host any port", conf, func(r *HTTPRequest) { r.Host = "GW.example.com:443" }, 0, 0},
		{"host exact port", conf, func(r *HTTPRequest) { r.Host = "localhost:8080" }, 0, 0},
		{"host other port is 403", conf, func(r *HTTPRequest) { r.Host = "localhost:9090" }, 403, CodeInvalidRequest},
		{"host unknown is 403", conf, func(r *HTTPRequest) { r.Host = "evil.example.com" }, 403, CodeInvalidRequest},
		{"host empty is 403", conf, func(r *HTTPRequest) { r.Host = "" }, 403, CodeInvalidRequest},
		{"hosts unchecked by default", def, func(r *HTTPRequest) { r.Host = "evil.example.com" }, 0, 0},

		{"length at limit", conf, func(r *HTTPRequest) { r.Host, r.ContentLength = "gw.example.com", 100 }, 0, 0},
		{"length over limit is 413", conf, func(r *HTTPRequest) { r.Host, r.ContentLength = "gw.example.com", 101 }, 413, CodeInvalidRequest},
		{"length unknown", conf, func(r *HTTPRequest) { r.Host, r.ContentLength = "gw.example.com", -1 }, 0, 0},
		{"default limit 1 MiB", def, func(r *HTTPRequest) { r.ContentLength = 1<<20 + 1 }, 413, CodeInvalidRequest},

		{"version 2026", def, func(r *HTTPRequest) { r.ProtocolVersion, r.HasProtocolVersion = "2026-07-28", true }, 0, 0},
		{"version 2025-11-25", def, func(r *HTTPRequest) { r.ProtocolVersion, r.HasProtocolVersion = "2025-11-25", true }, 0, 0},
		{"version 2025-06-18", def, func(r *HTTPRequest) { r.ProtocolVersion, r.HasProtocolVersion = "2025-06-18", true }, 0, 0},
		{"version 2025-03-26", def, func(r *HTTPRequest) { r.ProtocolVersion, r.HasProtocolVersion = "2025-03-26", true }, 0, 0},
		{"unsupported version is left to Handle", def, func(r *HTTPRequest) { r.ProtocolVersion, r.HasProtocolVersion = "2024-11-05", true }, 0, 0},

		// Order: 405 before 403 before 413 before 415 before 406 before 400.
		{"405 first", def, func(r *HTTPRequest) { r.Method, r.Origin, r.HasOrigin = "GET", "http://evil", true }, 405, -1},
		{"403 before 415", def, func(r *HTTPRequest) { r.ContentType, r.Origin, r.HasOrigin = "text/plain", "http://evil", true }, 403, CodeInvalidRequest},
		{"413 before 415", def, func(r *HTTPRequest) { r.ContentType, r.ContentLength = "text/plain", 1<<30 }, 413, CodeInvalidRequest},
		{"415 before 406", def, func(r *HTTPRequest) { r.ContentType, r.Accept = "text/plain", "text/html" }, 415, CodeInvalidRequest},
		{"406 before 400", def, func(r *HTTPRequest) {
			r.Accept, r.ProtocolVersion, r.HasProtocolVersion = "text/html", "1900-01-01", true
		}, 406, CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := legacyReq()
			if tt.mod != nil {
				tt.mod(r)
			}
			got := tt.s.CheckHeaders(r)
			if tt.status == 0 {
				if got != nil {
					t.Fatalf("CheckHeaders = %d %s, want nil", got.Status, got.Body)
				}
				return
			}
			checkReply(t, got, tt.status, tt.code, "null")
			if tt.status == 405 {
				if allow, _ := header(got, "Allow"); allow != "POST" {
					t.Fatalf("Allow = %q, want POST", allow)
				}
			}
		})
	}
}

// originAt sets Origin and, when host is not empty, Host.
// TestCheckSessionEnd: a client's DELETE of its session passes the Origin
// and Host allow-lists and the protocol version header as a POST does.
func TestCheckSessionEnd(t *testing.T) {
	s := NewServer(Config{})
	for _, tc := range []struct {
		name   string
		mod    func(*HTTPRequest)
		status int // 0: passes
	}{
		{"passes", nil, 0},
		{"no version header", func(r *HTTPRequest) { r.ProtocolVersion, r.HasProtocolVersion = "", false }, 0},
		{"foreign origin", originAt("http://evil.example.com", ""), 403},
		{"unsupported version", func(r *HTTPRequest) { r.ProtocolVersion = "1999-01-01" }, 400},
	} {
		r := &HTTPRequest{Method: "DELETE", ProtocolVersion: Version20251125, HasProtocolVersion: true}
		if tc.mod != nil {
			tc.mod(r)
		}
		got := s.CheckSessionEnd(r)
		if (got == nil) != (tc.status == 0) || (got != nil && got.Status != tc.status) {
			t.Errorf("%s: %+v, want status %d", tc.name, got, tc.status)
		}
	}
}

func originAt(origin, host string) func(*HTTPRequest) {
	return func(r *HTTPRequest) {
		r.Origin, r.HasOrigin = origin, true
		if host != "" {
			r.Host = host
		}
	}
}

// TestUnsupportedVersionData checks the -32022 error: it comes from Handle so
// that it can carry the request id.
func TestUnsupportedVersionData(t *testing.T) {
	for _, v := range []string{"1900-01-01", "2024-11-05", ""} {
		r := legacyReq()
		r.ProtocolVersion, r.HasProtocolVersion = v, true
		out := NewServer(Config{}).Handle(r, []byte(`{"jsonrpc":"2.0","id":301,"method":"server/discover"}`), nil)
		checkReply(t, out.Reply, 400, CodeUnsupportedProtocolVersion, "301")
	}
	r := legacyReq()
	r.ProtocolVersion, r.HasProtocolVersion = "1900-01-01", true
	out := NewServer(Config{}).Handle(r, []byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`), nil)
	d := checkReply(t, out.Reply, 400, CodeUnsupportedProtocolVersion, "7")
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if err := json.Unmarshal(d.err.Data, &data); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}
	if !slices.Equal(data.Supported, want) || data.Requested != "1900-01-01" {
		t.Fatalf("data = %+v, want supported %v requested 1900-01-01", data, want)
	}
}

func TestEmptyAllowedHostsEntries(t *testing.T) {
	// A configured but blank host list must not switch the check off.
	s := NewServer(Config{AllowedHosts: []string{" "}})
	r := legacyReq()
	if got := s.CheckHeaders(r); got == nil || got.Status != 403 {
		t.Fatalf("CheckHeaders = %v, want 403", got)
	}
}

func TestDecodeHeaderValue(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"get_weather", "get_weather", true},
		{"=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界", true},
		{"=?base64?SGVsbG8sIOS4lueVjA?=", "", false}, // unpadded: SEP-2243 rejects bad padding
		{"  get_weather\t", "get_weather", true},     // optional whitespace is not part of the value
		{"=?base64?IHBhZGRlZCA=?=", " padded ", true},
		{"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", true},
		{"=?base64??=", "", true},
		{"=?base64?!!!?=", "", false},
		{"=?BASE64?SGk=?=", "=?BASE64?SGk=?=", true}, // markers are case-sensitive: plain value
		{"=?base64?SGk=", "=?base64?SGk=", true},     // no suffix: plain value
		{"caf\xc3\xa9", "", false},                   // non-ASCII must be encoded
		{"a\nb", "", false},
		{"a\tb c", "a\tb c", true},
	}
	for _, tt := range tests {
		got, ok := DecodeHeaderValue(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPeekCall(t *testing.T) {
	s := NewServer(Config{})
	tests := []struct {
		name string
		r    *HTTPRequest
		want string
		ok   bool
	}{
		{"plain", modernReq("tools/call", "echo"), "echo", true},
		{"base64", modernReq("tools/call", "=?base64?ZWNobw==?="), "echo", true},
		{"bad base64", modernReq("tools/call", "=?base64?*?="), "", false},
		{"empty name", modernReq("tools/call", ""), "", false},
		{"other method", modernReq("tools/list", "echo"), "", false},
		{"legacy header", func() *HTTPRequest {
			r := modernReq("tools/call", "echo")
			r.ProtocolVersion = Version20251125
			return r
		}(), "", false},
		{"no version header", func() *HTTPRequest {
			r := modernReq("tools/call", "echo")
			r.HasProtocolVersion = false
			return r
		}(), "", false},
		{"no method header", func() *HTTPRequest {
			r := modernReq("tools/call", "echo")
			r.HasMcpMethod = false
			return r
		}(), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := s.PeekCall(tt.r)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("PeekCall = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
