package fetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/toolmesh/toolmesh/registry"
)

// TestListingUnauthorizedRetriesOnce: a listing answered 401 tells the
// hook the service, URL and challenges; when the hook says so, the
// listing is sent once more with the headers as they are now, and never a
// third time.
func TestListingUnauthorizedRetriesOnce(t *testing.T) {
	const challenge = `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource"`
	for _, retry := range []bool{true, false} {
		var mu sync.Mutex
		var seen []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Authorization"))
			mu.Unlock()
			w.Header().Set("WWW-Authenticate", challenge)
			w.WriteHeader(http.StatusUnauthorized)
		}))
		l := NewMCPLister(nil, 0, nil).(*HTTPLister)
		token := "Bearer old"
		l.SetListingHeaders(func(string) (map[string]string, error) { return map[string]string{"Authorization": token}, nil })
		var told []string
		l.SetListingUnauthorized(func(_ context.Context, service, url string, challenges []string) bool {
			told = append(append(told, service, url), challenges...)
			token = "Bearer new"
			return retry
		})
		_, _, err := l.List(t.Context(), registry.ToolService{Name: "prot", URL: srv.URL + "/mcp"})
		srv.Close()
		if err == nil {
			t.Fatal("a 401 listing succeeded")
		}
		want := []string{"Bearer old"}
		if retry {
			want = append(want, "Bearer new")
		}
		if !slices.Equal(seen, want) {
			t.Errorf("retry %v: requests with %q, want %q", retry, seen, want)
		}
		if wantTold := []string{"prot", srv.URL + "/mcp", challenge}; !slices.Equal(told, wantTold) {
			t.Errorf("the hook was told %q, want %q", told, wantTold)
		}
	}
}
