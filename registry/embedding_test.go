package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry/search"
	"github.com/toolmesh/toolmesh/registry/search/embed/embedtest"
)

// embedEnv is one search-mode route, "big", whose tools come from
// catalogManifest, refreshed by cycle, and an embedding service "e" on
// 127.0.0.1.
type embedEnv struct {
	portal, svc *registrytest.FakeServer
	emb         *embedtest.Server
	store       *jsonStore
	prom        *prometheus.Registry
	reg         *cycle
}

func newEmbedEnv(t *testing.T, store *jsonStore, emb *embedtest.Server, svc EmbeddingService) *embedEnv {
	t.Helper()
	return newEmbedEnvRoute(t, store, emb, svc, `"e"`, "")
}

// newEmbedEnvRoute is newEmbedEnv with the route's catalog.embedding (JSON,
// or "" for none) and the default embedding service.
func newEmbedEnvRoute(t *testing.T, store *jsonStore, emb *embedtest.Server, svc EmbeddingService, catalogEmbedding, def string) *embedEnv {
	t.Helper()
	e := &embedEnv{store: store, emb: emb, prom: prometheus.NewRegistry()}
	if e.emb == nil {
		var err error
		if e.emb, err = embedtest.Start(nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.emb.Close() })
	}
	if e.store == nil {
		e.store = newJSONStore(&registrytest.Recorder{})
	}
	e.svc = registrytest.NewFakeServer(t, "/manifest", catalogManifest())
	cat := `{"mode":"search"}`
	if catalogEmbedding != "" {
		cat = `{"mode":"search","embedding":` + catalogEmbedding + `}`
	}
	route := fmt.Sprintf(`{"key":"big","catalog":%s,"toolServices":[{"name":"s","url":%q}]}`, cat, e.svc.URL)
	e.portal = registrytest.NewFakeServer(t, "/v1/routes", `{"routes":[`+route+`]}`)
	svc.URL = e.emb.URL
	if svc.Model == "" {
		svc.Model = "m1"
	}
	e.reg = &cycle{
		src:     portalSource{url: e.portal.URL, client: e.portal.Client()},
		fetcher: manifestGetter{client: e.svc.Client()},
		store:   e.store,
		emb: NewEmbedders(map[string]EmbeddingService{"e": svc}, def, nil, nil,
			e.prom, slog.New(slog.DiscardHandler), 2*time.Second),
		snaps: map[string]*Snapshot{},
	}
	return e
}

