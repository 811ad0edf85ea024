package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// docExampleBlock is a YAML example of a page of docs/.
type docExampleBlock struct {
	where string // file:line of its first line
	body  string
}

// configExamples are the YAML examples in docs/*.md whose top-level keys
// are all keys of the config file: the ones that configure the server.
func configExamples(t *testing.T) []docExampleBlock {
	t.Helper()
	keys := map[string]bool{}
	for _, f := range configKeys() {
		keys[strings.Split(f.Tag.Get("json"), ",")[0]] = true
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	fence := regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")
	placeholder := regexp.MustCompile(`<[a-z][a-z ]*>`)
	var out []docExampleBlock
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatchIndex(data, -1) {
			body := string(data[m[2]:m[3]])
			if placeholder.MatchString(body) {
				continue // a sketch of the syntax, such as <route key>, not an example
			}
			var top map[string]any
			if yaml.Unmarshal([]byte(body), &top) != nil || len(top) == 0 {
				continue
			}
			ours := true
			for k := range top {
				ours = ours && keys[k]
			}
			if ours {
				line := 1 + strings.Count(string(data[:m[2]]), "\n")
				out = append(out, docExampleBlock{where: page + ":" + strconv.Itoa(line), body: body})
			}
		}
	}
	return out
}

// TestDocConfigExamplesLoad: every config example of the docs reads as a
// config file, strictly (no unknown key, no value of the wrong type, such
// as an unquoted off that YAML reads as false where a string is wanted).
func TestDocConfigExamplesLoad(t *testing.T) {
	examples := configExamples(t)
	if len(examples) < 5 {
		t.Fatalf("found %d config examples in docs/*.md; the extraction is broken", len(examples))
	}
	for _, ex := range examples {
		cfg := defaultConfig()
		if err := parseConfig([]byte(ex.body), &cfg); err != nil {
			t.Errorf("%s: the example does not load: %v", ex.where, err)
		}
	}
}

// docExample is the config example of docs/page that contains marker,
// with r's replacements made.
func docExample(t *testing.T, page, marker string, r *strings.Replacer) string {
	t.Helper()
	for _, ex := range configExamples(t) {
		if strings.Contains(ex.where, "/docs/"+page+":") && strings.Contains(ex.body, marker) {
			return r.Replace(ex.body)
		}
	}
	t.Fatalf("docs/%s has no config example with %q", page, marker)
	return ""
}
