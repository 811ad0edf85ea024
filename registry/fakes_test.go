package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/toolmesh/toolmesh/internal/registrytest"
)

// jsonStore persists snapshots in their JSON form, as the Redis store will,
// and can be switched to fail.
type jsonStore struct {
	rec  *registrytest.Recorder
	mu   sync.Mutex
	data map[string][]byte
	fail bool
}

func newJSONStore(rec *registrytest.Recorder) *jsonStore {
	return &jsonStore{rec: rec, data: map[string][]byte{}}
}

func (s *jsonStore) Load(ctx context.Context, route string) (*Snapshot, error) {
	s.rec.Add("load " + route)
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
	s.rec.Add("save " + snap.Route)
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
	s.rec.Add("delete " + route)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return fmt.Errorf("store down")
	}
	delete(s.data, route)
	return nil
}

// getDoc GETs a FakeServer's document. The HTTP Source and ManifestFetcher
// live in registry/fetch, which imports this package, so this package's
// tests read their fake Portal and Tool Services with this minimal client.
func getDoc(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: status %d", url, resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// portalSource is a Source for a fake Portal serving /v1/routes.
type portalSource struct {
	url    string
	client *http.Client
}

func (s portalSource) List(ctx context.Context) (*Listing, error) {
	b, err := getDoc(ctx, s.client, s.url+"/v1/routes")
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return DecodeListing(b)
}

// manifestGetter is a ManifestFetcher for fake Tool Services.
type manifestGetter struct{ client *http.Client }

func (f manifestGetter) Fetch(ctx context.Context, svc ToolService) (*Manifest, error) {
	b, err := getDoc(ctx, f.client, svc.ManifestURL())
	if err != nil {
		return nil, fmt.Errorf("fetch manifest of %q: %w", svc.Name, err)
	}
	return DecodeManifest(b)
}
