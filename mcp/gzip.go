package mcp

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"sync"
	"sync/atomic"
)

// Compressed list pages. Most MCP clients' HTTP stacks ask for gzip (Go's
// net/http transport, Node's fetch, Python's httpx send Accept-Encoding:
// gzip by default), and a large tools/list page compresses to a small
// fraction of its size. The page's items are compressed once, on the first
// request that accepts gzip, and kept beside them; each answer is then a gzip
// member written around that shared compressed run:
//
//	gzip header | stored block: envelope head | shared DEFLATE blocks of the items
//	            | final stored block: envelope tail | CRC-32 | size
//
// (RFC 1952 for the member, RFC 1951 §3.2.4 for stored blocks). The shared
// run ends with a sync flush, an empty stored block, so it stops on a byte
// boundary and the next block can follow it; its blocks are never final. The
// CRC-32 of the whole body is the items' CRC combined with the CRCs of the
// per-request head and tail, so no request reads the items.

// GzipMinBytes is the size from which a shared list page is answered
// gzip-compressed to a client that accepts gzip. Below it the saving is not
// worth a second copy of the page.
const GzipMinBytes = 8 << 10

// SharedItems is a list page's items (a JSON array) serialized once per
// snapshot and shared by every request that lists that page, with the gzip
// form of the items, built on first use and then kept as long as the page.
// A catalog that keeps its pages as SharedItems returns them from
// [Catalog.ToolsPageShared].
type SharedItems struct {
	JSON []byte

	once sync.Once
	gz   *deflated // set by once; read-only after
}

// NewSharedItems wraps a page's items; items must not change afterwards.
func NewSharedItems(items []byte) *SharedItems { return &SharedItems{JSON: items} }

// deflated is the shared part of a page's gzip answers.
type deflated struct {
	blocks []byte // DEFLATE blocks of the items, none final, ending byte-aligned
	crc    uint32 // CRC-32 (IEEE) of the items
	shift  uint32 // x^(8·len(items)) mod the CRC polynomial, see crcCombine
}

// gzipBuilds counts compressions of shared items, for tests.
var gzipBuilds atomic.Int64

// deflated returns the items' compressed run, compressing them on the first
// call; concurrent first calls wait for that one compression.
func (s *SharedItems) deflated() *deflated {
	s.once.Do(func() {
		gzipBuilds.Add(1)
		var buf bytes.Buffer
		buf.Grow(len(s.JSON)/8 + 64)
		w, _ := flate.NewWriter(&buf, flate.DefaultCompression) // a valid level never fails
		_, _ = w.Write(s.JSON)                                  // writes to a bytes.Buffer never fail
		_ = w.Flush()                                           // sync flush: byte-aligned, not final
		s.gz = &deflated{
			blocks: bytes.Clone(buf.Bytes()), // exact size: kept as long as the page
			crc:    crc32.ChecksumIEEE(s.JSON),
			shift:  crcShift(len(s.JSON)),
		}
	})
	return s.gz
}

// gzipParts is the gzip member of head + items + tail in three parts, the
// middle one shared with every other request for the page. The first and
// last are written anew, into buf when it has room, else into one new
// buffer: head and tail may be reused once it returns.
func (s *SharedItems) gzipParts(buf, head, tail []byte) (first, shared, last []byte) {
	d := s.deflated()
	firstLen := len(gzipHeader) + storedLen(len(head))
	// Both small parts in one buffer; first is capped, so writing last
	// never reaches it.
	if n := firstLen + storedLen(len(tail)) + 8; cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	first, crc := appendStored(append(buf[:0], gzipHeader...), head, false, 0)
	first = first[:len(first):len(first)]

	crc = crcCombine(crc, d.crc, d.shift)
	last, crc = appendStored(buf[len(first):len(first)], tail, true, crc)
	last = binary.LittleEndian.AppendUint32(last, crc)
	last = binary.LittleEndian.AppendUint32(last, uint32(len(head)+len(s.JSON)+len(tail))) // ISIZE is mod 2^32
	return first, d.blocks, last
}

// gzipHeader is a gzip member header (RFC 1952 §2.3): magic, CM 8
// (DEFLATE), no flags, no modification time, no extra flags, OS 255
// (unknown).
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// maxStored is the most a stored block holds (its LEN field is 16 bits).
const maxStored = 0xffff

// storedLen is the size of data written as stored blocks.
func storedLen(n int) int { return n + 5*max(1, (n+maxStored-1)/maxStored) }

