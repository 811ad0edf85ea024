// Package embed is a client of an OpenAI-compatible embeddings endpoint
// (POST /v1/embeddings: text-embeddings-inference, vLLM, Ollama, hosted
// APIs), used by search mode to re-rank a route's lexical shortlist
// (docs/decisions/0007-semantic-reranking.md). It batches document
// embeddings under a concurrency bound, caches query embeddings briefly,
// and returns unit-length vectors so that a dot product is the cosine.
package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout       = 300 * time.Millisecond
	DefaultBatchTimeout  = 30 * time.Second
	DefaultBatchSize     = 32
	DefaultConcurrency   = 2
	DefaultQueryCache    = 4096
	DefaultQueryCacheTTL = 5 * time.Minute
	DefaultQueryInFlight = 64
	// MaxResponseBytes bounds one embeddings response.
	MaxResponseBytes = 64 << 20
	// MaxDims bounds the length of one embedding.
	MaxDims = 16384
)

// Options configure a Client.
type Options struct {
	// URL is the embeddings endpoint itself, e.g.
	// http://tei:8080/v1/embeddings.
	URL string
	// Model is sent as "model" and names the vectors: vectors of another
	// model are never mixed with these.
	Model string
	// Token returns the bearer token sent as Authorization, read on each
	// call so that a rotated credential file takes effect; nil sends none.
	Token func() (string, error)
	// Timeout bounds one query embedding (the search_tools latency budget
	// of the semantic signal); BatchTimeout bounds one batch of documents.
	Timeout      time.Duration
	BatchTimeout time.Duration
	// BatchSize is the most inputs sent in one request; Concurrency the
	// most document requests in flight at once, over all routes that share
	// this Client.
	BatchSize   int
	Concurrency int
	// QueryPrefix and DocumentPrefix are prepended to every query and tool
	// text ("query: " and "passage: " for e5 models).
	QueryPrefix    string
	DocumentPrefix string
	// QueryInFlight is the most request embeddings in flight at once; one
	// more fails at once with ErrBusy rather than queue behind a slow
	// service (default 64).
	QueryInFlight int
	// QueryCache is the number of query embeddings kept (at most twice
	// this many are held), each for QueryCacheTTL.
	QueryCache    int
	QueryCacheTTL time.Duration
	// HTTPClient defaults to a client without its own timeout (each call
	// has a context deadline).
	HTTPClient *http.Client
	Now        func() time.Time
}

// Client calls one embeddings endpoint. It is safe for concurrent use.
type Client struct {
	o     Options
	sem   chan struct{} // document requests in flight
	qsem  chan struct{} // request embeddings in flight
	cache *queryCache
}

// ErrBusy is the error of Query when QueryInFlight calls are under way.
var ErrBusy = errors.New("embeddings: too many request embeddings in flight")