func (e *embedEnv) start(t *testing.T) {
	t.Helper()
	if err := e.reg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func (e *embedEnv) wait() { e.reg.emb.Wait() }

// cycle drives snapshots through Embedders the way the refresher
// (registry/refresher) does, in its simplest form: list, warm-start a route
// without a snapshot from the Store, fetch, Rebuild (a failure keeps the
// last good snapshot), save, Embed. Not safe for concurrent cycles.
type cycle struct {
	src     Source
	fetcher ManifestFetcher
	store   Store
	emb     *Embedders
	snaps   map[string]*Snapshot
}

func (c *cycle) Start(ctx context.Context) error { return c.Refresh(ctx) }

// Refresh returns errors of the listing, the Store and the build; a failed
// fetch only keeps the route's snapshot, as in the refresher.
func (c *cycle) Refresh(ctx context.Context) error {
	l, err := c.src.List(ctx)
	if err != nil {
		return err
	}
	old := maps.Clone(c.snaps)
	var changed []*Snapshot
	for _, rt := range l.Routes {
		if c.snaps[rt.Key] == nil {
			s, err := c.store.Load(ctx, rt.Key)
			if err != nil {
				return err
			}
			if s != nil {
				c.snaps[rt.Key] = s
				changed = append(changed, s)
			}
		}
		ms := map[string]*Manifest{}
		for _, svc := range rt.ToolServices {
			if ms[svc.Name], err = c.fetcher.Fetch(ctx, svc); err != nil {
				break
			}
		}
		if err != nil {
			continue
		}
		s, err := Rebuild(rt, c.snaps[rt.Key], ms, time.Now())
		if err != nil {
			return err
		}
		if s == nil { // unchanged
			changed = append(changed, c.snaps[rt.Key])
			continue
		}
		if err := c.store.Save(ctx, s); err != nil {
			return err
		}
		c.snaps[rt.Key] = s
		changed = append(changed, s)
	}
	c.emb.Embed(changed, func(route string) *Snapshot { return old[route] }, func(ctx context.Context, s *Snapshot) {
		_ = c.store.Save(ctx, s)
	})
	return nil
}

func (c *cycle) Snapshot(key string) *Snapshot { return c.snaps[key] }

func (c *cycle) Ready() bool { return len(c.snaps) > 0 }

// storedModel returns the model and vector count the store holds for "big".
func storedModel(t *testing.T, s *jsonStore) (string, int) {
	t.Helper()
	s.mu.Lock()
	data := s.data["big"]
	s.mu.Unlock()
	var st storedSnapshot
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Embeddings == nil {
		return "", 0
	}
	return st.Embeddings.Model, len(st.Embeddings.Vectors)
}

// TestEmbeddingsComputedBatchedAndCached: tool embeddings are computed
// after the snapshot is served, in batches, stored with the snapshot, and
// only for tools whose text changed on a later refresh.
func TestEmbeddingsComputedBatchedAndCached(t *testing.T) {
	e := newEmbedEnv(t, nil, nil, EmbeddingService{BatchSize: 8, Concurrency: 2, DocumentPrefix: "passage: "})
	e.start(t)
	snap := e.reg.Snapshot("big")
	if snap == nil {
		t.Fatal("no snapshot")
	}
	e.wait()
	if model, ok := snap.SemanticReady(); !ok || model != "m1" {
		t.Fatalf("SemanticReady = %q %v, want m1 true", model, ok)
	}
	reqs := e.emb.Requests()
	if len(reqs) != 5 || e.emb.Inputs() != 35 {
		t.Fatalf("%d requests with %d inputs, want 5 batches of 35 tools", len(reqs), e.emb.Inputs())
	}
	for _, r := range reqs {
		if len(r.Inputs) > 8 || r.Model != "m1" || !strings.HasPrefix(r.Inputs[0], "passage: ") {
			t.Fatalf("request %d inputs, model %q, first %q", len(r.Inputs), r.Model, r.Inputs[0])
		}
	}
	if model, n := storedModel(t, e.store); model != "m1" || n != 35 {
		t.Fatalf("store holds model %q with %d vectors, want m1 with 35", model, n)
	}

	// Same content: nothing is embedded again.
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.wait()
	if n := e.emb.Inputs(); n != 35 {
		t.Fatalf("unchanged refresh embedded %d more tools", n-35)
	}

	// One description changes: only that tool is embedded.
	e.svc.Set(registrytest.ModeOK, strings.Replace(catalogManifest(), "Delete a invoice for good.", "Remove an invoice forever.", 1))
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	next := e.reg.Snapshot("big")
	if next == snap {
		t.Fatal("the changed manifest did not rebuild the snapshot")
	}
	e.wait()
	if n := e.emb.Inputs(); n != 36 {
		t.Fatalf("one changed tool: %d tools embedded in all, want 36", n)
	}
	last := e.emb.Requests()[len(e.emb.Requests())-1]
	if len(last.Inputs) != 1 || !strings.Contains(last.Inputs[0], "Remove an invoice forever.") {
		t.Fatalf("last request %q, want only the changed tool", last.Inputs)
	}
	if _, ok := next.SemanticReady(); !ok {
		t.Fatal("rebuilt snapshot has no embeddings")
	}
}

// TestEmbeddingsWarmStartAndModelChange: a warm start restores the stored
// vectors without calling the service; another model recomputes them all.
func TestEmbeddingsWarmStartAndModelChange(t *testing.T) {
	first := newEmbedEnv(t, nil, nil, EmbeddingService{})
	first.start(t)
	first.wait()
	if model, n := storedModel(t, first.store); model != "m1" || n != 35 {
		t.Fatalf("store holds %q/%d", model, n)
	}
	calls := len(first.emb.Requests())

	// Same model, same store, Tool Service down: served from the store.
	second := newEmbedEnv(t, first.store, first.emb, EmbeddingService{})
	second.svc.Set(registrytest.ModeFail, "")
	second.start(t)
	snap := second.reg.Snapshot("big")
	if snap == nil || !snap.lazy {
		t.Fatal("no restored snapshot")
	}
	if model, ok := snap.SemanticReady(); !ok || model != "m1" {
		t.Fatalf("restored snapshot: SemanticReady = %q %v, want m1 at once", model, ok)
	}
	second.wait()
	if n := len(first.emb.Requests()); n != calls {
		t.Fatalf("warm start called the embedding service %d times", n-calls)
	}

	// Another model: every vector is computed again, under that model.
	third := newEmbedEnv(t, first.store, first.emb, EmbeddingService{Model: "m2"})
	third.svc.Set(registrytest.ModeFail, "")
	third.start(t)
	snap = third.reg.Snapshot("big")
	third.wait()
	if model, ok := snap.SemanticReady(); !ok || model != "m2" {
		t.Fatalf("after a model change: SemanticReady = %q %v, want m2", model, ok)
	}
	var m2 int
	for _, r := range first.emb.Requests()[calls:] {
		if r.Model != "m2" {
			t.Fatalf("request for model %q after the change", r.Model)
		}
		m2 += len(r.Inputs)
	}
	if m2 != 35 {
		t.Fatalf("model change embedded %d tools, want 35", m2)
	}
}

// TestEmbeddingsServedLexicalUntilReady: while the tool embeddings are
// being computed, the snapshot is published and answers lexically, without
// waiting for the service; then the enriched ranking is swapped in.
func TestEmbeddingsServedLexicalUntilReady(t *testing.T) {
	e := newEmbedEnv(t, nil, nil, EmbeddingService{BatchSize: 64})
	e.emb.Hold()
	defer e.emb.Release()
	e.start(t) // returns while the embedding request is held
	snap := e.reg.Snapshot("big")
	if snap == nil || !e.reg.Ready() {
		t.Fatal("the route waits for its embeddings")
	}
	if _, ok := snap.SemanticReady(); ok {
		t.Fatal("ready while the service has not answered")
	}
	q := "get one shipment by id"
	if got, want := shortlistNames(t, snap.SearchTools(q, 0)), hitNamesOf(snap.search.ranker().Search(q, 0)); !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("answer while computing = %v, want the lexical %v", got, want)
	}
	// At most the held batch (it may still be on its way): no request
	// embedding for a snapshot without tool embeddings.
	if n := len(e.emb.Requests()); n > 1 {
		t.Fatalf("%d requests reached the service, want at most the held batch", n)
	}
	e.emb.Release()
	e.wait()
	if model, ok := snap.SemanticReady(); !ok || model != "m1" {
		t.Fatalf("after the service answered: SemanticReady = %q %v", model, ok)
	}
}

