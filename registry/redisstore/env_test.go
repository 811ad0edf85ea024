package redisstore

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// The registry's refresher on a real Redis: a fake Portal and three fake
// Tool Services on 127.0.0.1 (route alpha uses services a and shared; route
// beta uses b and shared), driven only through the registry's public API.

// Modes of a fakeServer.
const (
	modeOK   = "ok"   // 200 application/json with the body
	modeFail = "fail" // 500 with a short text body
)

// fakeServer is a real HTTP server on 127.0.0.1 serving one JSON document at
// one path, which a test can switch to fail.
type fakeServer struct {
	*httptest.Server
	path string

	mu   sync.Mutex
	mode string
	body string
}

func newFakeServer(t *testing.T, path, body string) *fakeServer {
	t.Helper()
	f := &fakeServer{path: path, mode: modeOK, body: body}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
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
	f.mu.Lock()
	mode, body := f.mode, f.body
	f.mu.Unlock()
	if mode == modeFail {
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, body)
}

// recorder logs the calls of a Store, a Source and a ManifestFetcher in
// order, so a test can check the start-up order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

type recordingSource struct {
	registry.Source
	rec *recorder
}

func (s recordingSource) List(ctx context.Context) (*registry.Listing, error) {
	s.rec.add("list")
	return s.Source.List(ctx)
}

type recordingFetcher struct {
	registry.ManifestFetcher
	rec *recorder
}

func (f recordingFetcher) Fetch(ctx context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	f.rec.add("fetch " + svc.Name)
	return f.ManifestFetcher.Fetch(ctx, svc)
}

// env is a registry on the fake Portal and Tool Services.
type env struct {
	portal            *fakeServer
	a, b, shared      *fakeServer
	reg               *refresher.Registry
	alphaDef, betaDef string
}

func newEnv(t *testing.T, options ...func(*refresher.Options)) *env {
	t.Helper()
	e := &env{}
	e.a = newFakeServer(t, "/manifest", toolsDoc("a_one", "a_two"))
	e.b = newFakeServer(t, "/manifest", toolsDoc("b_one"))
	e.shared = newFakeServer(t, "/manifest", toolsDoc("s_one"))
	e.alphaDef = fmt.Sprintf(`{"key":"alpha","toolServices":[{"name":"a","url":%q},{"name":"shared","url":%q}]}`, e.a.URL, e.shared.URL)
	e.betaDef = fmt.Sprintf(`{"key":"beta","publicPath":"/tools/beta","toolServices":[{"name":"b","url":%q},{"name":"shared","url":%q}]}`, e.b.URL, e.shared.URL)
	e.portal = newFakeServer(t, "/v1/routes", e.listing(e.alphaDef, e.betaDef))
	opts := refresher.Options{
		Source:       registry.NewHTTPSource(e.portal.URL, e.portal.Client()),
		Fetcher:      registry.NewHTTPFetcher(e.a.Client(), 0),
		FetchTimeout: 300 * time.Millisecond,
		Workers:      2,
	}
	for _, o := range options {
		o(&opts)
	}
	e.reg = refresher.New(opts)
	return e
}

func (e *env) listing(routes ...string) string {
	return `{"routes":[` + strings.Join(routes, ",") + `]}`
}

func (e *env) start(t *testing.T) {
	t.Helper()
	if err := e.reg.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
}

func (e *env) route(t *testing.T, key string) registry.RouteStatus {
	t.Helper()
	return routeStatus(t, e.reg, key)
}

func routeStatus(t testing.TB, reg *refresher.Registry, key string) registry.RouteStatus {
	t.Helper()
	for _, rs := range reg.Health().Routes {
		if rs.Key == key {
			return rs
		}
	}
	t.Fatalf("route %q not in health %+v", key, reg.Health())
	return registry.RouteStatus{}
}
