package embed

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry/search/embed/embedtest"
)

func startServer(t *testing.T) *embedtest.Server {
	t.Helper()
	s, err := embedtest.Start(map[string]string{"purge": "delete"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDocumentsBatchesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name         string
		n, batch     int
		wantRequests int
	}{
		{"one batch", 3, 8, 1},
		{"exact batches", 8, 4, 2},
		{"last batch short", 9, 4, 3},
		{"batch of one", 3, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			c := newClient(t, Options{URL: s.URL, Model: "m1", BatchSize: tc.batch, Concurrency: 2, DocumentPrefix: "passage: "})
			texts := make([]string, tc.n)
			for i := range texts {
				texts[i] = strings.Repeat("word", i+1) + " tool"
			}
			vs, err := c.Documents(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != tc.wantRequests {
				t.Fatalf("%d requests, want %d", len(reqs), tc.wantRequests)
			}
			for _, r := range reqs {
				if len(r.Inputs) > tc.batch || r.Model != "m1" || !strings.HasPrefix(r.Inputs[0], "passage: ") {
					t.Fatalf("request %+v: batch over %d, wrong model or no prefix", r, tc.batch)
				}
			}
			// Each vector is the one of its own text (placed by index).
			for i, v := range vs {
				want, _ := unit(embedtest.Vector("m1", "passage: "+texts[i], nil))
				if Dot(v, want) < 0.9999 {
					t.Fatalf("vector %d is not its text's: cos %v", i, Dot(v, want))
				}
				if l := Dot(v, v); math.Abs(l-1) > 1e-5 {
					t.Fatalf("vector %d has length² %v, want 1", i, l)
				}
			}
		})
	}
}

func TestQueryCacheAndPrefix(t *testing.T) {
	s := startServer(t)
	now := time.Unix(1000, 0)
	c := newClient(t, Options{URL: s.URL, Model: "m1", QueryPrefix: "query: ", QueryCache: 2, QueryCacheTTL: time.Minute, Now: func() time.Time { return now }})
	ctx := context.Background()
	a, err := c.Query(ctx, "Purge  the Cache")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "purge the cache"); err != nil { // same normalized query
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("%d requests for one normalized query, want 1", n)
	}
	if got := s.Requests()[0].Inputs[0]; got != "query: purge the cache" {
		t.Fatalf("input %q, want the prefixed normalized query", got)
	}
	b, _ := c.Query(ctx, "delete the cache") // synonym in the test model
	if Dot(a, b) < 0.999 {
		t.Fatalf("test model: synonyms should embed alike, cos %v", Dot(a, b))
	}
	// Bounded: more distinct queries than 2×QueryCache keep at most that many.
	for i := range 10 {
		c.Query(ctx, "query number "+strings.Repeat("x", i))
	}
	if n := c.cache.len(); n > 4 {
		t.Fatalf("cache holds %d entries, want at most 4", n)
	}
	// Expired: asked again after the TTL.
	before := len(s.Requests())
	now = now.Add(2 * time.Minute)
	c.Query(ctx, "query number ")
	if len(s.Requests()) != before+1 {
		t.Fatal("an expired entry was served from the cache")
	}
}

func TestQueryTimeoutAndErrors(t *testing.T) {
	s := startServer(t)
	c := newClient(t, Options{URL: s.URL, Model: "m1", Timeout: 50 * time.Millisecond})
	s.Delay(5 * time.Second)
	_, err := c.Query(context.Background(), "slow")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want a deadline exceeded", err)
	}
	s.Delay(0)
	s.Fail(503)
	_, err = c.Query(context.Background(), "fails")
	if err == nil || !strings.Contains(err.Error(), "status 503: test server told to fail") {
		t.Fatalf("err %v, want the status and the server's message", err)
	}
	if _, err := c.Documents(context.Background(), []string{"a tool"}); err == nil {
		t.Fatal("documents: no error from a failing server")
	}
}

// TestQueryInFlight: past QueryInFlight calls under way, Query fails at
// once instead of queueing.
func TestQueryInFlight(t *testing.T) {
	s := startServer(t)
	c := newClient(t, Options{URL: s.URL, Model: "m1", QueryInFlight: 1, Timeout: 10 * time.Second})
	s.Hold()
	done := make(chan error, 1)
	go func() { _, err := c.Query(context.Background(), "first"); done <- err }()
	for len(s.Requests()) == 0 { // the first call is under way
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Query(context.Background(), "second"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second call: %v, want ErrBusy", err)
	}
	s.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(context.Background(), "third"); err != nil {
		t.Fatalf("after the first call ended: %v", err)
	}
}

func TestToken(t *testing.T) {
	s := startServer(t)
	s.RequireToken("s3cret")
	c := newClient(t, Options{URL: s.URL, Model: "m1", Token: func() (string, error) { return "s3cret", nil }})
	if _, err := c.Query(context.Background(), "hello"); err != nil {
		t.Fatal(err)
	}
	bad := newClient(t, Options{URL: s.URL, Model: "m1"})
	if _, err := bad.Query(context.Background(), "hello"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err %v, want a 401", err)
	}
	broken := newClient(t, Options{URL: s.URL, Model: "m1", Token: func() (string, error) { return "", errors.New("no file") }})
	if _, err := broken.Query(context.Background(), "hello"); err == nil || !strings.Contains(err.Error(), "credential") {
		t.Fatalf("err %v, want the credential error", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	for _, o := range []Options{{URL: "", Model: "m"}, {URL: "ftp://x", Model: "m"}, {URL: "http://x/v1/embeddings"}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		n          int
		err        string
	}{
		{"ok by index", `{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}`, 2, ""},
		{"ok in order", `{"data":[{"embedding":[1]},{"embedding":[2]}]}`, 2, ""},
		{"count", `{"data":[{"index":0,"embedding":[1]}]}`, 2, "1 embeddings for 2 inputs"},
		{"range", `{"data":[{"index":2,"embedding":[1]},{"index":0,"embedding":[1]}]}`, 2, "out of range"},
		{"duplicate", `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}`, 2, "two embeddings"},
		{"dims", `{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[1,2]}]}`, 2, "data[0] has 1"},
		{"empty", `{"data":[{"index":0,"embedding":[]}]}`, 1, "has 0 values"},
		{"zero", `{"data":[{"index":0,"embedding":[0,0]}]}`, 1, "zero"},
		{"base64", `{"data":[{"index":0,"embedding":"AAAA"}]}`, 1, "decode"},
		{"not json", `<html>`, 1, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := Decode([]byte(tc.body), tc.n)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "ok by index" && (vs[0][0] != 0.6 || vs[1][1] != 1) {
				t.Fatalf("vectors %v: not placed by index or not unit", vs)
			}
		})
	}
}

// len is the number of entries held (for tests).
func (c *queryCache) len() int {
	g := c.gen.Load()
	return int(g.cur.n.Load() + g.prev.n.Load())
}
