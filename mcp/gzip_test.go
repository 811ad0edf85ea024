package mcp

import (
	"bytes"
	"compress/gzip"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	// The values AcceptsGzip answers without parsing: the parser agrees.
	for _, v := range []string{"gzip", "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd"} {
		if !AcceptsGzip(v) || !acceptsGzip(v) {
			t.Errorf("%q: AcceptsGzip %v, parsed %v; want true", v, AcceptsGzip(v), acceptsGzip(v))
		}
	}
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"", false},
		{"   ", false},
		{"gzip", true},
		{"GZIP", true},
		{"x-gzip", true},
		{"X-Gzip;q=0.5", true},
		{"gzip, deflate, br", true},
		{"br, gzip", true},
		{"deflate, br", false},
		{"identity", false},
		{" gzip ;  q=1 ", true},
		{"gzip;q=1.0", true},
		{"gzip;q=1.000", true},
		{"gzip;Q=0.001", true},
		{"gzip;q=0", false},
		{"gzip;q=0.0", false},
		{"gzip;q=0.000", false},
		{"gzip; q=0", false},
		{"gzip ; q = 0", false},
		{"*", true},
		{"*;q=0", false},
		{"*;q=0.2", true},
		{"gzip;q=0, *", false},      // gzip named: "*" does not bring it back
		{"*, gzip;q=0", false},      // order does not matter
		{"*;q=0, gzip", true},       // the more specific entry wins
		{"gzip;q=0, x-gzip", false}, // a refusal under either name stands
		{"gzip, gzip;q=0", false},
		{"gzip;q=0.5, gzip", true},
		{"*, *;q=0", false},
		{"gzip;q=0.5, identity;q=1", false},  // identity preferred
		{"gzip;q=0.5, identity;q=0.5", true}, // a tie: the smaller answer
		{"gzip, identity;q=0", true},
		{"gzip;q=2", false},   // malformed weight: the element is ignored
		{"gzip;q=1.5", false}, // above 1
		{"gzip;q=0.1234", false},
		{"gzip;q=abc", false},
		{"gzip;q=", false},
		{"gzip;q=.5", false},
		{"gzip;q=-0", false},
		{"gzip;q=+1", false},
		{"gzip;q", false},
		{"gzip;q=2, deflate", false},
		{"gzip;q=2, *", true},  // the malformed gzip entry is ignored, "*" applies
		{"gzip;level=9", true}, // another parameter
		{"gzipx", false},
		{"gzip/1", false},
		{",,gzip,,", true},
		{"compress, gzip;q=0.001", true},
	} {
		if got := AcceptsGzip(tc.v); got != tc.want {
			t.Errorf("AcceptsGzip(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "*;q=0.5, identity", "x-gzip;q=0.001, br", "gzip;q=1.0, identity;q=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := AcceptsGzip(v)
		// Codings and the weight's name are case-insensitive.
		if up := AcceptsGzip(strings.ToUpper(v)); up != got && isASCII(v) {
			t.Fatalf("AcceptsGzip(%q) = %v but %v in upper case", v, got, up)
		}
		// Only an element naming gzip or "*" can accept it.
		if low := strings.ToLower(v); got && !strings.Contains(low, "gzip") && !strings.Contains(low, "*") {
			t.Fatalf("AcceptsGzip(%q) accepts gzip without naming it", v)
		}
		// Refusing every coding refuses gzip.
		if AcceptsGzip(v + ", gzip;q=0, x-gzip;q=0") {
			t.Fatalf("%q with gzip;q=0 accepts gzip", v)
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 256, 65535, 65536, 100_000} {
		a := make([]byte, rng.IntN(300))
		b := make([]byte, n)
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte(nil), a...), b...))
		got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), crcShift(len(b)))
		if got != want {
			t.Errorf("len(a)=%d len(b)=%d: combined %08x, want %08x", len(a), n, got, want)
		}
	}
}

// gunzip decompresses a whole gzip body, checking its CRC and size.
func gunzip(t *testing.T, body []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("gzip header: %v", err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip body: %v", err)
	}
	if rest, _ := io.ReadAll(zr); len(rest) != 0 {
		t.Fatalf("data after the gzip member")
	}
	return out
}

