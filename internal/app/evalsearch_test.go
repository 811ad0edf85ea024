package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/registry/search/embed/embedtest"
)

func TestEvalSearch(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tools := write("tools.json", `{"tools": [
		{"name": "crm_contact_create", "description": "Create a contact."},
		{"name": "crm_contact_get", "description": "Get a contact by ID."},
		{"name": "billing_invoice_void", "description": "Void an invoice."},
		{"name": "billing_invoice_send", "description": "Send an invoice to the customer."}
	]}`)
	rpc := write("rpc.json", `{"jsonrpc": "2.0", "id": 1, "result": {"tools": [
		{"name": "crm_contact_create", "description": "Create a contact."}
	]}}`)
	queries := write("queries.json", `{"queries": [
		{"id": "a", "kind": "single", "query": "create a contact", "want": ["crm_contact_create"]},
		{"id": "b", "kind": "single", "query": "void invoice 42", "want": ["billing_invoice_void"]},
		{"id": "c", "kind": "unsupported", "query": "order a pizza with olives", "want": []},
		{"id": "d", "kind": "paraphrase", "query": "mail the customer what they owe", "want": ["billing_invoice_send"]}
	]}`)
	syn := write("synonyms.txt", "# ours\n\nowe invoice\nmail send\n")
	badSyn := write("bad.txt", "e-mail mail\n")
	bare := write("bare.json", `[{"id": "a", "query": "create a contact", "want": ["crm_contact_create"]}]`)

	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"report", []string{"--tools", tools, "--queries", queries, "--latency-rounds", "2"}, exitOK, []string{
			"catalog: 4 tools", "shortlist: at most 5",
			"all queries   4 | required-tool recall 0.667 (2/3)", "rejection 1.000 (1/1)",
			"kind single", "kind unsupported", "latency, search only, 4 requests x 2",
		}},
		{"misses", []string{"--tools", tools, "--queries", queries, "--latency-rounds", "0", "--misses"}, exitOK, []string{
			`miss d "mail the customer what they owe" want [billing_invoice_send]`,
		}},
		{"synonyms", []string{"--tools", tools, "--queries", queries, "--latency-rounds", "0", "--synonyms", syn, "--misses"}, exitOK, []string{
			"synonyms: 2 groups", "recall 1.000 (3/3)",
		}},
		{"bad synonyms", []string{"--tools", tools, "--queries", queries, "--synonyms", badSyn}, exitUsage, nil},
		{"shortlist", []string{"--tools", tools, "--queries", queries, "--latency-rounds", "0", "--shortlist", "1"}, exitOK, []string{"shortlist: at most 1"}},
		{"recall below", []string{"--tools", tools, "--queries", queries, "--latency-rounds", "0", "--min-recall", "0.9"}, exitError, nil},
		{"thresholds met", []string{"--tools", tools, "--queries", queries, "--latency-rounds", "0", "--min-recall", "0.6", "--min-rejection", "1"}, exitOK, nil},
		{"json-rpc tools, bare queries", []string{"--tools", rpc, "--queries", bare, "--latency-rounds", "0"}, exitOK, []string{"catalog: 1 tools", "recall 1.000 (1/1)"}},
		{"flags missing", []string{"--tools", tools}, exitUsage, nil},
		{"no such file", []string{"--tools", filepath.Join(dir, "nope.json"), "--queries", queries}, exitUsage, nil},
		{"no tools", []string{"--tools", write("empty.json", `{"tools": []}`), "--queries", queries}, exitUsage, nil},
		{"empty query", []string{"--tools", tools, "--queries", write("blank.json", `[{"id": "x", "query": " ", "want": []}]`)}, exitUsage, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"eval-search"}, tt.args...), &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
			for _, s := range tt.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

// TestEvalSearchSemantic: with an embedding service (the deterministic
// test model of embedtest on 127.0.0.1), eval-search prints the lexical and
// the semantic figures of the same requests in one run, and counts
// embedding calls that fail.
func TestEvalSearchSemantic(t *testing.T) {
	emb, err := embedtest.Start(map[string]string{"mail": "send", "owe": "invoice", "bill": "invoice"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tools := write("tools.json", `{"tools": [
		{"name": "crm_contact_create", "description": "Create a contact."},
		{"name": "crm_contact_get", "description": "Get a contact by ID."},
		{"name": "billing_invoice_void", "description": "Void an invoice."},
		{"name": "billing_invoice_send", "description": "Send an invoice to the customer."}
	]}`)
	queries := write("queries.json", `{"queries": [
		{"id": "a", "kind": "single", "query": "create a contact", "want": ["crm_contact_create"]},
		{"id": "b", "kind": "single", "query": "mail the invoice", "want": ["billing_invoice_send"]},
		{"id": "c", "kind": "unsupported", "query": "order a pizza with olives", "want": []}
	]}`)
	t.Setenv("EVAL_EMB_TOKEN", "tok")
	cfg := write("toolmesh.yaml", "credentials:\n  t: {env: EVAL_EMB_TOKEN}\nembeddings:\n  test: {url: \""+emb.URL+"\", model: cfg-model, credential: t, queryPrefix: \"query: \"}\ndefaultEmbedding: test\n")
	base := []string{"--tools", tools, "--queries", queries, "--latency-rounds", "0"}
	for _, tt := range []struct {
		name     string
		args     []string
		fail     int
		code     int
		contains []string
	}{
		{"flags", []string{"--embedding-url", emb.URL, "--embedding-model", "flag-model"}, 0, exitOK, []string{
			"all queries   3", "semantic re-ranking: model flag-model at " + emb.URL + ", 4 tools embedded",
			"semantic all queries   3", "semantic kind single", "semantic latency, ranking with the request embedding, 3 requests x 1",
			"failed or timed out 0",
		}},
		{"config", []string{"--config", cfg}, 0, exitOK, []string{"model cfg-model at", "semantic all queries   3"}},
		{"config, named", []string{"--config", cfg, "--embedding", "test", "--min-similarity", "0.5"}, 0, exitOK, []string{"min similarity 0.5"}},
		{"unknown entry", []string{"--config", cfg, "--embedding", "nope"}, 0, exitUsage, nil},
		{"model without url", []string{"--embedding-model", "m"}, 0, exitUsage, nil},
		{"tools cannot be embedded", []string{"--embedding-url", emb.URL, "--embedding-model", "m"}, 500, exitError, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			emb.Fail(tt.fail)
			var out, errb bytes.Buffer
			code := run(context.Background(), append(append([]string{"eval-search"}, base...), tt.args...), &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
			for _, s := range tt.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
	// The config's credential and prefix reached the service.
	var sawToken, sawPrefix bool
	for _, r := range emb.Requests() {
		if r.Model == "cfg-model" {
			sawToken = sawToken || r.Auth == "Bearer tok"
			sawPrefix = sawPrefix || strings.HasPrefix(r.Inputs[0], "query: ")
		}
	}
	if !sawToken || !sawPrefix {
		t.Errorf("config entry: token sent %v, query prefix sent %v", sawToken, sawPrefix)
	}
}
