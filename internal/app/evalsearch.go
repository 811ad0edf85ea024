package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
	"github.com/toolmesh/toolmesh/registry/search"
	"github.com/toolmesh/toolmesh/registry/search/embed"
)

// evalSearchOptions are the flags of `toolmesh eval-search`.
type evalSearchOptions struct {
	tools, queries string
	synonyms       string
	shortlist      int
	minCoverage    float64
	rounds         int
	misses         bool
	minRecall      float64
	minRejection   float64

	// Semantic re-ranking (ADR 0007): an embedding service from a toolmesh
	// config file, or given by flags.
	config, embedding            string
	embURL, embModel             string
	embTokenEnv                  string
	embQueryPrefix, embDocPrefix string
	embTimeout                   time.Duration
	minSimilarity                float64
}

func newEvalSearchCmd() *cobra.Command {
	var o evalSearchOptions
	c := &cobra.Command{
		Use:   "eval-search --tools FILE --queries FILE",
		Short: "Measure search mode on a catalog with labelled requests",
		Long: `eval-search builds the search-mode index over a catalog of tools, as a route
in search mode does, runs labelled requests through search_tools' ranking and
prints what ADR 0004 measures: catalog and shortlist size, recall of the
wanted tools in the shortlist, rejection of requests no tool serves, and
search latency (p50, p99).

--tools is a JSON file of tools in the shape of an MCP tools/list result
({"tools": [...]}, the whole JSON-RPC response, or a bare array); only name,
title, description and inputSchema are read.

--queries is a JSON file {"queries": [...]} (or a bare array) of
  {"id": "q1", "kind": "single", "split": "dev", "query": "refund order 1234",
   "want": ["shop_refund_create"]}
where want lists every tool the request needs (all must be shortlisted) and
is empty for a request that no tool serves (the shortlist must be empty).
kind and split are free text; figures are also given per kind and split.

--synonyms is a text file of the route's own synonym groups (catalog.synonyms
in the Portal), one group per line, words separated by spaces; blank lines
and lines starting with # are skipped.

With an embedding service, the same requests are also ranked with semantic
re-ranking (docs/decisions/0007-semantic-reranking.md), as a route naming
that service would rank them, and both sets of figures are printed side by
side: the lexical ones first, then those prefixed "semantic", with the
latency of a whole search_tools ranking including the request's embedding
call, and how many calls failed or timed out (the lexical answer stands for
those). The service is either an entry of a toolmesh config file (--config,
--embedding NAME; default its defaultEmbedding; credentials as the server
reads them) or given by --embedding-url and --embedding-model (a bearer token
only from --embedding-token-env). --min-similarity, --embedding-timeout and
the prefixes override the entry's values.

With --min-recall or --min-rejection it exits with status 1 when a figure is
below (the semantic figure when an embedding service is given), so it can
guard a catalog in CI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return evalSearch(cmd.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.tools, "tools", "", "JSON file of the catalog's tools (required)")
	f.StringVar(&o.queries, "queries", "", "JSON file of labelled requests (required)")
	f.StringVar(&o.synonyms, "synonyms", "", "text file of synonym groups, one per line, as catalog.synonyms")
	f.IntVar(&o.shortlist, "shortlist", 0, "shortlist size, as catalog.shortlist (0: the default, 5)")
	f.Float64Var(&o.minCoverage, "min-coverage", 0, "the gate's minimum coverage (0: the default, 0.5; negative turns the coverage checks off)")
	f.IntVar(&o.rounds, "latency-rounds", 20, "times each request is run to measure latency (0: no latency figures)")
	f.BoolVar(&o.misses, "misses", false, "list every request that was not served, with its shortlist")
	f.Float64Var(&o.minRecall, "min-recall", 0, "exit with status 1 when recall of wanted tools is below this")
	f.Float64Var(&o.minRejection, "min-rejection", 0, "exit with status 1 when rejection of unsupported requests is below this")
	f.StringVar(&o.config, "config", "", "toolmesh config file whose embeddings entry to use")
	f.StringVar(&o.embedding, "embedding", "", "name of the embeddings entry of --config (default: its defaultEmbedding)")
	f.StringVar(&o.embURL, "embedding-url", "", "OpenAI-compatible embeddings endpoint, e.g. http://tei:8080/v1/embeddings (instead of --config)")
	f.StringVar(&o.embModel, "embedding-model", "", "model name sent to --embedding-url")
	f.StringVar(&o.embTokenEnv, "embedding-token-env", "", "environment variable holding the bearer token for --embedding-url")
	f.StringVar(&o.embQueryPrefix, "embedding-query-prefix", "", "prefix of every request text (e5: \"query: \")")
	f.StringVar(&o.embDocPrefix, "embedding-document-prefix", "", "prefix of every tool text (e5: \"passage: \")")
	f.DurationVar(&o.embTimeout, "embedding-timeout", 0, "bound on one request embedding (0: the entry's, default 300ms)")
	f.Float64Var(&o.minSimilarity, "min-similarity", 0, "cosine similarity that lets a lexically rejected request be served (0: the entry's, default off)")
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	return c
}

func evalSearch(out io.Writer, o evalSearchOptions) error {
	if o.tools == "" || o.queries == "" {
		return errors.New("eval-search: --tools and --queries are required")
	}
	if o.shortlist < 0 || o.shortlist > 50 || o.rounds < 0 {
		return errors.New("eval-search: --shortlist must be 0..50 and --latency-rounds at least 0")
	}
	docs, err := readEvalTools(o.tools)
	if err != nil {
		return err
	}
	qs, err := readEvalQueries(o.queries)
	if err != nil {
		return err
	}
	var synonyms []string
	if o.synonyms != "" {
		if synonyms, err = readEvalSynonyms(o.synonyms); err != nil {
			return err
		}
	}

	emb, err := evalEmbedder(o)
	if err != nil {
		return err
	}

	start := time.Now()
	ix := search.New(docs, search.Options{Shortlist: o.shortlist, MinCoverage: o.minCoverage, Synonyms: synonyms})
	built := time.Since(start)
	all, results := search.Evaluate(ix, qs)

	fmt.Fprintf(out, "catalog: %d tools (%s), index built in %v\n", ix.Len(), o.tools, built.Round(time.Millisecond))
	fmt.Fprintf(out, "shortlist: at most %d\n", ix.Shortlist())
	if len(synonyms) > 0 {
		fmt.Fprintf(out, "synonyms: %d groups (%s)\n", len(synonyms), o.synonyms)
	}
	printEvalStats(out, "", all, results)
	if o.rounds > 0 && len(qs) > 0 {
		p50, p99 := search.Latency(ix, qs, o.rounds)
		fmt.Fprintf(out, "latency, search only, %d requests x %d: p50 %v p99 %v\n", len(qs), o.rounds, p50, p99)
	}
	if o.misses {
		printMisses(out, "", results)
	}

	served := all
	if emb != nil {
		if served, err = evalSemantic(out, o, emb, ix, docs, qs); err != nil {
			return err
		}
	}
	var below []string
	if served.Supported > 0 && served.Recall() < o.minRecall {
		below = append(below, fmt.Sprintf("recall %.3f < %.3f", served.Recall(), o.minRecall))
	}
	if served.Unsupported > 0 && served.Rejection() < o.minRejection {
		below = append(below, fmt.Sprintf("rejection %.3f < %.3f", served.Rejection(), o.minRejection))
	}
	if len(below) > 0 {
		return runtimeError{fmt.Errorf("eval-search: %s", strings.Join(below, ", "))}
	}
	return nil
}

// printEvalStats prints the figures of all the requests, then per kind and
// per split; prefix names the ranking ("" lexical, "semantic ").
func printEvalStats(out io.Writer, prefix string, all search.Stats, results []search.Result) {
	fmt.Fprintf(out, "%sall %v\n", prefix, all)
	for _, g := range []struct {
		name string
		key  func(search.Query) string
	}{
		{"kind", func(q search.Query) string { return q.Kind }},
		{"split", func(q search.Query) string { return q.Split }},
	} {
		groups := map[string]*search.Stats{}
		for _, r := range results {
			k := g.key(r.Query)
			if k == "" {
				continue
			}
			if groups[k] == nil {
				groups[k] = &search.Stats{}
			}
			groups[k].Add(r.Query, r.Hits)
		}
		if len(groups) < 2 {
			continue
		}
		keys := make([]string, 0, len(groups))
		for k := range groups {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "  %s%s %-12s %v\n", prefix, g.name, k, groups[k])
		}
	}
}

// printMisses lists the requests that were not served.
func printMisses(out io.Writer, prefix string, results []search.Result) {
	for _, r := range results {
		if r.OK {
			continue
		}
		got := make([]string, len(r.Hits))
		for i, h := range r.Hits {
			got[i] = fmt.Sprintf("%s(%.2f %s)", h.Name, h.Score, strings.Join(h.Matched, ","))
		}
		fmt.Fprintf(out, "%smiss %s %q want %v got %v\n", prefix, r.Query.ID, r.Query.Query, r.Query.Want, got)
	}
}

// evalEmbedder returns the embedding service the flags name, or nil. It
// is resolved as the server resolves it: the flags make a Config (the
// file's, loaded and validated as `run` loads it, or one entry made of
// --embedding-url), and its registry options (registryOptions, wiring.go)
// give the services search-mode routes rank with (refresher.Embedders).
func evalEmbedder(o evalSearchOptions) (*evalEmbedding, error) {
	cfg, name, err := evalEmbeddingConfig(o)
	if err != nil || cfg == nil {
		return nil, err
	}
	svc := cfg.Embeddings[name]
	if o.embQueryPrefix != "" {
		svc.QueryPrefix = o.embQueryPrefix
	}
	if o.embDocPrefix != "" {
		svc.DocumentPrefix = o.embDocPrefix
	}
	if o.embTimeout > 0 {
		svc.Timeout = config.Duration(o.embTimeout)
	}
	if o.minSimilarity != 0 {
		svc.MinSimilarity = o.minSimilarity
	}
	cfg.Embeddings[name] = svc
	if err := registry.CheckEmbeddings(cfg.Embeddings, cfg.DefaultEmbedding, cfg.Credentials); err != nil {
		return nil, fmt.Errorf("eval-search: embedding service: %w", err)
	}
	opts := registryOptions(cfg, registryParts{client: newHTTPClient(), log: slog.New(slog.DiscardHandler)})
	c, minSim, ok := refresher.Embedders(opts).Service(name)
	if !ok {
		return nil, fmt.Errorf("eval-search: embedding service %q cannot be used", name)
	}
	return &evalEmbedding{client: c, url: svc.URL, minSim: minSim}, nil
}

// evalEmbeddingConfig is the Config whose embedding service name eval-search
// ranks with: --config's, or one made of --embedding-url; nil when the
// flags name none.
func evalEmbeddingConfig(o evalSearchOptions) (*Config, string, error) {
	switch {
	case o.config != "" && o.embURL != "":
		return nil, "", errors.New("eval-search: --config and --embedding-url are exclusive")
	case o.config != "":
		cfg, err := readConfig(o.config, nil)
		if err != nil {
			return nil, "", fmt.Errorf("eval-search: --config: %w", err)
		}
		name := cmp.Or(o.embedding, cfg.DefaultEmbedding)
		if _, ok := cfg.Embeddings[name]; !ok || name == "" {
			return nil, "", fmt.Errorf("eval-search: --embedding: %q is not a key of embeddings in %s", name, o.config)
		}
		return &cfg, name, nil
	case o.embURL != "":
		const name = "eval-search"
		cfg := defaultConfig()
		svc := registry.EmbeddingService{URL: o.embURL, Model: o.embModel}
		if o.embTokenEnv != "" {
			svc.Credential = "token"
			cfg.Credentials = map[string]config.CredentialSource{"token": {Env: o.embTokenEnv}}
		}
		cfg.Embeddings = map[string]registry.EmbeddingService{name: svc}
		return &cfg, name, nil
	default:
		if o.embedding != "" || o.embModel != "" || o.embTokenEnv != "" {
			return nil, "", errors.New("eval-search: --embedding needs --config, and --embedding-model and --embedding-token-env need --embedding-url")
		}
		return nil, "", nil
	}
}

// evalEmbedding is the embedding service of one eval-search run.
type evalEmbedding struct {
	client *embed.Client
	url    string
	minSim float64
}

// evalSemantic ranks every request as a route with the embedding service
// would (lexical ranking fused with the request's similarity to each tool),
// prints the figures prefixed "semantic", and returns them.
func evalSemantic(out io.Writer, o evalSearchOptions, emb *evalEmbedding, ix *search.Index, docs []search.Doc, qs []search.Query) (search.Stats, error) {
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = search.DocText(d)
	}
	start := time.Now()
	vecs, err := emb.client.Documents(context.Background(), texts)
	if err != nil {
		return search.Stats{}, runtimeError{fmt.Errorf("eval-search: embed the tools: %w", err)}
	}
	fmt.Fprintf(out, "semantic re-ranking: model %s at %s, %d tools embedded in %v, min similarity %v\n",
		emb.client.Model(), emb.url, len(docs), time.Since(start).Round(time.Millisecond), emb.minSim)

	var all search.Stats
	results := make([]search.Result, len(qs))
	durs := make([]time.Duration, 0, len(qs))
	calls, failed := 0, 0
	for i, q := range qs {
		begin := time.Now()
		lx := ix.Rank(q.Query, 0)
		hits := lx.Hits
		if lx.WantsSemantic(emb.minSim) {
			calls++
			qv, err := emb.client.Query(context.Background(), q.Query)
			if err != nil {
				failed++
			} else {
				hits = lx.Fuse(func(doc int) (float64, bool) {
					if len(vecs[doc]) != len(qv) {
						return 0, false
					}
					return embed.Dot(qv, vecs[doc]), true
				}, search.FuseOptions{MinSimilarity: emb.minSim})
			}
		}
		durs = append(durs, time.Since(begin))
		results[i] = search.Result{Query: q, Hits: hits, OK: all.Add(q, hits)}
	}
	printEvalStats(out, "semantic ", all, results)
	if len(durs) > 0 {
		slices.Sort(durs)
		fmt.Fprintf(out, "semantic latency, ranking with the request embedding, %d requests x 1: p50 %v p99 %v; embedding calls %d, failed or timed out %d (lexical answer)\n",
			len(durs), durs[len(durs)/2], durs[len(durs)*99/100], calls, failed)
	}
	if o.misses {
		printMisses(out, "semantic ", results)
	}
	return all, nil
}

// readEvalTools reads tools from a tools/list result, a JSON-RPC response
// carrying one, or a bare array.
func readEvalTools(path string) ([]search.Doc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval-search: %w", err)
	}
	var docs []search.Doc
	if err := json.Unmarshal(raw, &docs); err == nil {
		return checkEvalTools(path, docs)
	}
	var m struct {
		Tools  []search.Doc `json:"tools"`
		Result *struct {
			Tools []search.Doc `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("eval-search: decode %s: %w", path, err)
	}
	if m.Result != nil {
		return checkEvalTools(path, m.Result.Tools)
	}
	return checkEvalTools(path, m.Tools)
}

