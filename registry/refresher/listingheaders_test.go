package refresher

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
)

// TestListingHeaders: a listing sends the extra headers SetListingHeaders
// gives (the config file's upstreamAuth credential), replacing a Portal
// header of the same name in any case; the call path's UpstreamHeaders
// stays the Portal's; an error fails the listing.
func TestListingHeaders(t *testing.T) {
	up := newMCPServer(t, false, "Bearer config-secret", "search")
	t.Setenv("TOOLMESH_TEST_PORTAL_TOKEN", "portal-secret")
	l := fetch.NewMCPLister(nil, 0, map[string]config.CredentialSource{"tok": {Env: "TOOLMESH_TEST_PORTAL_TOKEN"}}).(*fetch.HTTPLister)
	svc := registry.ToolService{Name: "up", URL: up.URL, Protocol: registry.ProtocolMCP,
		Headers: map[string]registry.HeaderValue{"Authorization": {Credential: "tok", Prefix: "Bearer "}}}

	if _, _, err := l.List(t.Context(), svc); err == nil {
		t.Fatal("listed with the Portal's credential; the test server wants the config file's")
	}
	l.SetListingHeaders(func(service string) (map[string]string, error) {
		if service != "up" {
			return nil, nil
		}
		return map[string]string{"authorization": "Bearer config-secret"}, nil
	})
	m, _, err := l.List(t.Context(), svc)
	if err != nil || len(m.Tools) != 1 {
		t.Fatalf("List = %v, %v; want the listing with the config file's credential", m, err)
	}
	if h, err := l.UpstreamHeaders(svc); err != nil || h["Authorization"] != "Bearer portal-secret" {
		t.Errorf("UpstreamHeaders = %v, %v; want the Portal's values", h, err)
	}
	l.SetListingHeaders(func(string) (map[string]string, error) { return nil, errors.New("credential gone") })
	if _, _, err := l.List(t.Context(), svc); err == nil || !strings.Contains(err.Error(), "credential gone") {
		t.Errorf("List = %v, want the credential error", err)
	}
}
