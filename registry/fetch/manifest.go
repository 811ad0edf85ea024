package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

// DefaultMaxManifestBytes bounds a manifest read when the fetcher is given no
// limit. A larger manifest is an error, not a truncation.
const DefaultMaxManifestBytes = 4 << 20

// HTTPFetcher fetches manifests over HTTP: GET {url}{manifestPath}.
type HTTPFetcher struct {
	client   *http.Client
	maxBytes int64
}

// NewHTTPFetcher returns a [registry.ManifestFetcher] that uses client (a client with a
// 30 s timeout when nil) and refuses manifests over maxBytes
// ([DefaultMaxManifestBytes] when maxBytes <= 0). Callers bound each fetch
// with the context they pass to Fetch.
func NewHTTPFetcher(client *http.Client, maxBytes int64) registry.ManifestFetcher {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxManifestBytes
	}
	return &HTTPFetcher{client: client, maxBytes: maxBytes}
}

// Fetch implements [registry.ManifestFetcher]: a 2xx application/json answer within the
// size limit, decoded with [registry.DecodeManifest].
func (f *HTTPFetcher) Fetch(ctx context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	u := svc.ManifestURL()
	body, err := getJSON(ctx, f.client, u, f.maxBytes, false)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest of %q: %w", svc.Name, err)
	}
	m, err := registry.DecodeManifest(body)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest of %q from %s: %w", svc.Name, u, err)
	}
	return m, nil
}

// getJSON GETs u and returns its body: the status must be 200 (exactly, when
// exact200) or any 2xx, the media type application/json, and the body at
// most max bytes.
func getJSON(ctx context.Context, client *http.Client, u string, max int64, exact200 bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// client.Do's *url.Error repeats the method and URL; the wrapper
		// here names the URL once.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	ok := resp.StatusCode/100 == 2
	if exact200 {
		ok = resp.StatusCode == http.StatusOK
	}
	if !ok {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, fmt.Errorf("get %s: status %d%s", u, resp.StatusCode, bodyHint(snippet))
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, fmt.Errorf("get %s: content type %q, want application/json", u, ct)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", u, err)
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("get %s: body larger than %d bytes", u, max)
	}
	return body, nil
}

// bodyHint quotes the start of an error body so an operator sees what the
// other side said.
func bodyHint(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	return fmt.Sprintf(": %q", s)
}
