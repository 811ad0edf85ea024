package app

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry/search/embed/embedtest"
)

// TestEmbeddingCredentialReachesTheService runs the embedding example of
// docs/config.md: every command that ranks search-mode routes (`run` and
// `extproc` serving them, `eval-search --config` measuring them) requests
// the tool embeddings with the credential's value as the bearer token, the
// model and the documentPrefix the example sets; eval-search, which ranks
// through the server's registry options (wiring.go), sends the same
// request for the same tools as the server does.
func TestEmbeddingCredentialReachesTheService(t *testing.T) {
	sent := map[string]embedtest.Request{} // by command: its request of tool embeddings
	for _, cmd := range []string{"run", "extproc", "eval-search"} {
		t.Run(cmd, func(t *testing.T) {
			emb, err := embedtest.Start(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer emb.Close()
			dir := t.TempDir()
			// The example of docs/config.md as written, with the stub's URL
			// and a token file of this test.
			token := writeFile(t, dir, "tei-token", "tok\n")
			cfg := writeFile(t, dir, "toolmesh.yaml", docExample(t, "config.md", "embeddings:", strings.NewReplacer(
				"http://tei.models.svc:8080/v1/embeddings", emb.URL, "/run/secrets/tei-token", token)))
			if cmd == "eval-search" {
				tools := writeFile(t, dir, "tools.json", `{"tools":[`+searchTools+`]}`)
				queries := writeFile(t, dir, "queries.json", `[{"id":"q","query":"send the invoice","want":["invoice_send"]}]`)
				var out, errb bytes.Buffer
				if code := run(t.Context(), []string{"eval-search", "--config", cfg, "--tools", tools, "--queries", queries,
					"--latency-rounds", "0"}, &out, &errb); code != exitOK {
					t.Fatalf("eval-search exit %d\n%s%s", code, out.String(), errb.String())
				}
			} else {
				portal := writeFile(t, dir, "portal.json", `{"routes":[{"key":"find","catalog":{"mode":"search"},
					"toolServices":[{"name":"svc","url":"`+searchToolService(t)+`"}]}]}`)
				waitEmbeddingAuth(t, startProcess(t, cmd, "--config", cfg, "--portal", portal), emb, "Bearer tok")
			}
			r, ok := toolEmbeddings(emb)
			if !ok || r.Auth != "Bearer tok" || r.Model != "intfloat/e5-small-v2" {
				t.Fatalf("tool embeddings requested as %+v (found %v), want model intfloat/e5-small-v2 with Bearer tok", r, ok)
			}
			slices.Sort(r.Inputs)
			sent[cmd] = r
		})
	}
	for _, cmd := range []string{"extproc", "eval-search"} {
		if got, want := sent[cmd], sent["run"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s requested tool embeddings as\n%+v\n`run` as\n%+v", cmd, got, want)
		}
	}
}

// toolEmbeddings is the first request of emb that embedded tool texts (with
// the example's documentPrefix).
func toolEmbeddings(emb *embedtest.Server) (embedtest.Request, bool) {
	for _, r := range emb.Requests() {
		if len(r.Inputs) > 0 && strings.HasPrefix(r.Inputs[0], "passage: ") {
			return r, true
		}
	}
	return embedtest.Request{}, false
}

// waitEmbeddingAuth waits until emb has seen a request with the
// Authorization value want, failing at once if toolmesh left the service out.
func waitEmbeddingAuth(t *testing.T, p *process, emb *embedtest.Server, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, r := range emb.Requests() {
			if r.Auth == want && len(r.Inputs) > 0 && strings.HasPrefix(r.Inputs[0], "passage: ") {
				return
			}
		}
		if logs := p.logs.String(); strings.Contains(logs, "embedding service left out") {
			t.Fatalf("toolmesh left the embedding service out:\n%s", grepLines(logs, "embedding"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no embedding request with Authorization %q within 30s; requests: %+v", want, emb.Requests())
		}
		select {
		case <-p.done:
			t.Fatal("toolmesh exited")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// searchTools are the tools of searchToolService, in a manifest's shape,
// which eval-search reads too.
const searchTools = `
	{"name":"invoice_send","version":"1","description":"Send an invoice.","inputSchema":{"type":"object"},"path":"/tools/send"},
	{"name":"contact_get","version":"1","description":"Get a contact.","inputSchema":{"type":"object"},"path":"/tools/get"}`

// searchToolService is a Tool Service with two tools, for a search-mode route.
func searchToolService(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[`+searchTools+`]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}
