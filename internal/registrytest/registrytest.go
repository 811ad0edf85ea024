// Package registrytest holds what the registry's tests (registry,
// registry/refresher, registry/redisstore) share: a Portal or Tool Service
// on 127.0.0.1 that a test can switch to fail, hang or return garbage, a
// manifest builder, an event recorder and a counter reader. It imports
// nothing of the registry, so the registry's own package tests can use it
// too.
package registrytest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Modes of a FakeServer.
const (
	ModeOK      = "ok"      // 200 application/json with the body
	ModeFail    = "fail"    // 500 with a short text body
	ModeHang    = "hang"    // never answers until the client gives up
	ModeGarbage = "garbage" // 200 application/json that is not JSON
	ModeHTML    = "html"    // 200 text/html
)

// FakeServer is a real HTTP server on 127.0.0.1 serving one JSON document
// at one path (GET), which a test can switch to fail, hang or return
// garbage.
type FakeServer struct {
	*httptest.Server
	// Hits counts the requests for the path.
	Hits    atomic.Int64
	path    string
	release chan struct{}

	mu   sync.Mutex
	mode string
	body string
}

// NewFakeServer serves body at path until the test ends.
func NewFakeServer(t testing.TB, path, body string) *FakeServer {
	t.Helper()
	f := &FakeServer{path: path, mode: ModeOK, body: body, release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(f.release) }) // runs first: unblocks hanging handlers
	return f
}

// Set switches the mode and, unless body is "", the document.
func (f *FakeServer) Set(mode, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
	if body != "" {
		f.body = body
	}
}

func (f *FakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != f.path || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	f.Hits.Add(1)
	f.mu.Lock()
	mode, body := f.mode, f.body
	f.mu.Unlock()
	switch mode {
	case ModeOK:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	case ModeFail:
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	case ModeHang:
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
	case ModeGarbage:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"tools": [ {"name": `)
	case ModeHTML:
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>login</html>")
	}
}

// ToolsDoc is a manifest with one trivial tool per name.
func ToolsDoc(names ...string) string {
	var entries []string
	for _, n := range names {
		entries = append(entries, fmt.Sprintf(`{"name":%q,"version":"1","inputSchema":{"type":"object"}}`, n))
	}
	return `{"tools":[` + strings.Join(entries, ",") + `]}`
}

// Recorder logs calls (of a Store, Source or ManifestFetcher) in order, so
// a test can check the start-up order and how often things happen.
type Recorder struct {
	mu     sync.Mutex
	events []string
}

// Add records e.
func (r *Recorder) Add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// List is what was recorded, in order.
func (r *Recorder) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// Count is how many events start with prefix.
func (r *Recorder) Count(prefix string) int {
	n := 0
	for _, e := range r.List() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// Counter is the value of counter name{label=value} in reg, 0 when absent.
func Counter(t testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
