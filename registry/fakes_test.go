package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Modes of a fakeServer.
const (
	modeOK      = "ok"      // 200 application/json with the body
	modeFail    = "fail"    // 500 with a short text body
	modeHang    = "hang"    // never answers until the client gives up
	modeGarbage = "garbage" // 200 application/json that is not JSON
	modeHTML    = "html"    // 200 text/html
)

// fakeServer is a real HTTP server on 127.0.0.1 serving one JSON document at
// one path, which a test can switch to fail, hang or return garbage.
type fakeServer struct {
	*httptest.Server
	path    string
	hits    atomic.Int64
	release chan struct{}

	mu   sync.Mutex
	mode string
	body string
}

func newFakeServer(t *testing.T, path, body string) *fakeServer {
	t.Helper()
	f := &fakeServer{path: path, mode: modeOK, body: body, release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(f.release) }) // runs first: unblocks hanging handlers
	return f
}

func (f *fakeServer) set(mode, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
	if body != "" {
		f.body = body
	}
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != f.path || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	f.hits.Add(1)
	f.mu.Lock()
	mode, body := f.mode, f.body
	f.mu.Unlock()
	switch mode {
	case modeOK:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	case modeFail:
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	case modeHang:
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
	case modeGarbage:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"tools": [ {"name": `)
	case modeHTML:
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>login</html>")
	}
}

// toolsDoc is a manifest with one trivial tool per name.
func toolsDoc(names ...string) string {
	var entries []string
	for _, n := range names {
		entries = append(entries, fmt.Sprintf(`{"name":%q,"version":"1","inputSchema":{"type":"object"}}`, n))
	}
	return `{"tools":[` + strings.Join(entries, ",") + `]}`
}

// recorder logs the calls of a Store and a ManifestFetcher in order, so a
// test can check the start-up order and how often things happen.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// jsonStore persists snapshots in their JSON form, as the Redis store will,
// and can be switched to fail.
type jsonStore struct {
	rec  *recorder
	mu   sync.Mutex
	data map[string][]byte
	fail bool
}

func newJSONStore(rec *recorder) *jsonStore { return &jsonStore{rec: rec, data: map[string][]byte{}} }

func (s *jsonStore) Load(ctx context.Context, route string) (*Snapshot, error) {
	s.rec.add("load " + route)
	s.mu.Lock()
	data, fail := s.data[route], s.fail
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("store down")
	}
	if data == nil {
		return nil, nil
	}
	return UnmarshalSnapshot(data)
}

func (s *jsonStore) Save(ctx context.Context, snap *Snapshot) error {
	s.rec.add("save " + snap.Route)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return fmt.Errorf("store down")
	}
	data, err := snap.MarshalJSON()
	if err != nil {
		return err
	}
	s.data[snap.Route] = data
	return nil
}

func (s *jsonStore) Delete(ctx context.Context, route string) error {
	s.rec.add("delete " + route)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return fmt.Errorf("store down")
	}
	delete(s.data, route)
	return nil
}