// TestEmbeddingChoice: catalog.embedding names the service, "none" opts
// out of the default, unset takes the default, and an unknown name leaves
// the route lexical.
func TestEmbeddingChoice(t *testing.T) {
	for _, tc := range []struct {
		name, field, def string
		ready            bool
	}{
		{"named", `"e"`, "", true},
		{"default", "", "e", true},
		{"none", `"none"`, "e", false},
		{"no default", "", "", false},
		{"unknown", `"other"`, "e", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEmbedEnvRoute(t, nil, nil, EmbeddingService{}, tc.field, tc.def)
			e.start(t)
			e.wait()
			snap := e.reg.Snapshot("big")
			if _, ok := snap.SemanticReady(); ok != tc.ready {
				t.Fatalf("SemanticReady = %v, want %v", ok, tc.ready)
			}
			if calls := len(e.emb.Requests()); (calls > 0) != tc.ready {
				t.Fatalf("%d calls to the embedding service", calls)
			}
			if got := shortlistNames(t, snap.SearchTools("delete an invoice", 0)); len(got) == 0 {
				t.Fatal("no answer")
			}
		})
	}
}

// TestEmbeddingsFailureNeverBlocks: a failing service leaves the route
// served lexically; a later refresh tries again.
func TestEmbeddingsFailureNeverBlocks(t *testing.T) {
	e := newEmbedEnv(t, nil, nil, EmbeddingService{})
	e.emb.Fail(500)
	e.start(t)
	snap := e.reg.Snapshot("big")
	e.wait()
	if snap == nil || len(snap.Tools) != 35 {
		t.Fatal("a failing embedding service emptied the route")
	}
	if _, ok := snap.SemanticReady(); ok {
		t.Fatal("ready despite the failure")
	}
	if got := shortlistNames(t, snap.SearchTools("delete an invoice", 0)); len(got) == 0 || got[0] != "billing_invoice_delete" {
		t.Fatalf("lexical answer while not ready = %v", got)
	}
	if got := registrytest.Counter(t, e.prom, "toolmesh_search_tool_embedding_failures_total", "service", "e"); got != 1 {
		t.Fatalf("failures counter = %v, want 1", got)
	}
	e.emb.Fail(0)
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.wait()
	if _, ok := snap.SemanticReady(); !ok {
		t.Fatal("a refresh after the service recovered did not compute the embeddings")
	}
}

