package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry/search/embed/embedtest"
)

// TestEmbeddingCredentialReachesTheService runs the embedding example of
// docs/config.md: every serving command that ranks search-mode routes
// requests the tool embeddings with the credential's value as the bearer
// token and the documentPrefix the example sets.
func TestEmbeddingCredentialReachesTheService(t *testing.T) {
	for _, cmd := range []string{"run", "extproc"} {
		t.Run(cmd, func(t *testing.T) {
			emb, err := embedtest.Start(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer emb.Close()
			svc := searchToolService(t)
			dir := t.TempDir()
			portal := writeFile(t, dir, "portal.json", `{"routes":[{"key":"find","catalog":{"mode":"search"},
				"toolServices":[{"name":"svc","url":"`+svc+`"}]}]}`)
			// The example of docs/config.md as written, with the stub's URL
			// and a token file of this test.
			token := writeFile(t, dir, "tei-token", "tok-"+cmd+"\n")
			cfg := writeFile(t, dir, "toolmesh.yaml", docExample(t, "config.md", "embeddings:", strings.NewReplacer(
				"http://tei.models.svc:8080/v1/embeddings", emb.URL, "/run/secrets/tei-token", token)))
			p := startProcess(t, cmd, "--config", cfg, "--portal", portal)
			waitEmbeddingAuth(t, p, emb, "Bearer tok-"+cmd)
		})
	}
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

// searchToolService is a Tool Service with two tools, for a search-mode route.
func searchToolService(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[
			{"name":"invoice_send","version":"1","description":"Send an invoice.","inputSchema":{"type":"object"},"path":"/tools/send"},
			{"name":"contact_get","version":"1","description":"Get a contact.","inputSchema":{"type":"object"},"path":"/tools/get"}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}
