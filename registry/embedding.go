package registry

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/promreg"

	"github.com/toolmesh/toolmesh/registry/search"
	"github.com/toolmesh/toolmesh/registry/search/embed"
)

// EmbeddingNone is catalog.embedding of a route that opts out of the
// deployment's default embedding service.
const EmbeddingNone = "none"

// EmbeddingService is one entry of the toolmesh config's embeddings map: an
// OpenAI-compatible embeddings endpoint whose similarity re-ranks search
// mode's shortlist (docs/decisions/0007-semantic-reranking.md). Zero values
// take the defaults of package embed.
type EmbeddingService struct {
	// URL is the endpoint itself (http://tei:8080/v1/embeddings).
	URL string `json:"url"`
	// Model is sent as "model"; it names the stored vectors, so changing
	// it recomputes them.
	Model string `json:"model"`
	// Credential names an entry of the config's credentials map whose value
	// is sent as "Authorization: Bearer VALUE"; none sends no credential.
	Credential string `json:"credential,omitempty"`
	// Timeout bounds the one embedding call of a search_tools request
	// (default 300ms); past it the answer is the lexical one.
	Timeout config.Duration `json:"timeout,omitempty"`
	// BatchTimeout bounds one request of tool embeddings (default 30s).
	BatchTimeout config.Duration `json:"batchTimeout,omitempty"`
	// BatchSize is the most tool texts per request (default 32);
	// Concurrency the most such requests at once, over all routes (default 2).
	BatchSize   int `json:"batchSize,omitempty"`
	Concurrency int `json:"concurrency,omitempty"`
	// QueryPrefix and DocumentPrefix are prepended to requests and tool
	// texts, for models trained with them (e5: "query: ", "passage: ").
	QueryPrefix    string `json:"queryPrefix,omitempty"`
	DocumentPrefix string `json:"documentPrefix,omitempty"`
	// MinSimilarity, above 0, lets a request that the lexical gate rejects
	// be served by lexical candidates with an identifier match and at least
	// this cosine similarity (search.FuseOptions). Default 0: the gate
	// stays lexical. Calibrate it with eval-search.
	MinSimilarity float64 `json:"minSimilarity,omitempty"`
}

// Client returns the service's client; creds resolves Credential.
func (e EmbeddingService) Client(creds map[string]config.CredentialSource, hc *http.Client) (*embed.Client, error) {
	if e.MinSimilarity < 0 || e.MinSimilarity > 1 {
		return nil, fmt.Errorf("minSimilarity: %v is not in 0..1", e.MinSimilarity)
	}
	if e.BatchSize < 0 || e.Concurrency < 0 {
		return nil, errors.New("batchSize and concurrency must not be negative")
	}
	o := embed.Options{
		URL: e.URL, Model: e.Model, Timeout: e.Timeout.D(), BatchTimeout: e.BatchTimeout.D(),
		BatchSize: e.BatchSize, Concurrency: e.Concurrency,
		QueryPrefix: e.QueryPrefix, DocumentPrefix: e.DocumentPrefix, HTTPClient: hc,
	}
	if e.Credential != "" {
		src, ok := creds[e.Credential]
		if !ok {
			return nil, fmt.Errorf("credential: %q is not defined in the toolmesh config file (credentials)", e.Credential)
		}
		o.Token = src.Read
	}
	return embed.New(o)
}

// CheckEmbeddings checks the config's embeddings map and defaultEmbedding;
// each error names the key to change.
func CheckEmbeddings(services map[string]EmbeddingService, def string, creds map[string]config.CredentialSource) error {
	var errs []error
	for name, e := range services {
		if !config.ValidCredentialName(name) || name == EmbeddingNone {
			errs = append(errs, fmt.Errorf("embeddings.%s: the name must match %s and not be %q", name, config.CredentialNamePattern, EmbeddingNone))
		}
		if _, err := e.Client(creds, nil); err != nil {
			errs = append(errs, fmt.Errorf("embeddings.%s.%w", name, err))
		}
	}
	if def != "" {
		if _, ok := services[def]; !ok {
			errs = append(errs, fmt.Errorf("defaultEmbedding: %q is not a key of embeddings", def))
		}
	}
	return errors.Join(errs...)
}

// embedder is one configured embedding service at run time.
type embedder struct {
	name   string
	client *embed.Client
	minSim float64
	m      *embedMetrics
}

// embedMetrics count the semantic signal's work and failures.
type embedMetrics struct {
	fallbacks *prometheus.CounterVec // route, reason
	embedded  *prometheus.CounterVec // service
	failures  *prometheus.CounterVec // service
}

