package redisstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// The registry's refresher on a real Redis: a fake Portal and three fake
// Tool Services on 127.0.0.1 (route alpha uses services a and shared; route
// beta uses b and shared), driven only through the registry's public API.

// env is a registry on the fake Portal and Tool Services.
type env struct {
	portal            *registrytest.FakeServer
	a, b, shared      *registrytest.FakeServer
	reg               *refresher.Registry
	alphaDef, betaDef string
}

func newEnv(t *testing.T, options ...func(*refresher.Options)) *env {
	t.Helper()
	e := &env{}
	e.a = registrytest.NewFakeServer(t, "/manifest", registrytest.ToolsDoc("a_one", "a_two"))
	e.b = registrytest.NewFakeServer(t, "/manifest", registrytest.ToolsDoc("b_one"))
	e.shared = registrytest.NewFakeServer(t, "/manifest", registrytest.ToolsDoc("s_one"))
	e.alphaDef = fmt.Sprintf(`{"key":"alpha","toolServices":[{"name":"a","url":%q},{"name":"shared","url":%q}]}`, e.a.URL, e.shared.URL)
	e.betaDef = fmt.Sprintf(`{"key":"beta","publicPath":"/tools/beta","toolServices":[{"name":"b","url":%q},{"name":"shared","url":%q}]}`, e.b.URL, e.shared.URL)
	e.portal = registrytest.NewFakeServer(t, "/v1/routes", e.listing(e.alphaDef, e.betaDef))
	opts := refresher.Options{
		Source:       fetch.NewHTTPSource(e.portal.URL, e.portal.Client()),
		Fetcher:      fetch.NewHTTPFetcher(e.a.Client(), 0),
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
	return refreshtest.RouteStatus(t, e.reg, key)
}
