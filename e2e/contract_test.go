package e2e

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
	"testing"
	"time"
)

// The public MCP contract (docs/contracts/mcp.md) is written as example
// exchanges under docs/contracts/examples/mcp/{http,legacy,stateless}. This
// test sends every example request through the real path (local data plane →
// extproc → Tool Service) and checks the answer, so the documents and the code
// cannot drift apart. Together the examples cover every row of the SPEC §2
// tables and HTTP rules in both eras.

const contractDir = "../docs/contracts/examples"

// exchange is one example file.
type exchange struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Request     struct {
		Method      string            `json:"method"`
		Path        string            `json:"path"`
		Headers     map[string]string `json:"headers"`
		Body        json.RawMessage   `json:"body"`
		RawBody     *string           `json:"rawBody"`
		RawBodySize int               `json:"rawBodySize"`
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

// anyValue in an example matches every value.
const anyValue = "<any>"

// contractToolService serves the example manifests of
// docs/contracts/examples/toolservice and answers their tools.
func contractToolService(t *testing.T, name, manifestFile string) *toolService {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(contractDir, "toolservice", manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	s := &toolService{name: name}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		w.Write(manifest)
	})
	mux.HandleFunc("POST /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		var args map[string]any
		_ = json.NewDecoder(r.Body).Decode(&args)
		w.Header().Set("content-type", "application/json")
		switch r.PathValue("tool") {
		case "add":
			a, _ := args["a"].(float64)
			b, _ := args["b"].(float64)
			fmt.Fprintf(w, `{"content":[{"type":"text","text":"%g"}],"structuredContent":{"sum":%g}}`, a+b, a+b)
		case "echo":
			w.Header().Set("content-type", "text/plain; charset=utf-8")
			msg, _ := args["message"].(string)
			io.WriteString(w, msg)
		case "weather":
			city, _ := args["city"].(string)
			fmt.Fprintf(w, `{"city":%q,"tempC":21}`, city)
		case "series":
			io.WriteString(w, `[1,2,3]`)
		case "fail":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":"boom"}`)
		case "secret":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	s.srv = newLoopbackServer(t, mux)
	return s
}

func TestPublicContract(t *testing.T) {
	contract := contractToolService(t, "contract", "manifest.json")
	other := contractToolService(t, "other", "manifest-other.json")
	gw := startGateway(t, writePortal(t, portalRoute{Key: "core", Services: []*toolService{contract, other}}))

	files, err := filepath.Glob(filepath.Join(contractDir, "mcp", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no contract examples found: %v", err)
	}
	sort.Strings(files)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, f := range files {
		rel, _ := filepath.Rel(filepath.Join(contractDir, "mcp"), f)
		t.Run(strings.TrimSuffix(rel, ".json"), func(t *testing.T) {
			var ex exchange
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ex); err != nil {
				t.Fatalf("example %s: %v", f, err)
			}
			runExchange(t, client, gw.URL, &ex)
		})
	}
}

func runExchange(t *testing.T, client *http.Client, base string, ex *exchange) {
	t.Helper()
	var body []byte
	switch {
	case ex.Request.RawBody != nil:
		body = []byte(*ex.Request.RawBody)
	case ex.Request.RawBodySize > 0:
		prefix := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`
		suffix := `"}}`
		body = []byte(prefix + strings.Repeat("x", ex.Request.RawBodySize-len(prefix)-len(suffix)) + suffix)
	case len(ex.Request.Body) > 0:
		body = ex.Request.Body
	}
	req, err := http.NewRequest(ex.Request.Method, base+ex.Request.Path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ex.Request.Headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", ex.Request.Method, ex.Request.Path, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != ex.Response.Status {
		t.Fatalf("%s: status %d, want %d; body %s", ex.Description, resp.StatusCode, ex.Response.Status, got)
	}
	for k, v := range ex.Response.Headers {
		have := resp.Header.Get(k)
		if k == "content-type" {
			have, _, _ = strings.Cut(have, ";")
		}
		if have != v {
			t.Errorf("header %s = %q, want %q", k, resp.Header.Get(k), v)
		}
	}
	for _, k := range ex.Response.AbsentHeaders {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("header %s = %q, want it absent", k, v)
		}
	}
	if ex.Response.EmptyBody && len(got) != 0 {
		t.Errorf("body = %q, want empty", got)
	}
	for _, s := range ex.Response.BodyContains {
		if !strings.Contains(strings.ToLower(string(got)), strings.ToLower(s)) {
			t.Errorf("body %s does not contain %q", got, s)
		}
	}
	if len(ex.Response.Body) > 0 {
		var want, have any
		if err := json.Unmarshal(ex.Response.Body, &want); err != nil {
			t.Fatalf("example body: %v", err)
		}
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatalf("%s: body is not JSON: %v: %s", ex.Description, err, got)
		}
		if path, ok := matchJSON(want, have, "$"); !ok {
			t.Errorf("%s: body differs at %s\n got: %s\nwant: %s", ex.Description, path, got, ex.Response.Body)
		}
	}
}

// matchJSON reports whether have matches want, where "<any>" in want matches
// any value and objects must have exactly the same keys.
func matchJSON(want, have any, path string) (string, bool) {
	if s, ok := want.(string); ok && s == anyValue {
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
			if p, ok := matchJSON(wv, hv, path+"."+k); !ok {
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
			if p, ok := matchJSON(w[i], h[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
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