func newEmbedMetrics(reg prometheus.Registerer, log *slog.Logger) *embedMetrics {
	m := &embedMetrics{
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_search_semantic_fallbacks_total",
			Help: "search_tools answers ranked lexically only because the request's embedding failed (reason: timeout, busy or error).",
		}, []string{"route", "reason"}),
		embedded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_search_tool_embeddings_total",
			Help: "Tool texts sent to an embedding service (tools whose text did not change are not sent again).",
		}, []string{"service"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_search_tool_embedding_failures_total",
			Help: "Snapshots whose tool embeddings could not be computed; the route stays lexical until a later refresh succeeds.",
		}, []string{"service"}),
	}
	// Registered as the registry's own metrics are: a second Registry on
	// the same Prometheus registry counts in the same series.
	for _, c := range []**prometheus.CounterVec{&m.fallbacks, &m.embedded, &m.failures} {
		var err error
		if *c, err = promreg.Register(reg, *c); err != nil {
			log.Error("search embedding metrics not exported", "err", err)
		}
	}
	return m
}

// fallback records a search_tools answer that fell back to lexical ranking.
func (e *embedder) fallback(route string, err error) {
	reason := "error"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		reason = "timeout"
	case errors.Is(err, embed.ErrBusy):
		reason = "busy"
	}
	e.m.fallbacks.WithLabelValues(route, reason).Inc()
}

// semantic is a snapshot's tool embeddings, swapped in whole once ready.
type semantic struct {
	emb    *embedder
	model  string
	vecs   [][]float32 // by position in Snapshot.Tools; nil: none
	hashes []string    // docHash of each tool
}

// docHash names the vector of one tool text under one model and prefix.
func docHash(model, prefix, text string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(prefix))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// storedEmbeddings is the persisted form of a snapshot's tool embeddings
// (storedSnapshot.Embeddings).
type storedEmbeddings struct {
	Model string `json:"model"`
	Dims  int    `json:"dims"`
	// Vectors are by docHash, each Dims little-endian float32 in base64.
	Vectors map[string]string `json:"vectors"`
}

func (sem *semantic) stored() *storedEmbeddings {
	st := &storedEmbeddings{Model: sem.model, Vectors: map[string]string{}}
	for i, v := range sem.vecs {
		if v == nil {
			continue
		}
		st.Dims = len(v)
		b := make([]byte, 4*len(v))
		for j, x := range v {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
		}
		st.Vectors[sem.hashes[i]] = base64.StdEncoding.EncodeToString(b)
	}
	return st
}

// decode returns the stored vectors by hash, or an error when any is
// malformed (the snapshot is then restored without them and they are
// recomputed).
func (st *storedEmbeddings) decode() (map[string][]float32, error) {
	if st.Model == "" || st.Dims <= 0 || st.Dims > embed.MaxDims {
		return nil, fmt.Errorf("embeddings: model %q with %d dims", st.Model, st.Dims)
	}
	out := make(map[string][]float32, len(st.Vectors))
	for h, s := range st.Vectors {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != 4*st.Dims {
			return nil, fmt.Errorf("embeddings: vector %s is not %d float32", h, st.Dims)
		}
		v := make([]float32, st.Dims)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
			if math.IsNaN(float64(v[j])) || math.IsInf(float64(v[j]), 0) {
				return nil, fmt.Errorf("embeddings: vector %s has a value that is not finite", h)
			}
		}
		out[h] = v
	}
	return out, nil
}

// Embedders are the configured embedding services at run time: they give
// search-mode snapshots their tool embeddings (ADR 0007). The refresher
// owns one and hands it every snapshot it publishes.
type Embedders struct {
	by   map[string]*embedder
	def  string
	log  *slog.Logger
	wg   sync.WaitGroup // tool-embedding computations under way
	save time.Duration  // bound of the save after a computation
}

// NewEmbedders builds services (the toolmesh config's embeddings map, by
// name); def is the service of a search-mode route without
// catalog.embedding ("" none), creds resolves their credentials and hc is
// their HTTP client (nil: a plain one). The config loader checked them
// (CheckEmbeddings); one that still fails is logged and left out, so its
// routes rank lexically. saveTimeout bounds each save of a snapshot with
// new embeddings. It returns nil when there are no services.
func NewEmbedders(services map[string]EmbeddingService, def string, creds map[string]config.CredentialSource, hc *http.Client,
	reg prometheus.Registerer, log *slog.Logger, saveTimeout time.Duration) *Embedders {
	if len(services) == 0 {
		return nil
	}
	m := newEmbedMetrics(reg, log)
	es := &Embedders{by: map[string]*embedder{}, def: def, log: log, save: saveTimeout}
	for name, svc := range services {
		c, err := svc.Client(creds, hc)
		if err != nil {
			log.Error("embedding service left out; its routes rank lexically", "embedding", name, "err", err)
			continue
		}
		es.by[name] = &embedder{name: name, client: c, minSim: svc.MinSimilarity, m: m}
	}
	return es
}

// Wait waits for the computations under way (tests).
func (es *Embedders) Wait() {
	if es != nil {
		es.wg.Wait()
	}
}