func checkEvalTools(path string, docs []search.Doc) ([]search.Doc, error) {
	if len(docs) == 0 {
		return nil, fmt.Errorf("eval-search: %s holds no tools", path)
	}
	for i, d := range docs {
		if d.Name == "" {
			return nil, fmt.Errorf("eval-search: %s: tool %d has no name", path, i)
		}
	}
	return docs, nil
}

// readEvalQueries reads {"queries": [...]} or a bare array of queries.
func readEvalQueries(path string) ([]search.Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval-search: %w", err)
	}
	var qs []search.Query
	if err := json.Unmarshal(raw, &qs); err != nil {
		var m struct {
			Queries []search.Query `json:"queries"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("eval-search: decode %s: %w", path, err)
		}
		qs = m.Queries
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("eval-search: %s holds no queries", path)
	}
	for i, q := range qs {
		if strings.TrimSpace(q.Query) == "" {
			return nil, fmt.Errorf("eval-search: %s: query %d (%q) is empty", path, i, q.ID)
		}
	}
	return qs, nil
}

// readEvalSynonyms reads synonym groups, one per line.
func readEvalSynonyms(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval-search: %w", err)
	}
	var groups []string
	for line := range strings.Lines(string(raw)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			groups = append(groups, line)
		}
	}
	if errs := search.ValidateSynonyms(groups); len(errs) > 0 {
		return nil, fmt.Errorf("eval-search: %s: synonyms%w", path, errors.Join(errs...))
	}
	return groups, nil
}