// appendStored appends data as stored DEFLATE blocks (RFC 1951 §3.2.4),
// starting on a byte boundary; the last one is final when final is set.
// Each block is a header byte (BFINAL, BTYPE 00, padding), LEN and its
// complement, then the bytes. It returns crc updated with data (CRC-32,
// IEEE), read from the copy in b: data is only copied, so a caller's data
// may stay on its stack.
func appendStored(b, data []byte, final bool, crc uint32) ([]byte, uint32) {
	for {
		n := min(len(data), maxStored)
		last := n == len(data)
		var h byte
		if last && final {
			h = 1
		}
		b = append(b, h)
		b = binary.LittleEndian.AppendUint16(b, uint16(n))
		b = binary.LittleEndian.AppendUint16(b, ^uint16(n))
		b = append(b, data[:n]...)
		crc = crc32.Update(crc, crc32.IEEETable, b[len(b)-n:])
		if data = data[n:]; last {
			return b, crc
		}
	}
}

// CRC-32 arithmetic for combining checksums: polynomials over GF(2) modulo
// the IEEE polynomial, in the bit-reflected order hash/crc32 uses (the
// coefficient of x^0 in the top bit). The CRC of A followed by B is the CRC
// of A multiplied by x^(8·len(B)), plus (xor) the CRC of B.

// crcPoly is the reflected IEEE polynomial (crc32.IEEE).
const crcPoly = 0xedb88320

// crcMul is a·b modulo the polynomial.
func crcMul(a, b uint32) uint32 {
	var p uint32
	for bit := uint32(1) << 31; bit != 0; bit >>= 1 { // a's coefficients of x^0, x^1, …
		if a&bit != 0 {
			p ^= b
		}
		// b·x
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcShift is x^(8n) modulo the polynomial, by squaring.
func crcShift(n int) uint32 {
	r := uint32(1) << 31  // x^0
	sq := uint32(1) << 23 // x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r = crcMul(sq, r)
		}
		sq = crcMul(sq, sq)
	}
	return r
}

// crcCombine is the CRC-32 of A followed by B from crcA, crcB and
// crcShift(len(B)).
func crcCombine(crcA, crcB, shiftB uint32) uint32 { return crcMul(shiftB, crcA) ^ crcB }

// AcceptsGzip reports whether an Accept-Encoding header value (several
// header lines joined with ", ") lets the answer be gzip-coded (RFC 9110
// §12.5.3): gzip (or its alias x-gzip) listed with a weight above 0, or,
// when neither is listed, "*" with a weight above 0; and gzip not weighted
// below an explicitly listed identity. Codings are case-insensitive;
// elements with a malformed weight are ignored; a coding listed twice counts
// with its lower weight, so a refusal (q=0) is never overridden. An empty
// header asks for no coding; so, here, does an absent one (RFC 9110 would
// allow any coding, but a client that decompresses says so).
func AcceptsGzip(v string) bool {
	switch v { // what HTTP clients send by default, read without parsing
	case "gzip", "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd":
		return true
	case "":
		return false
	}
	return acceptsGzip(v)
}

// acceptsGzip is AcceptsGzip for any header value.
func acceptsGzip(v string) bool {
	const unlisted = -1
	gzip, star, identity := unlisted, unlisted, unlisted // weights in thousandths
	lower := func(cur, q int) int {
		if cur == unlisted {
			return q
		}
		return min(cur, q)
	}
	for elem := range strings.SplitSeq(v, ",") {
		coding, params, _ := strings.Cut(elem, ";")
		coding = strings.TrimSpace(coding)
		if coding == "" {
			continue
		}
		q, ok := qWeight(params)
		if !ok {
			continue
		}
		switch {
		case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
			gzip = lower(gzip, q)
		case coding == "*":
			star = lower(star, q)
		case strings.EqualFold(coding, "identity"):
			identity = lower(identity, q)
		}
	}
	if gzip == unlisted {
		gzip = star
	}
	return gzip > 0 && gzip >= identity
}

// qWeight reads the weight among an element's parameters (";q=0.5"): a
// qvalue of RFC 9110 §12.4.2, in thousandths; 1000 when there is none. ok
// is false for a malformed weight or parameter.
func qWeight(params string) (int, bool) {
	q := 1000
	for p := range strings.SplitSeq(params, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			return 0, false
		}
		if !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue // a coding parameter other than the weight
		}
		w, ok := parseQValue(strings.TrimSpace(val))
		if !ok {
			return 0, false
		}
		q = w
	}
	return q, true
}

// parseQValue parses qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ).
func parseQValue(s string) (int, bool) {
	if s == "" || len(s) > 5 || (s[0] != '0' && s[0] != '1') {
		return 0, false
	}
	whole := int(s[0] - '0')
	if len(s) == 1 {
		return whole * 1000, true
	}
	if s[1] != '.' {
		return 0, false
	}
	n := 0
	for i := 2; i < 5; i++ {
		d := byte('0')
		if i < len(s) {
			d = s[i]
		}
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int(d-'0')
	}
	if whole == 1 && n != 0 {
		return 0, false
	}
	return whole*1000 + n, true
}
