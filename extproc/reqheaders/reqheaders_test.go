package reqheaders

import (
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// TestClientHeaders: filters see the client's headers without pseudo- and
// x-toolmesh-* headers, names lowercase, the first of a repeated header;
// a request's usual handful fits the map's first group (two allocations,
// four when it was sized for every header).
func TestClientHeaders(t *testing.T) {
	hm := &corev3.HeaderMap{}
	for _, kv := range [][2]string{{":method", "POST"}, {":path", "/mcp/core"}, {":authority", "gw"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"Accept", "application/json"}, {"accept", "text/event-stream"},
		{"content-length", "90"}, {"x-toolmesh-cluster", "evil"}, {"X-Toolmesh-Tool", "evil"},
		{"mcp-protocol-version", "2025-11-25"}, {"user-agent", "x"}, {"x-request-id", "abc"}} {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
	}
	want := map[string]string{"content-type": "application/json", "accept": "application/json", "content-length": "90",
		"mcp-protocol-version": "2025-11-25", "user-agent": "x", "x-request-id": "abc"}
	if got := ForFilters(hm); !maps.Equal(got, want) {
		t.Errorf("ForFilters = %v, want %v", got, want)
	}
	// Envoy sends names lowercase; lowering one costs a copy.
	hm.Headers = slices.DeleteFunc(hm.Headers, func(h *corev3.HeaderValue) bool { return h.Key != strings.ToLower(h.Key) })
	if n := testing.AllocsPerRun(50, func() { _ = ForFilters(hm) }); n > 2 {
		t.Errorf("ForFilters: %v allocations, want at most 2", n)
	}
}

// readBefore is Read as it was before it was made cheaper (a value read for
// every header, lines joined with strings.Join, Content-Length always
// through strconv): Read must fill the same request and return the same
// headers.
func readBefore(hm *corev3.HeaderMap, r *mcp.HTTPRequest, debug bool) Headers {
	var x Headers
	var accept, encodings []string
	for _, h := range hm.GetHeaders() {
		key := h.GetKey()
		v := procmsg.HeaderValue(h)
		if debug {
			lv := v
			if sensitiveHeaders[key] {
				lv = "[redacted]"
			} else if p, _, q := strings.Cut(v, "?"); q && key == ":path" {
				lv = p + "?[redacted]"
			}
			x.Log = append(x.Log, slog.String(key, lv))
		}
		switch key {
		case ":path":
			r.Path, _, _ = strings.Cut(v, "?")
		case ":method":
			r.Method = v
		case ":authority", "host":
			if r.Host == "" {
				r.Host = v
			}
		case "content-type":
			if r.ContentType == "" {
				r.ContentType = v
			}
		case "accept":
			r.HasAccept = true
			accept = append(accept, v)
		case "accept-encoding":
			encodings = append(encodings, v)
		case "mcp-protocol-version":
			if !r.HasProtocolVersion {
				r.ProtocolVersion, r.HasProtocolVersion = v, true
			}
		case "mcp-method":
			if !r.HasMcpMethod {
				r.McpMethod, r.HasMcpMethod = v, true
			}
		case "mcp-name":
			if !r.HasMcpName {
				r.McpName, r.HasMcpName = v, true
			}
		case "origin":
			if !r.HasOrigin {
				r.Origin, r.HasOrigin = v, true
			}
		case "content-length":
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
				r.ContentLength = n
			}
		case "x-request-id":
			x.RequestID = v
		case "mcp-session-id":
			x.SessionID = v
		default:
			switch {
			case strings.HasPrefix(key, wire.HeaderPrefix):
				if !slices.Contains(x.Owned, key) {
					x.Owned = append(x.Owned, key)
				}
			case strings.HasPrefix(key, MCPParamPrefix):
				r.ParamHeaders = append(r.ParamHeaders, mcp.Header{Key: key[len(MCPParamPrefix):], Value: v})
			}
		}
	}
	r.Accept = strings.Join(accept, ", ")
	r.AcceptEncoding = strings.Join(encodings, ", ")
	return x
}

// headerMapOf is the header map of lines "name: value" (a value in
// value rather than raw_value when the name starts with '~').
func headerMapOf(text string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for line := range strings.SplitSeq(text, "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if name, ok := strings.CutPrefix(k, "~"); ok {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: name, Value: v})
			continue
		}
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	return hm
}

// readSeeds are request headers as clients send them and the odd cases
// Read handles: repeated lines, Content-Length values that are not plain
// digits, owned and Mcp-Param headers.
var readSeeds = []string{
	":method: POST\n:path: /mcp/core?access_token=x\n:scheme: http\n:authority: localhost:10000\ncontent-type: application/json\n" +
		"accept: application/json, text/event-stream\ncontent-length: 90\nx-request-id: req-1\nauthorization: Bearer t\n" +
		"user-agent: test\nmcp-protocol-version: 2025-11-25\naccept-encoding: gzip, deflate",
	"accept: a\naccept: b\naccept: \naccept-encoding: \naccept-encoding: gzip\naccept-encoding: br\nhost: h\n:authority: a",
	"content-length:  12 \ncontent-length: +5\ncontent-length: -1\ncontent-length: 007\ncontent-length: 99999999999999999999",
	"content-length: 999999999999999999\ncontent-length: 1_0\ncontent-length: 0x10\ncontent-length: \u00a012",
	"x-toolmesh-cluster: evil\nx-toolmesh-cluster: again\nmcp-param-Region: eu\nmcp-method: tools/call\nmcp-name: t\n" +
		"origin: o\nmcp-session-id: s\n~content-type: text/plain\n~mcp-method: x\ncookie: c\nmcp-name: second",
	"",
}

// TestReadAsBefore: Read fills the request and returns the headers as it
// did before it was made cheaper, for the seeds (FuzzRead runs more).
func TestReadAsBefore(t *testing.T) {
	for _, s := range readSeeds {
		checkReadAsBefore(t, s)
	}
}

func FuzzRead(f *testing.F) {
	for _, s := range readSeeds {
		f.Add(s)
	}
	f.Fuzz(checkReadAsBefore)
}

func checkReadAsBefore(t *testing.T, text string) {
	hm := headerMapOf(text)
	for _, debug := range []bool{false, true} {
		got, want := mcp.HTTPRequest{ContentLength: -1}, mcp.HTTPRequest{ContentLength: -1}
		gotH, wantH := Read(hm, &got, debug), readBefore(hm, &want, debug)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotH, wantH) {
			t.Fatalf("Read(%q, debug %v) = %+v, %+v; before %+v, %+v", text, debug, got, gotH, want, wantH)
		}
	}
}