// New returns a Client for o, or an error naming the option to change.
func New(o Options) (*Client, error) {
	if o.URL == "" || !(strings.HasPrefix(o.URL, "http://") || strings.HasPrefix(o.URL, "https://")) {
		return nil, fmt.Errorf("url: %q must be an http:// or https:// URL of an OpenAI-compatible /v1/embeddings endpoint", o.URL)
	}
	if o.Model == "" {
		return nil, errors.New("model: required (it names the vectors, so a model change recomputes them)")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.QueryInFlight <= 0 {
		o.QueryInFlight = DefaultQueryInFlight
	}
	if o.QueryCache <= 0 {
		o.QueryCache = DefaultQueryCache
	}
	if o.QueryCacheTTL <= 0 {
		o.QueryCacheTTL = DefaultQueryCacheTTL
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{o: o, sem: make(chan struct{}, o.Concurrency), qsem: make(chan struct{}, o.QueryInFlight), cache: newQueryCache(o.QueryCache, o.QueryCacheTTL)}, nil
}

// Model returns the model name.
func (c *Client) Model() string { return c.o.Model }

// Timeout returns the query embedding timeout.
func (c *Client) Timeout() time.Duration { return c.o.Timeout }

// DocumentPrefix returns the prefix of document texts (part of what a
// document vector depends on).
func (c *Client) DocumentPrefix() string { return c.o.DocumentPrefix }

// Query returns the embedding of one search request, from the cache when the
// same normalized request was embedded recently. It waits at most Timeout
// (or ctx's deadline, if sooner), and not at all when QueryInFlight calls
// are already under way (ErrBusy).
func (c *Client) Query(ctx context.Context, q string) ([]float32, error) {
	key := normalizeQuery(q)
	now := c.o.Now()
	if v, ok := c.cache.get(key, now); ok {
		return v, nil
	}
	select {
	case c.qsem <- struct{}{}:
		defer func() { <-c.qsem }()
	default:
		return nil, ErrBusy
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	vs, err := c.call(ctx, []string{c.o.QueryPrefix + key})
	if err != nil {
		return nil, err
	}
	c.cache.put(key, vs[0], now)
	return vs[0], nil
}

// Documents returns the embeddings of texts, in order, sending batches of at
// most BatchSize inputs, at most Concurrency at once (shared by every caller
// of this Client). Each batch has BatchTimeout. The first error ends the
// call.
func (c *Client) Documents(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for start := 0; start < len(texts); start += c.o.BatchSize {
		end := min(start+c.o.BatchSize, len(texts))
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			once.Do(func() { first = ctx.Err() })
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(start, end int) {
			defer wg.Done()
			defer func() { <-c.sem }()
			in := make([]string, end-start)
			for i, t := range texts[start:end] {
				in[i] = c.o.DocumentPrefix + t
			}
			bctx, bcancel := context.WithTimeout(ctx, c.o.BatchTimeout)
			defer bcancel()
			vs, err := c.call(bctx, in)
			if err != nil {
				once.Do(func() { first = fmt.Errorf("inputs %d..%d: %w", start, end-1, err) })
				cancel()
				return
			}
			copy(out[start:end], vs)
		}(start, end)
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

type request struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

// call sends one embeddings request and decodes its answer.
func (c *Client) call(ctx context.Context, inputs []string) ([][]float32, error) {
	body, err := json.Marshal(request{Model: c.o.Model, Input: inputs})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embeddings request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.o.Token != nil {
		tok, err := c.o.Token()
		if err != nil {
			return nil, fmt.Errorf("embeddings credential: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embeddings request to %s: %w", c.o.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("embeddings response from %s: %w", c.o.URL, err)
	}
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("embeddings response from %s: larger than %d bytes", c.o.URL, MaxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("embeddings response from %s: status %d: %s", c.o.URL, resp.StatusCode, errorText(data))
	}
	vs, err := Decode(data, len(inputs))
	if err != nil {
		return nil, fmt.Errorf("embeddings response from %s: %w", c.o.URL, err)
	}
	return vs, nil
}

// errorText is the message of an OpenAI-style error body, or its start.
func errorText(data []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return clip(obj.Message)
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil {
			return clip(s)
		}
	}
	return clip(string(data))
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

type response struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// Decode reads an embeddings response for n inputs: one entry per input,
// placed by its "index" (entries without one are taken in order), all of
// one length, finite and not all zero. The vectors are returned scaled to
// unit length.
func Decode(data []byte, n int) ([][]float32, error) {
	var r response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("decode: %d embeddings for %d inputs", len(r.Data), n)
	}
	out := make([][]float32, n)
	dims := -1
	for i, d := range r.Data {
		at := i
		if d.Index != nil {
			at = *d.Index
		}
		if at < 0 || at >= n {
			return nil, fmt.Errorf("decode: data[%d].index %d is out of range 0..%d", i, at, n-1)
		}
		if out[at] != nil {
			return nil, fmt.Errorf("decode: two embeddings for input %d", at)
		}
		if dims < 0 {
			dims = len(d.Embedding)
		}
		if len(d.Embedding) == 0 || len(d.Embedding) > MaxDims {
			return nil, fmt.Errorf("decode: data[%d].embedding has %d values, want 1..%d", i, len(d.Embedding), MaxDims)
		}
		if len(d.Embedding) != dims {
			return nil, fmt.Errorf("decode: data[%d].embedding has %d values, data[0] has %d", i, len(d.Embedding), dims)
		}
		v, err := unit(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("decode: data[%d].embedding: %w", i, err)
		}
		out[at] = v
	}
	return out, nil
}

// unit returns v scaled to length 1.
func unit(v []float64) ([]float32, error) {
	var sum float64
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("not a finite number")
		}
		sum += x * x
	}
	norm := math.Sqrt(sum)
	if norm == 0 || math.IsInf(norm, 0) || math.IsNaN(norm) {
		return nil, errors.New("zero or overflowing vector")
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out, nil
}

// Dot is the cosine of two unit vectors; 0 when their lengths differ.
func Dot(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return float64(s)
}

// normalizeQuery is the cache key of a request: lowercased, whitespace
// collapsed. It is also what is embedded, so one key has one vector.
func normalizeQuery(q string) string {
	return strings.Join(strings.Fields(strings.ToLower(q)), " ")
}