// TestSearchToolsSemantic: one embedding call per search_tools request,
// cached; none when the lexical ranking has no candidate; a slow or failing
// service gives the lexical answer and counts the fallback; a request no
// tool serves stays rejected.
func TestSearchToolsSemantic(t *testing.T) {
	e := newEmbedEnv(t, nil, nil, EmbeddingService{Timeout: config.Duration(100 * time.Millisecond)})
	e.start(t)
	e.wait()
	snap := e.reg.Snapshot("big")
	if _, ok := snap.SemanticReady(); !ok {
		t.Fatal("not ready")
	}
	lexical := func(q string) []string {
		return hitNamesOf(snap.search.ranker().Search(q, 0))
	}
	base := len(e.emb.Requests())
	q := "list the meetings on my calendar"
	fused := shortlistNames(t, snap.SearchTools(q, 0))
	if len(fused) == 0 || !slices.Contains(fused, "calendar_meeting_list") {
		t.Fatalf("fused shortlist %v lacks calendar_meeting_list", fused)
	}
	if n := len(e.emb.Requests()) - base; n != 1 {
		t.Fatalf("%d embedding calls for one search_tools request, want 1", n)
	}
	snap.SearchTools("  LIST the meetings on my calendar ", 0)
	if n := len(e.emb.Requests()) - base; n != 1 {
		t.Fatalf("the same normalized request called the service again (%d calls)", n)
	}
	// No lexical candidate: rejected without a call.
	if got := shortlistNames(t, snap.SearchTools("xyzzy plugh", 0)); len(got) != 0 {
		t.Fatalf("unsupported request shortlisted %v", got)
	}
	if n := len(e.emb.Requests()) - base; n != 1 {
		t.Fatalf("a request without candidates called the service")
	}
	// Unsupported, with some words in the catalog: still rejected.
	if got := shortlistNames(t, snap.SearchTools("book a table for two at an Italian restaurant tonight", 0)); len(got) != 0 {
		t.Fatalf("unsupported request shortlisted %v", got)
	}

	for _, tc := range []struct {
		name, reason string
		set          func()
	}{
		{"timeout", "timeout", func() { e.emb.Delay(5 * time.Second) }},
		{"error", "error", func() { e.emb.Delay(0); e.emb.Fail(502) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.set()
			q := "get one shipment by id " + tc.name // not cached
			got := shortlistNames(t, snap.SearchTools(q, 0))
			if want := lexical(q); !slices.Equal(got, want) {
				t.Fatalf("fallback shortlist %v, want the lexical %v", got, want)
			}
			if n := registrytest.Counter(t, e.prom, "toolmesh_search_semantic_fallbacks_total", "reason", tc.reason); n != 1 {
				t.Fatalf("fallbacks{reason=%s} = %v, want 1", tc.reason, n)
			}
		})
	}
}

