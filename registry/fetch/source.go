package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

// MaxListingBytes bounds a Portal listing read (HTTP or file).
const MaxListingBytes = 8 << 20

// FileSource reads the Portal listing from a local JSON or YAML file on every
// List, so edits are picked up by the next refresh.
type FileSource struct {
	path string
	// Decoder decodes the file; the zero value ignores unknown fields.
	Decoder registry.ListingDecoder
}

// NewFileSource returns a [registry.Source] that reads the listing at path (JSON or
// YAML, told apart by content).
func NewFileSource(path string) *FileSource { return &FileSource{path: path} }

// List implements [registry.Source].
func (s *FileSource) List(ctx context.Context) (*registry.Listing, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list routes from %s: %w", s.path, err)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxListingBytes+1))
	if err != nil {
		return nil, fmt.Errorf("list routes: read %s: %w", s.path, err)
	}
	if len(data) > MaxListingBytes {
		return nil, fmt.Errorf("list routes: %s is larger than %d bytes", s.path, MaxListingBytes)
	}
	l, err := s.Decoder.Decode(data)
	if err != nil {
		// Each problem reads path:line:column: ..., so the path is not repeated.
		return nil, fmt.Errorf("list routes: %w", registry.WithSource(err, s.path))
	}
	return l, nil
}

// HTTPSource asks an HTTP Portal for its listing: GET {base}/v1/routes.
type HTTPSource struct {
	url    string
	client *http.Client
	// Decoder decodes the answer; the zero value ignores unknown fields.
	Decoder registry.ListingDecoder
}

// NewHTTPSource returns a [registry.Source] for the Portal at baseURL, using client (a
// client with a 30 s timeout when nil). The answer must be 200 with an
// application/json object of at most [MaxListingBytes].
func NewHTTPSource(baseURL string, client *http.Client) *HTTPSource {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &HTTPSource{url: strings.TrimRight(baseURL, "/") + "/v1/routes", client: client}
}

// List implements [registry.Source].
func (s *HTTPSource) List(ctx context.Context) (*registry.Listing, error) {
	body, err := getJSON(ctx, s.client, s.url, MaxListingBytes, true)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	// The HTTP contract is JSON; only local files may be YAML.
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("list routes from %s: body is not a JSON object", s.url)
	}
	l, err := s.Decoder.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", registry.WithSource(err, s.url))
	}
	return l, nil
}