func TestGzipParts(t *testing.T) {
	items := []byte(`[` + strings.Repeat(`{"name":"tool","inputSchema":{"type":"object"}},`, 2000) + `{}]`)
	shared := NewSharedItems(items)
	for _, tc := range []struct{ head, tail string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"tools":`, `}}`},
		{"", "}"},
		{strings.Repeat("h", maxStored), strings.Repeat("t", maxStored+1)},
		{strings.Repeat("h", 3*maxStored+7), `,"nextCursor":"abc"}}`},
	} {
		for _, buf := range [][]byte{nil, make([]byte, 7, 256)} { // a new buffer, or the caller's when it has room
			head, tail := []byte(tc.head), []byte(tc.tail)
			first, blocks, last := shared.gzipParts(buf, head, tail)
			if &blocks[0] != &shared.deflated().blocks[0] {
				t.Fatal("the compressed items are not the shared ones")
			}
			if inBuf := cap(buf) > 0 && &first[0] == &buf[:1][0]; inBuf != (cap(buf) > 0 && len(tc.head)+len(tc.tail) < 200) {
				t.Errorf("head %d B, tail %d B: parts in the %d B buffer given: %v", len(tc.head), len(tc.tail), cap(buf), inBuf)
			}
			// The parts are copies: the caller reuses head and tail.
			clear(head)
			clear(tail)
			got := gunzip(t, bytes.Join([][]byte{first, blocks, last}, nil))
			if want := tc.head + string(items) + tc.tail; string(got) != want {
				t.Fatalf("head %d B, tail %d B: decompressed %d B, want %d B", len(tc.head), len(tc.tail), len(got), len(want))
			}
		}
	}
}

// sharedCatalog is fakeCatalog keeping its pages as SharedItems.
type sharedCatalog struct {
	*fakeCatalog
	shared []*SharedItems
}

func newSharedCatalog(t testing.TB, pageSize int, tools ...Tool) *sharedCatalog {
	c := &sharedCatalog{fakeCatalog: newFakeCatalog(t, pageSize, tools...)}
	for _, p := range c.pages {
		c.shared = append(c.shared, NewSharedItems(p))
	}
	return c
}

func (c *sharedCatalog) ToolsPageShared(cursor string) ([]byte, *SharedItems, string, bool) {
	tools, next, ok := c.ToolsPage(cursor)
	if !ok {
		return nil, nil, "", false
	}
	for _, s := range c.shared {
		if len(s.JSON) > 0 && &s.JSON[0] == &tools[0] {
			return tools, s, next, true
		}
	}
	return tools, nil, next, true
}

// TestToolsListGzip checks that every page of a large list, in both eras,
// answers a client that accepts gzip with the identity answer gzip-coded,
// and other clients with the identity answer; both marked Vary:
// Accept-Encoding.
func TestToolsListGzip(t *testing.T) {
	s := NewServer(Config{})
	tools := make([]Tool, 500)
	for i := range tools {
		tools[i] = testTool("tool_" + strconv.Itoa(i))
	}
	cat := newSharedCatalog(t, 200, tools...) // pages of 200, 200 and 100 tools, all above GzipMinBytes
	for _, p := range cat.pages {
		if len(p) < GzipMinBytes {
			t.Fatalf("a page of %d B is below GzipMinBytes", len(p))
		}
	}
	type request struct {
		name string
		req  func() *HTTPRequest
		body string
	}
	var reqs []request
	for i, cursor := range []string{"", "p1", "p2"} {
		params := ""
		if cursor != "" {
			params = `"cursor":"` + cursor + `"`
		}
		legacy := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/list"` + map[bool]string{true: `,"params":{` + params + `}`}[params != ""] + `}`
		reqs = append(reqs,
			request{"legacy page " + strconv.Itoa(i), legacyReq, legacy},
			request{"2026 page " + strconv.Itoa(i), func() *HTTPRequest { return modernReq("tools/list", "") },
				modernBody(`"id-`+strconv.Itoa(i)+`"`, "tools/list", params)})
	}
	for _, rq := range reqs {
		t.Run(rq.name, func(t *testing.T) {
			identity := s.Handle(rq.req(), []byte(rq.body), cat).Reply
			if identity == nil || identity.Status != 200 {
				t.Fatalf("identity answer %+v", identity)
			}
			if !bytes.Contains(identity.Body, []byte(`"tools":[`)) {
				t.Fatalf("not a list: %.200s", identity.Body)
			}
			if v, _ := header(identity, "Vary"); v != "Accept-Encoding" {
				t.Errorf("identity answer: Vary %q", v)
			}
			if _, ok := header(identity, "Content-Encoding"); ok {
				t.Error("identity answer has a Content-Encoding")
			}
			for _, ae := range []string{"gzip", "gzip, deflate, br", "br;q=1, GZIP;q=0.3", "*"} {
				r := rq.req()
				r.AcceptEncoding = ae
				out := s.HandleShared(r, []byte(rq.body), cat)
				gz := out.Reply
				if gz == nil || gz.Status != 200 {
					t.Fatalf("%s: answer %+v", ae, gz)
				}
				if v, _ := header(gz, "Content-Encoding"); v != "gzip" {
					t.Fatalf("%s: Content-Encoding %q", ae, v)
				}
				if v, _ := header(gz, "Vary"); v != "Accept-Encoding" {
					t.Errorf("%s: Vary %q", ae, v)
				}
				if v, _ := header(gz, "Content-Type"); v != "application/json" {
					t.Errorf("%s: Content-Type %q", ae, v)
				}
				// A caller may change its reply's headers; the next
				// reply's (checked above) are its own.
				for i := range gz.Headers {
					gz.Headers[i].Value = "changed"
				}
				if n := gz.BodyLen(); n*3 > len(identity.Body) {
					t.Errorf("%s: gzip answer %d B, identity %d B", ae, n, len(identity.Body))
				}
				gz.Flatten()
				if got := gunzip(t, gz.Body); !bytes.Equal(got, identity.Body) {
					t.Fatalf("%s: decompressed answer differs from the identity one:\n%.300s\n%.300s", ae, got, identity.Body)
				}
			}
			for _, ae := range []string{"", "identity", "gzip;q=0", "deflate, br", "*;q=0", "gzip;q=0.5, identity"} {
				r := rq.req()
				r.AcceptEncoding = ae
				got := s.Handle(r, []byte(rq.body), cat).Reply
				if _, ok := header(got, "Content-Encoding"); ok || !bytes.Equal(got.Body, identity.Body) {
					t.Errorf("Accept-Encoding %q: not the identity answer", ae)
				}
			}
		})
	}
}

