// Package docs_test keeps the Markdown documentation true to the code where
// a reader acts on what it says: the log lines to look for, the retry
// conditions in force, the make targets and commands to run, the files a
// link names. (docs/config.md's keys and defaults are checked against the
// configuration in internal/app, config_doc_test.go.)
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/xds"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// markdown returns every Markdown file a reader is sent to: README.md,
// CONTRIBUTING.md and docs/**, keyed by path from the root, with text.
func markdown(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(path string) {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.ToSlash(path)] = string(b)
	}
	add("README.md")
	add("CONTRIBUTING.md")
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err == nil {
			add(rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goSource is the text of every non-test Go file of the main module, with
// each string literal's content on its own so that a log message can be
// looked up whole.
func goSource(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "e2e", "deploy", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b.Write(src)
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// codeSpans returns the `code spans` of a Markdown text, with the line
// breaks inside a span (a wrapped paragraph) made spaces, as a reader sees
// them. Fenced blocks are skipped.
func codeSpans(md string) []string { return spans(md, spanRE) }

// quoted returns the code spans and the "quoted" text of a Markdown text.
func quoted(md string) []string { return append(spans(md, spanRE), spans(md, quoteRE)...) }

func spans(md string, re *regexp.Regexp) []string {
	var prose strings.Builder
	fenced := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose.WriteString(line)
		}
	}
	var out []string
	for _, m := range re.FindAllStringSubmatch(prose.String(), -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

var (
	spanRE  = regexp.MustCompile("`([^`]+)`")
	quoteRE = regexp.MustCompile(`"([^"]+)"`)
)

// logLineRE matches the code spans that quote a log message: the reload
// and failure messages an operator greps for.
var logLineRE = regexp.MustCompile(`(?i)^(SIGHUP: .*|.*reload failed; .*|[a-z ]+ reloaded)$`)

// TestDocumentedLogLinesAreWritten: every log message the documentation
// quotes is a string the code writes, so an operator who greps for it
// finds it. The SIGHUP line is one operators must be able to find.
func TestDocumentedLogLinesAreWritten(t *testing.T) {
	src := goSource(t)
	seen := 0
	docs := markdown(t)
	for path, md := range docs {
		for _, span := range quoted(md) {
			if !logLineRE.MatchString(span) {
				continue
			}
			seen++
			if !strings.Contains(src, `"`+span+`"`) {
				t.Errorf("%s quotes the log line %q, which no Go file of the main module writes", path, span)
			}
		}
	}
	const sighup = "SIGHUP: the configuration does not load; every reloadable block keeps its last good configuration"
	if !strings.Contains(src, `"`+sighup+`"`) {
		t.Errorf("the code no longer writes %q: update docs/authorization.md and this test", sighup)
	}
	if !slices.Contains(codeSpans(docs["docs/authorization.md"]), sighup) {
		t.Errorf("docs/authorization.md does not quote the SIGHUP reload line %q", sighup)
	}
	if seen < 3 {
		t.Errorf("found %d documented log lines; the pattern no longer finds them", seen)
	}
}

// TestDocumentedRetryConditions: the retry conditions the Portal contract
// and the SRE guide name are the ones xds programs by default.
func TestDocumentedRetryConditions(t *testing.T) {
	docs := markdown(t)
	want := "[" + strings.Join(xds.DefaultRetryOn, ", ") + "]"
	if !strings.Contains(docs["docs/sre.md"], "`"+want+"`") {
		t.Errorf("docs/sre.md does not give retryOn's default as `%s`", want)
	}
	for _, row := range strings.Split(docs["docs/contracts/portal.md"], "\n") {
		if !strings.HasPrefix(row, "| `maxRetries`") {
			continue
		}
		for _, c := range xds.DefaultRetryOn {
			if !strings.Contains(row, "`"+c+"`") {
				t.Errorf("docs/contracts/portal.md's maxRetries row does not name the retry condition %s", c)
			}
		}
		return
	}
	t.Error("docs/contracts/portal.md has no maxRetries row")
}

// contradictions are statements the documentation once made that the code
// does not do; each names where the truth is written.
var contradictions = []struct{ text, truth string }{
	{"forwards `Authorization`", "the client's Authorization is stripped before the Tool Service (ADR 0010, config.md)"},
	{"passes through no result filter", "result filters run on federated tools/call results (ADR 0006)"},
	{"cut off without a result", "a stalled federated tools/call stream ends with an isError result by default (ADR 0013)"},
	{"policy reload failed", "a configuration that does not load logs the SIGHUP line (docs/authorization.md)"},
}

func TestNoKnownContradictions(t *testing.T) {
	for path, md := range markdown(t) {
		flat := strings.Join(strings.Fields(md), " ")
		for _, c := range contradictions {
			if strings.Contains(flat, c.text) {
				t.Errorf("%s says %q: %s", path, c.text, c.truth)
			}
		}
	}
}

// TestMakeTargetsExist: every `make X` the documentation tells a reader to
// run is a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	check := func(path, target string) {
		if !targets[target] {
			t.Errorf("%s tells the reader to run `make %s`, which the Makefile has no target for", path, target)
		}
	}
	// In a code span, or at the start of a line of a fenced block.
	spanMake := regexp.MustCompile("`make ([a-z][a-z0-9-]*)")
	lineMake := regexp.MustCompile(`^\s*make ([a-z][a-z0-9-]*)`)
	for path, md := range markdown(t) {
		for _, m := range spanMake.FindAllStringSubmatch(md, -1) {
			check(path, m[1])
		}
		fenced := false
		for line := range strings.Lines(md) {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if m := lineMake.FindStringSubmatch(line); fenced && m != nil {
				check(path, m[1])
			}
		}
	}
}

// TestRelativeLinksResolve: every relative Markdown link names a file or
// directory of the repository.
func TestRelativeLinksResolve(t *testing.T) {
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for path, md := range markdown(t) {
		for _, m := range linkRE.FindAllStringSubmatch(md, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(root, filepath.Dir(path), filepath.FromSlash(target))
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s, which does not exist", path, m[1])
			}
		}
	}
}
