package registry

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/search"
	"github.com/toolmesh/toolmesh/registry/search/embed"
)

// Catalog modes (ADR 0004).
const (
	ModeFull   = "full"
	ModeSearch = "search"
)

// searchMode is the precomputed state of a snapshot whose route is in search
// mode: its tools/list answer (the two meta-tools, serialized once) and the
// ranking index over its tools, built once.
type searchMode struct {
	shortlist int
	synonyms  []string // the route's own synonym groups
	list      []byte   // tools/list: the meta-tools

	once  sync.Once
	index *search.Index
	docs  func() []search.Doc

	// Semantic re-ranking (ADR 0007): the tool embeddings, swapped in whole
	// when ready (nil: lexical only); embedding is set while they are
	// computed; stored are the vectors a restored snapshot came with, until
	// the registry takes them over.
	sem       atomic.Pointer[semantic]
	embedding atomic.Bool
	warned    atomic.Bool // an unknown catalog.embedding was logged
	stored    *restoredEmbeddings
}

// newSearchMode prepares search mode for s, whose Tools are final. The index
// is built by ranker, on first use or at once by the caller.
func newSearchMode(s *Snapshot, shortlist int, synonyms []string) *searchMode {
	if shortlist <= 0 {
		shortlist = mcp.DefaultShortlist
	}
	// The meta-tools are constant JSON, so encoding cannot fail.
	list, _ := mcp.EncodeTools(mcp.MetaTools(shortlist))
	return &searchMode{
		shortlist: shortlist,
		synonyms:  synonyms,
		list:      list,
		// The index reads only what the Tool Services declared, in the
		// snapshot's sorted order, so a hit's Doc indexes Snapshot.Tools.
		docs: func() []search.Doc {
			docs := make([]search.Doc, len(s.Tools))
			for i, t := range s.Tools {
				docs[i] = search.Doc{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema}
			}
			return docs
		},
	}
}

// ranker returns the search index, building it on first use.
func (m *searchMode) ranker() *search.Index {
	m.once.Do(func() {
		m.index = search.New(m.docs(), search.Options{Shortlist: m.shortlist, Synonyms: m.synonyms})
		m.docs = nil
	})
	return m.index
}

// rank returns the shortlist for query: the lexical one, fused with the
// request's similarity to each tool when the route has tool embeddings
// (ADR 0007). The embedding service is asked at most once, only when its
// answer can change the outcome, and for at most its timeout; on failure
// the lexical answer stands and the fallback is counted.
func (m *searchMode) rank(route, query string, limit int) []search.Hit {
	ix := m.ranker()
	sem := m.sem.Load()
	if sem == nil {
		return ix.Search(query, limit)
	}
	lx := ix.Rank(query, limit)
	if !lx.WantsSemantic(sem.emb.minSim) {
		return lx.Hits
	}
	q, err := sem.emb.client.Query(context.Background(), query)
	if err != nil {
		sem.emb.fallback(route, err)
		return lx.Hits
	}
	return lx.Fuse(func(doc int) (float64, bool) {
		v := sem.vecs[doc]
		if len(v) != len(q) {
			return 0, false
		}
		return embed.Dot(q, v), true
	}, search.FuseOptions{MinSimilarity: sem.emb.minSim})
}

// SemanticReady reports whether the snapshot's search ranking uses tool
// embeddings, and of which model.
func (s *Snapshot) SemanticReady() (model string, ok bool) {
	if s.search == nil {
		return "", false
	}
	if sem := s.search.sem.Load(); sem != nil {
		return sem.model, true
	}
	return "", false
}

// SearchMode implements [mcp.Catalog]: whether the route's catalog
// mode is "search".
func (s *Snapshot) SearchMode() bool { return s.search != nil }

// Shortlist implements [mcp.Catalog]: the route's shortlist size
// (catalog.shortlist, default 5), or 0 outside search mode.
func (s *Snapshot) Shortlist() int {
	if s.search == nil {
		return 0
	}
	return s.search.shortlist
}

// SearchTools implements [mcp.Catalog]. It ranks the snapshot's
// active, unambiguous tools for query and returns at most limit of them
// (0: the shortlist size), best first, as a JSON array. Each entry carries
// only what the Tool Service declared and a model needs to call the tool:
// name, title, description and inputSchema (byte for byte); nothing is
// inferred. An empty array means the ranking's gate found no tool that
// really matches. Outside search mode it returns an empty array.
//
// Entries are encoded per call rather than kept: a shortlist is a handful of
// tools, and a second serialized copy of every schema would double the
// memory of a large catalog.
func (s *Snapshot) SearchTools(query string, limit int) []byte {
	if s.search == nil {
		return []byte("[]")
	}
	hits := s.search.rank(s.Route, query, limit)
	if len(hits) == 0 {
		return []byte("[]")
	}
	list := make([]mcp.Tool, len(hits))
	for i, h := range hits {
		t := s.Tools[h.Doc]
		list[i] = mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema}
	}
	// The schemas were compacted and checked when the snapshot was built.
	b, _ := mcp.EncodeTools(list)
	return b
}

// reservedName is the reason a search-mode route rejects a tool whose name
// is a meta-tool's.
const reservedName = "name is reserved for a meta-tool in a route with catalog.mode \"search\""
