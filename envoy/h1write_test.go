package envoy

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
)

// h1Written is a request as net/http writes it (or its error) and as it
// is written directly; ok is false when the exchange does not take the
// direct way.
type h1Written struct {
	netHTTP []byte
	netErr  error
	direct  []byte
	ok      bool
}

// h1WriteBoth writes the request the exchange would send to addr both
// ways: through upstreamRequest and (*http.Request).Write, and directly
// (h1Request).
func h1WriteBoth(t *testing.T, x *exchange, addr string) h1Written {
	t.Helper()
	var nb bytes.Buffer
	req, err := x.upstreamRequest(context.Background(), &cluster{scheme: "http"}, addr)
	if err == nil {
		err = validRequest(req)
	}
	if err == nil {
		w := bufio.NewWriter(&nb)
		if err = req.Write(w); err == nil {
			err = w.Flush()
		}
	}
	hr, ok := x.h1Request(context.Background(), addr)
	if !ok {
		return h1Written{netHTTP: nb.Bytes(), netErr: err}
	}
	var db bytes.Buffer
	w := bufio.NewWriter(&db)
	if werr := hr.write(w); werr != nil {
		t.Fatalf("direct write: %v", werr)
	}
	if werr := w.Flush(); werr != nil {
		t.Fatalf("direct write: %v", werr)
	}
	return h1Written{nb.Bytes(), err, db.Bytes(), true}
}

// h1TestExchange is an exchange with the given request headers ("name:
// value" lines) and buffered body.
func h1TestExchange(method, path, authority, headers string, body []byte) *exchange {
	m := &headerMap{}
	m.add(":authority", authority)
	m.add(":path", path)
	m.add(":method", method)
	m.add(":scheme", "http")
	for _, line := range strings.Split(headers, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m.add(k, v)
		}
	}
	return &exchange{reqH: m, req: reqBody{buf: body}}
}

func TestH1RequestWrite(t *testing.T) {
	for _, tt := range []struct {
		name, method, path, authority, headers string
		body                                   string
		direct                                 bool
	}{
		{"routed call", "POST", "/mcp/tools?x=1", "tools.local", "content-type:application/json\nx-request-id:abc\nuser-agent:ua\naccept:a\naccept:b\nx-envoy-expected-rq-timeout-ms:15000", `{"a":1}`, true},
		{"content-length", "POST", "/a", "h:80", "content-length:3\nx-b: spaced \t", "abc", true},
		{"empty POST", "POST", "/a", "h", "", "", true},
		{"empty GET", "GET", "/a?", "h", "connection:close\nkeep-alive:1\nupgrade:x\nhost:other\ntrailer:t", "", true},
		{"no authority", "PUT", "/", "", "user-agent:\nuser-agent:second", "x", true},
		{"blank user agent", "PATCH", "/", "[::1]:8080", "user-agent:  ", "x", true},
		{"mixed-case names", "POST", "/", "h", "X-Foo:1\nx-foo:2\nX-FOO:3", "x", true},
		{"GET with unknown length", "GET", "/", "h", "", "body", false},
		{"length mismatch", "POST", "/", "h", "content-length:5", "abc", false},
		{"invalid method", "GE T", "/", "h", "", "", false},
		{"CONNECT", "CONNECT", "/", "h", "", "", false},
		{"absolute path", "GET", "//a", "h", "", "", false},
		{"control character in path", "GET", "/a\x01", "h", "", "", false},
		{"IDNA host", "GET", "/", "bücher.example", "", "", false},
		{"zone", "GET", "/", "[fe80::1%25eth0]:80", "", "", false},
		{"invalid name", "GET", "/", "h", "a b:1", "", false},
		{"invalid value", "GET", "/", "h", "a:\x01", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := h1TestExchange(tt.method, tt.path, tt.authority, tt.headers, []byte(tt.body))
			w := h1WriteBoth(t, x, "10.0.0.1:9000")
			want, werr, got, ok := w.netHTTP, w.netErr, w.direct, w.ok
			if ok != tt.direct {
				t.Fatalf("direct = %v, want %v (net/http: %v)", ok, tt.direct, werr)
			}
			if !ok {
				return
			}
			if werr != nil {
				t.Fatalf("net/http refused a request written directly: %v", werr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("direct:\n%q\nnet/http:\n%q", got, want)
			}
		})
	}
}

// FuzzH1RequestWrite checks that a request written directly is byte for
// byte what net/http writes for it, and that net/http accepts it.
func FuzzH1RequestWrite(f *testing.F) {
	f.Add("POST", "/mcp/x?y=1", "h:80", "content-type:application/json\nuser-agent:u", []byte(`{}`), uint8(0), "")
	f.Add("GET", "/", "", "a: b \nA:c", []byte(nil), uint8(1), "")
	f.Add("PUT", "/a", "[::1]:1", "content-length:2", []byte("ab"), uint8(2), "2")
	f.Fuzz(func(t *testing.T, method, path, authority, headers string, body []byte, clMode uint8, cl string) {
		switch clMode % 3 {
		case 1:
			headers += "\ncontent-length:" + strings.Repeat("1", len(body)%3)
		case 2:
			headers += "\ncontent-length:" + cl
		}
		x := h1TestExchange(method, path, authority, headers, body)
		w := h1WriteBoth(t, x, "127.0.0.1:9")
		want, werr, got, ok := w.netHTTP, w.netErr, w.direct, w.ok
		if !ok {
			return
		}
		if werr != nil {
			t.Fatalf("net/http refused a request written directly: %v", werr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("direct:\n%q\nnet/http:\n%q", got, want)
		}
	})
}
