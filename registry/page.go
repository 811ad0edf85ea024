package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math"
	"sort"
	"sync"

	"github.com/toolmesh/toolmesh/mcp"
)

// Catalog limits (ADR 0004), checked in listings and overrides.
const (
	MaxPageSize  = 10000
	MaxShortlist = 50
)

// Cursors. A tools/list cursor is opaque to clients; inside it is
//
//	base64url( format byte 1 | 8-byte snapshot tag | uvarint offset | last name )
//
// where the tag identifies the snapshot that issued it (a hash of its
// version), offset is the index of the first tool of the next page and last
// name is the name of the last tool of the page just served. A cursor issued
// by the current snapshot continues at offset (after checking that the tool
// before it is the named one). A cursor issued by another snapshot (the route
// was refreshed while the client walked its pages, or another replica answered
// the previous page) continues after the last-seen name in this snapshot's
// sorted order: a tool that exists in both snapshots is listed exactly once
// over the whole walk, a tool added after the cursor point is listed, one
// added before it is not, and a removed cursor tool does not matter. That
// first page may be shorter than pageSize, so that the walk falls back onto
// this snapshot's precomputed page boundaries.
const (
	cursorFormat = 1
	cursorTagLen = 8
	// maxCursorLen bounds what is decoded: format, tag, a 64-bit uvarint and
	// a 128-byte name fit in 200 base64 characters.
	maxCursorLen = 200
)

// cursor is a decoded tools/list cursor.
type cursor struct {
	tag    [cursorTagLen]byte
	offset int
	last   string
}

func (c cursor) encode() string {
	b := make([]byte, 0, 1+cursorTagLen+binary.MaxVarintLen64+len(c.last))
	b = append(b, cursorFormat)
	b = append(b, c.tag[:]...)
	b = binary.AppendUvarint(b, uint64(c.offset))
	b = append(b, c.last...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses s; ok is false for anything this package did not issue
// in shape (the content is checked against the snapshot by ToolsPage).
func decodeCursor(s string) (cursor, bool) {
	var c cursor
	if len(s) == 0 || len(s) > maxCursorLen {
		return c, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1+cursorTagLen || b[0] != cursorFormat {
		return c, false
	}
	copy(c.tag[:], b[1:1+cursorTagLen])
	off, n := binary.Uvarint(b[1+cursorTagLen:])
	if n <= 0 || off == 0 || off > math.MaxInt32 {
		return c, false
	}
	c.offset = int(off)
	c.last = string(b[1+cursorTagLen+n:])
	if !mcp.ValidToolName(c.last) {
		return c, false
	}
	return c, true
}

// cursorTag is the tag of the snapshot with the given version.
func cursorTag(version string) [cursorTagLen]byte {
	h := sha256.Sum256([]byte("toolmesh-cursor\n" + version))
	return [cursorTagLen]byte(h[:cursorTagLen])
}

// pages is a snapshot's tools/list answer cut into pages, computed once on
// first use: page p lists Tools[p*size : (p+1)*size], and offs[p][k] is where
// the k-th tool of page p starts in it, so a page that starts mid-way is one
// copy of a tail.
type pages struct {
	once  sync.Once
	pages []*mcp.SharedItems
	offs  [][]int
}

// paged returns the snapshot's pages; the snapshot's pageSize is > 0.
func (s *Snapshot) paged() *pages {
	pg := &s.pages
	pg.once.Do(func() {
		size, n := s.pageSize, len(s.Tools)
		for start := 0; start < n; start += size {
			var page bytes.Buffer
			offs := make([]int, 0, min(size, n-start))
			page.WriteByte('[')
			for i, t := range s.Tools[start:min(start+size, n)] {
				if i > 0 {
					page.WriteByte(',')
				}
				offs = append(offs, page.Len())
				// A tool encoded on its own is the array of one; its element
				// is the same bytes EncodeTools writes inside the full list.
				one, _ := mcp.EncodeTools([]mcp.Tool{t.Tool})
				page.Write(one[1 : len(one)-1])
			}
			page.WriteByte(']')
			pg.pages = append(pg.pages, mcp.NewSharedItems(page.Bytes()))
			pg.offs = append(pg.offs, offs)
		}
	})
	return pg
}

// ToolsPage is ToolsPageShared without the shared form. In search mode the answer is
// the two meta-tools, unpaged: pageSize applies to full mode only. Without
// paging (pageSize 0, or no more tools than one page) the first page is the
// whole list and has no next cursor. With paging, pages are cut once per snapshot and served
// without copying; see the cursor format above for how a cursor from another
// snapshot continues. ok is false for a cursor that this package did not
// issue, or that names a position this snapshot contradicts.
func (s *Snapshot) ToolsPage(cursor string) ([]byte, string, bool) {
	tools, _, next, ok := s.ToolsPageShared(cursor)
	return tools, next, ok
}

// ToolsPageShared implements [mcp.Catalog]: the unpaged list and
// the pages cut once are shared; the meta-tools, a page that starts mid-way
// and the rest of a list whose paging was turned off are not.
func (s *Snapshot) ToolsPageShared(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
	if s.search != nil {
		// Search mode lists the two meta-tools on one page; no cursor of
		// this snapshot exists, so any cursor is invalid.
		if cursor != "" {
			return nil, nil, "", false
		}
		return s.search.list, nil, "", true
	}
	n, size := len(s.Tools), s.pageSize
	if cursor == "" {
		if size <= 0 || size >= n {
			return s.toolsJSON.JSON, s.toolsJSON, "", true
		}
		first := s.paged().pages[0]
		return first.JSON, first, s.cursorAt(size), true
	}
	c, ok := decodeCursor(cursor)
	if !ok {
		return nil, nil, "", false
	}
	var start int
	if c.tag == s.tag {
		if c.offset >= n || s.Tools[c.offset-1].Name != c.last {
			return nil, nil, "", false
		}
		start = c.offset
	} else {
		start = sort.Search(n, func(i int) bool { return s.Tools[i].Name > c.last })
	}
	if start >= n {
		return []byte("[]"), nil, "", true
	}
	if size <= 0 {
		// Paging was turned off since the cursor was issued: the rest in one.
		list := make([]mcp.Tool, 0, n-start)
		for _, t := range s.Tools[start:] {
			list = append(list, t.Tool)
		}
		page, _ := mcp.EncodeTools(list)
		return page, nil, "", true
	}
	pg := s.paged()
	p, k := start/size, start%size
	shared := pg.pages[p]
	page := shared.JSON
	if k > 0 {
		page, shared = append([]byte{'['}, page[pg.offs[p][k]:]...), nil
	}
	next := ""
	if end := (p + 1) * size; end < n {
		next = s.cursorAt(end)
	}
	return page, shared, next, true
}

// cursorAt is the cursor of the page that starts at Tools[offset].
func (s *Snapshot) cursorAt(offset int) string {
	return cursor{tag: s.tag, offset: offset, last: s.Tools[offset-1].Name}.encode()
}

// PageSize is the size of the snapshot's tools/list (and federated list)
// pages, 0 when they are not paged (no paging, or search mode). Views that
// list a subset of the tools (authorization) page by it too.
func (s *Snapshot) PageSize() int {
	if s.search != nil {
		return 0
	}
	return s.pageSize
}
