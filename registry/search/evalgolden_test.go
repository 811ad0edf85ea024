package search

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/search/catalog.json from the generator")

// evalDir holds the evaluation catalog and the labelled queries.
var evalDir = filepath.Join("..", "..", "testdata", "search")

// TestEvalCatalogUpToDate keeps the committed catalog equal to the
// generator's output, so the two cannot drift apart. Regenerate with
// `go test -run TestEvalCatalogUpToDate -update ./registry/search/`.
func TestEvalCatalogUpToDate(t *testing.T) {
	want := marshalCatalog(generateCatalog(1))
	path := filepath.Join(evalDir, "catalog.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the committed catalog (regenerate with -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output; regenerate with -update", path)
	}
}

// loadEvalCatalog reads the committed catalog.
func loadEvalCatalog(t testing.TB) []Doc {
	t.Helper()
	docs, err := readEvalCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func readEvalCatalog() ([]Doc, error) {
	raw, err := os.ReadFile(filepath.Join(evalDir, "catalog.json"))
	if err != nil {
		return nil, err
	}
	var m struct {
		Tools []Doc `json:"tools"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode catalog: %w", err)
	}
	return m.Tools, nil
}
