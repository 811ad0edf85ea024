package fetch

import (
	"context"
	"maps"
	"strings"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// Unauthorized is told that the MCP server svc answered a listing with 401
// and challenges (its WWW-Authenticate values). It returns true when the
// listing headers have changed (a token evicted, an authorization server
// discovered from the challenge) and the listing is to be sent once more.
type Unauthorized func(ctx context.Context, service, url string, challenges []string) bool

// SetListingUnauthorized installs f; a listing answered 401 is sent again,
// once, when f says so.
func (h *HTTPLister) SetListingUnauthorized(f Unauthorized) { h.unauthorized.Store(&f) }

func (h *HTTPLister) retryUnauthorized(ctx context.Context, svc registry.ToolService, err error) bool {
	challenges, ok := upstream.Unauthorized(err)
	f := h.unauthorized.Load()
	return ok && f != nil && *f != nil && (*f)(ctx, svc.Name, svc.URL, challenges)
}

// withListingHeaders adds the listing headers of service (SetListingHeaders)
// to the Portal's headers; they win for the same name, case-insensitively.
func (h *HTTPLister) withListingHeaders(service string, headers map[string]string) (map[string]string, error) {
	f := h.listingHeaders.Load()
	if f == nil || *f == nil {
		return headers, nil
	}
	extra, err := (*f)(service)
	if err != nil || len(extra) == 0 {
		return headers, err
	}
	merged := maps.Clone(headers)
	if merged == nil {
		merged = make(map[string]string, len(extra))
	}
	for k, v := range extra {
		maps.DeleteFunc(merged, func(m string, _ string) bool { return strings.EqualFold(m, k) })
		merged[k] = v
	}
	return merged, nil
}