// TestToolsListGzipSmall checks that a small page, or a page the catalog
// does not share, is answered uncompressed and without Vary.
func TestToolsListGzipSmall(t *testing.T) {
	s := NewServer(Config{})
	small := newSharedCatalog(t, 10, testTool("a"), testTool("b"))
	big := make([]Tool, 300)
	for i := range big {
		big[i] = testTool("tool_" + strconv.Itoa(i))
	}
	unshared := newFakeCatalog(t, 300, big...) // ToolsPage only
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	for name, cat := range map[string]Catalog{"small": small, "not shared": unshared} {
		r := legacyReq()
		r.AcceptEncoding = "gzip"
		got := s.Handle(r, body, cat).Reply
		if got == nil || got.Status != 200 {
			t.Fatalf("%s: %+v", name, got)
		}
		if _, ok := header(got, "Content-Encoding"); ok {
			t.Errorf("%s: compressed", name)
		}
		if _, ok := header(got, "Vary"); ok {
			t.Errorf("%s: Vary", name)
		}
	}
}

// TestGzipBuiltOnce checks that concurrent first gzip requests for a page
// compress it once, and later ones not again.
func TestGzipBuiltOnce(t *testing.T) {
	s := NewServer(Config{})
	tools := make([]Tool, 300)
	for i := range tools {
		tools[i] = testTool("tool_" + strconv.Itoa(i))
	}
	cat := newSharedCatalog(t, 300, tools...)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	before := gzipBuilds.Load()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			r := legacyReq()
			r.AcceptEncoding = "gzip"
			if v, _ := header(s.HandleShared(r, body, cat).Reply, "Content-Encoding"); v != "gzip" {
				t.Error("not gzip-coded")
			}
		})
	}
	close(start)
	wg.Wait()
	if n := gzipBuilds.Load() - before; n != 1 {
		t.Fatalf("%d compressions for concurrent first requests, want 1", n)
	}
	r := legacyReq()
	r.AcceptEncoding = "gzip"
	s.HandleShared(r, body, cat)
	if n := gzipBuilds.Load() - before; n != 1 {
		t.Fatalf("%d compressions after a later request, want 1", n)
	}
}

// BenchmarkGzipBuild is the one-time compression of a 10,000-tool page,
// paid by the first request for it that accepts gzip.
func BenchmarkGzipBuild(b *testing.B) {
	tools := make([]Tool, 10_000)
	for i := range tools {
		tools[i] = testTool("tool_" + strconv.Itoa(i))
		tools[i].Description = "Looks up things of kind " + strconv.Itoa(i) + " and returns them as JSON."
	}
	items, err := EncodeTools(tools)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(items)))
	for b.Loop() {
		NewSharedItems(items).deflated()
	}
}
