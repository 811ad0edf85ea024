package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultMaxManifestBytes bounds a manifest read when the fetcher is given no
// limit. A larger manifest is an error, not a truncation.
const DefaultMaxManifestBytes = 4 << 20

// InvalidEntry is a manifest entry that could not even be decoded as a tool
// (not an object, or a field of the wrong type). It is kept so the snapshot
// can report it instead of failing the whole manifest (docs/contracts/toolservice.md).
type InvalidEntry struct {
	Index  int    `json:"index"`
	Name   string `json:"name,omitempty"` // best effort
	Reason string `json:"reason"`
}

// DecodeManifest decodes a Tool Service manifest: a JSON object whose "tools"
// member is an array. Fields it does not know are ignored, so Tool Services
// can add their own. An entry that cannot be decoded as a tool is recorded in
// Manifest.Invalid (and later reported as rejected) rather than failing the
// manifest; a manifest that is not such an object is an error.
func DecodeManifest(data []byte) (*Manifest, error) {
	var top struct {
		Tools *[]json.RawMessage `json:"tools"`
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("decode manifest: not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode manifest: trailing data after the manifest")
	}
	if top.Tools == nil {
		return nil, errors.New(`decode manifest: missing "tools" array`)
	}
	m := &Manifest{Tools: make([]ManifestTool, 0, len(*top.Tools))}
	for i, raw := range *top.Tools {
		var t ManifestTool
		if err := json.Unmarshal(raw, &t); err != nil {
			m.Invalid = append(m.Invalid, InvalidEntry{Index: i, Name: entryName(raw), Reason: "not a valid tool entry: " + decodeReason(err)})
			continue
		}
		m.Tools = append(m.Tools, t)
	}
	return m, nil
}

// entryName digs the name out of an entry that failed to decode, for the report.
func entryName(raw json.RawMessage) string {
	var probe struct {
		Name any `json:"name"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return ""
	}
	if s, ok := probe.Name.(string); ok {
		return s
	}
	return ""
}

// decodeReason phrases a json decoding error without Go type names.
func decodeReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "must be an object, got " + te.Value
		}
		return fmt.Sprintf("field %q: unexpected %s", te.Field, te.Value)
	}
	return err.Error()
}

// HTTPFetcher fetches manifests over HTTP: GET {url}{manifestPath}.
type HTTPFetcher struct {
	client   *http.Client
	maxBytes int64
}

// NewHTTPFetcher returns a [ManifestFetcher] that uses client (a client with a
// 30 s timeout when nil) and refuses manifests over maxBytes
// ([DefaultMaxManifestBytes] when maxBytes <= 0). Callers bound each fetch
// with the context they pass to Fetch.
func NewHTTPFetcher(client *http.Client, maxBytes int64) ManifestFetcher {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxManifestBytes
	}
	return &HTTPFetcher{client: client, maxBytes: maxBytes}
}

// Fetch implements [ManifestFetcher]: a 2xx application/json answer within the
// size limit, decoded with [DecodeManifest].
func (f *HTTPFetcher) Fetch(ctx context.Context, svc ToolService) (*Manifest, error) {
	u := svc.ManifestURL()
	body, err := getJSON(ctx, f.client, u, f.maxBytes, false)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest of %q: %w", svc.Name, err)
	}
	m, err := DecodeManifest(body)
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