// embedderFor returns the embedding service of a search-mode snapshot's
// route, or nil.
func (es *Embedders) embedderFor(s *Snapshot) *embedder {
	if s.search == nil {
		return nil
	}
	name := ""
	if s.def.Catalog != nil {
		name = s.def.Catalog.Embedding
	}
	e, name := es.lookup(name)
	if e == nil && name != "" && s.search.warned.CompareAndSwap(false, true) { // once per snapshot, not per refresh
		es.log.Warn("search mode: catalog.embedding names no embedding service of the toolmesh config; ranking stays lexical", "route", s.Route, "embedding", name)
	}
	return e
}

// lookup is the service a route whose catalog.embedding is name ("": the
// default) ranks with, or nil, and the name it resolved to ("" for none).
func (es *Embedders) lookup(name string) (*embedder, string) {
	if name == "" {
		name = es.def
	}
	if name == "" || name == EmbeddingNone {
		return nil, ""
	}
	return es.by[name], name
}

// Service is the client and minimum similarity of the service a
// search-mode route whose catalog.embedding is name ("": the default) ranks
// with; ok is false when name resolves to none, to no service, or to one
// left out. eval-search ranks with it, as the server does.
func (es *Embedders) Service(name string) (client *embed.Client, minSimilarity float64, ok bool) {
	if es == nil {
		return nil, 0, false
	}
	e, _ := es.lookup(name)
	if e == nil {
		return nil, 0, false
	}
	return e.client, e.minSim, true
}

// Embed gives each search-mode snapshot of snaps the tool embeddings of its
// route's embedding service: at once when every vector is known (stored
// with a restored snapshot, or held by prev(route), the route's snapshot
// before this refresh; prev may be nil), else in the background, after
// which the enriched ranking is swapped in and save(ctx, snapshot) is called
// to store it again. A snapshot is served lexically until then; if the
// service fails, until a later refresh succeeds. Never blocks on the
// service. A nil Embedders does nothing.
func (es *Embedders) Embed(snaps []*Snapshot, prev func(route string) *Snapshot, save func(context.Context, *Snapshot)) {
	if es == nil || len(es.by) == 0 {
		return
	}
	for _, s := range snaps {
		e := es.embedderFor(s)
		if e == nil {
			continue
		}
		sm := s.search
		if cur := sm.sem.Load(); cur != nil && cur.emb == e {
			continue // ready
		}
		if !sm.embedding.CompareAndSwap(false, true) {
			continue // under way
		}
		var p *Snapshot
		if prev != nil {
			p = prev(s.Route)
		}
		es.embedSnapshot(s, e, p, save)
	}
}

func (es *Embedders) embedSnapshot(s *Snapshot, e *embedder, prev *Snapshot, save func(context.Context, *Snapshot)) {
	sm := s.search
	model, prefix := e.client.Model(), e.client.DocumentPrefix()
	sem := &semantic{emb: e, model: model, vecs: make([][]float32, len(s.Tools)), hashes: make([]string, len(s.Tools))}
	known := map[string][]float32{}
	if st := sm.stored; st != nil && st.model == model {
		known = st.vecs
	}
	if prev != nil && prev.search != nil {
		if p := prev.search.sem.Load(); p != nil && p.model == model {
			for i, h := range p.hashes {
				if p.vecs[i] != nil {
					known[h] = p.vecs[i]
				}
			}
		}
	}
	var missing []int
	var texts []string
	for i, t := range s.Tools {
		text := search.DocText(search.Doc{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema})
		sem.hashes[i] = docHash(model, prefix, text)
		if v, ok := known[sem.hashes[i]]; ok {
			sem.vecs[i] = v
			continue
		}
		missing = append(missing, i)
		texts = append(texts, text)
	}
	sm.stored = nil // consumed; the snapshot's own vectors are in sem from now on
	if len(missing) == 0 {
		sm.sem.Store(sem)
		sm.embedding.Store(false)
		return
	}
	es.wg.Add(1)
	go func() {
		defer es.wg.Done()
		defer sm.embedding.Store(false)
		start := time.Now()
		vs, err := e.client.Documents(context.Background(), texts)
		if err != nil {
			e.m.failures.WithLabelValues(e.name).Inc()
			es.log.Warn("search mode: tool embeddings failed; the route's ranking stays lexical until a later refresh", "route", s.Route, "embedding", e.name, "err", err)
			return
		}
		for k, i := range missing {
			sem.vecs[i] = vs[k]
		}
		e.m.embedded.WithLabelValues(e.name).Add(float64(len(missing)))
		sm.sem.Store(sem)
		es.log.Info("search mode: tool embeddings ready", "route", s.Route, "embedding", e.name, "model", model,
			"computed", len(missing), "reused", len(s.Tools)-len(missing), "took", time.Since(start).Round(time.Millisecond))
		if save != nil {
			ctx, cancel := context.WithTimeout(context.Background(), es.save)
			defer cancel()
			save(ctx, s)
		}
	}()
}

// restoredEmbeddings are the decoded vectors of a restored snapshot.
type restoredEmbeddings struct {
	model string
	vecs  map[string][]float32
}
