// Package contract replays the public MCP contract (docs/contracts/mcp.md),
// written as example exchanges under docs/contracts/examples/mcp, against a
// running gateway: it loads the examples, builds each request and matches
// the answer (status, headers, body). The e2e contract test
// (e2e.TestPublicContract, through the local data plane) and the Compose
// smoke run (e2e/cmd/replay, through real Envoy) both use it, so the two
// cannot drift apart.
//
// It is test tooling: no package of the product imports it.
package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// Exchange is one example file.
type Exchange struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Request     struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
		RawBody *string           `json:"rawBody"`
		// RawBodySize asks for a ping padded to exactly this many bytes.
		RawBodySize int `json:"rawBodySize"`
	} `json:"request"`
	Response struct {
		Status        int               `json:"status"`
		Headers       map[string]string `json:"headers"`
		HeadersAny    bool              `json:"headersAny"`
		Body          json.RawMessage   `json:"body"`
		EmptyBody     bool              `json:"emptyBody"`
		BodyContains  []string          `json:"bodyContains"`
		AbsentHeaders []string          `json:"absentHeaders"`
	} `json:"response"`
}

// AnyValue in an example's body matches every value.
const AnyValue = "<any>"

// Example is an Exchange with where it came from.
type Example struct {
	// Name is the file's path under the mcp directory without ".json",
	// e.g. "http/01-get-405": the e2e subtest name.
	Name string
	// File is the path the example was read from.
	File     string
	Exchange Exchange
}

// Load reads every example of dir/mcp/*/*.json (dir is
// docs/contracts/examples), sorted by file name. Decoding is strict: a
// misspelt field is an error naming the file.
func Load(dir string) ([]Example, error) {
	mcpDir := filepath.Join(dir, "mcp")
	files, err := filepath.Glob(filepath.Join(mcpDir, "*", "*.json"))
	if err != nil {
		return nil, fmt.Errorf("contract examples in %s: %w", mcpDir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no contract examples found in %s/*/*.json", mcpDir)
	}
	sort.Strings(files)
	out := make([]Example, 0, len(files))
	for _, f := range files {
		ex, err := LoadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(mcpDir, f)
		ex.Name = strings.TrimSuffix(filepath.ToSlash(rel), ".json")
		out = append(out, ex)
	}
	return out, nil
}

// LoadFile reads one example file strictly; Name is left empty.
func LoadFile(file string) (Example, error) {
	ex := Example{File: file}
	raw, err := os.ReadFile(file)
	if err != nil {
		return ex, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ex.Exchange); err != nil {
		return ex, fmt.Errorf("example %s: %v", file, err)
	}
	return ex, nil
}

// body is the request body the example asks for.
func (ex *Exchange) body() []byte {
	switch {
	case ex.Request.RawBody != nil:
		return []byte(*ex.Request.RawBody)
	case ex.Request.RawBodySize > 0:
		return PaddedPing(ex.Request.RawBodySize)
	case len(ex.Request.Body) > 0:
		return ex.Request.Body
	}
	return nil
}

// PaddedPing is a JSON-RPC ping of exactly size bytes (at least 60): the
// padding is in params, so only the size can make a gateway refuse it.
func PaddedPing(size int) []byte {
	const prefix = `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`
	const suffix = `"}}`
	return []byte(prefix + strings.Repeat("x", max(0, size-len(prefix)-len(suffix))) + suffix)
}

// NewRequest builds the example's request against base (scheme and
// authority, e.g. http://127.0.0.1:10000).
func (ex *Exchange) NewRequest(base string) (*http.Request, error) {
	req, err := http.NewRequest(ex.Request.Method, base+ex.Request.Path, bytes.NewReader(ex.body()))
	if err != nil {
		return nil, err
	}
	for k, v := range ex.Request.Headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// Do sends the example's request to base and matches the answer; it
// returns every mismatch, none when the gateway kept the contract.
func Do(client *http.Client, base string, ex *Exchange) []string {
	req, err := ex.NewRequest(base)
	if err != nil {
		return []string{err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		return []string{fmt.Sprintf("%s %s: %v", ex.Request.Method, ex.Request.Path, err)}
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return ex.Match(resp.StatusCode, resp.Header, got)
}

// Match compares an answer with the example and returns every mismatch.
// A wrong status or a body that is not JSON where JSON is expected is
// reported alone: nothing after it would say more.
func (ex *Exchange) Match(status int, header http.Header, got []byte) []string {
	var errs []string
	if status != ex.Response.Status {
		return []string{fmt.Sprintf("%s: status %d, want %d; body %s", ex.Description, status, ex.Response.Status, got)}
	}
	for k, v := range ex.Response.Headers {
		have := header.Get(k)
		if k == "content-type" {
			have, _, _ = strings.Cut(have, ";")
		}
		if have != v {
			errs = append(errs, fmt.Sprintf("header %s = %q, want %q", k, header.Get(k), v))
		}
	}
	for _, k := range ex.Response.AbsentHeaders {
		if v := header.Get(k); v != "" {
			errs = append(errs, fmt.Sprintf("header %s = %q, want it absent", k, v))
		}
	}
	if ex.Response.EmptyBody && len(got) != 0 {
		errs = append(errs, fmt.Sprintf("body = %q, want empty", got))
	}
	for _, s := range ex.Response.BodyContains {
		if !strings.Contains(strings.ToLower(string(got)), strings.ToLower(s)) {
			errs = append(errs, fmt.Sprintf("body %s does not contain %q", got, s))
		}
	}
	if len(ex.Response.Body) > 0 {
		var want, have any
		if err := json.Unmarshal(ex.Response.Body, &want); err != nil {
			return append(errs, fmt.Sprintf("example body: %v", err))
		}
		if err := json.Unmarshal(got, &have); err != nil {
			return append(errs, fmt.Sprintf("%s: body is not JSON: %v: %s", ex.Description, err, got))
		}
		if path, ok := MatchJSON(want, have, "$"); !ok {
			errs = append(errs, fmt.Sprintf("%s: body differs at %s\n got: %s\nwant: %s", ex.Description, path, got, ex.Response.Body))
		}
	}
	return errs
}

// MatchJSON reports whether have matches want, where "<any>" in want
// matches any value and objects must have exactly the same keys; when not,
// it returns the JSON path of the first difference.
func MatchJSON(want, have any, path string) (string, bool) {
	if s, ok := want.(string); ok && s == AnyValue {
		return "", true
	}
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok || len(h) != len(w) {
			return path, false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				return path + "." + k, false
			}
			if p, ok := MatchJSON(wv, hv, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := MatchJSON(w[i], h[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	default:
		if !reflect.DeepEqual(want, have) {
			return path, false
		}
		return "", true
	}
}