// TestSearchToolsSemanticGate: even with MinSimilarity rescue on, a request
// whose embedding equals a tool's text but that matches no identifier
// stays rejected.
func TestSearchToolsSemanticGate(t *testing.T) {
	e := newEmbedEnv(t, nil, nil, EmbeddingService{MinSimilarity: 0.01})
	e.start(t)
	e.wait()
	snap := e.reg.Snapshot("big")
	// The description of billing_invoice_delete, word for word, with the
	// entity swapped for one the catalog lacks: close in the test model,
	// no identifier matched.
	q := "Delete a spaceship for good."
	if got := shortlistNames(t, snap.SearchTools(q, 0)); len(got) != 0 {
		t.Fatalf("shortlist %v for a request no tool serves", got)
	}
}

func hitNamesOf(hits []search.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Name
	}
	return out
}

// TestSnapshotEmbeddingsRoundTrip: the vectors survive MarshalJSON and
// UnmarshalSnapshot bit for bit, are not part of the version, and malformed
// ones are dropped without failing the restore.
func TestSnapshotEmbeddingsRoundTrip(t *testing.T) {
	e := newEmbedEnv(t, nil, nil, EmbeddingService{})
	e.start(t)
	e.wait()
	snap := e.reg.Snapshot("big")
	data, err := snap.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != snap.Version {
		t.Fatalf("version %s after the round trip, want %s", back.Version, snap.Version)
	}
	sem := snap.search.sem.Load()
	st := back.search.stored
	if st == nil || st.model != "m1" || len(st.vecs) != len(snap.Tools) {
		t.Fatalf("restored embeddings %+v, want %d vectors of m1", st, len(snap.Tools))
	}
	for i, h := range sem.hashes {
		if !slices.Equal(st.vecs[h], sem.vecs[i]) {
			t.Fatalf("vector of %s changed in the round trip", snap.Tools[i].Name)
		}
	}

	// Without embeddings the same snapshot has the same version.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw, "embeddings")
	plain, _ := json.Marshal(raw)
	if s, err := UnmarshalSnapshot(plain); err != nil || s.Version != snap.Version || s.search.stored != nil {
		t.Fatalf("without embeddings: %v, %v", s, err)
	}

	// Malformed vectors: restored without them.
	for name, bad := range map[string]string{
		"not base64": `{"model":"m1","dims":256,"vectors":{"x":"%%%"}}`,
		"wrong size": `{"model":"m1","dims":256,"vectors":{"x":"AAAA"}}`,
		"no model":   `{"model":"","dims":256,"vectors":{}}`,
		"NaN":        `{"model":"m1","dims":1,"vectors":{"x":"AADAfw=="}}`,
	} {
		raw["embeddings"] = json.RawMessage(bad)
		b, _ := json.Marshal(raw)
		s, err := UnmarshalSnapshot(b)
		if err != nil || s.search.stored != nil {
			t.Errorf("%s: restore = %v, stored %v; want the snapshot without vectors", name, err, s != nil && s.search.stored != nil)
		}
	}
}
