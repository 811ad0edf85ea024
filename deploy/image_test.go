package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfile is what the tests read of a Dockerfile: its stages and
// instructions, with line continuations joined.
type dockerfile struct {
	args   map[string]string // global ARG defaults
	stages []stage
}

type stage struct {
	from, name string
	lines      []string // instructions after FROM
}

func parseDockerfile(t *testing.T, rel string) dockerfile {
	t.Helper()
	df := dockerfile{args: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(t, rel)))
	var cur string
	flush := func() {
		line := strings.TrimSpace(cur)
		cur = ""
		if line == "" {
			return
		}
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			f := strings.Fields(rest)
			s := stage{}
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					s.name = f[i+1]
					i++
				case s.from == "":
					s.from = f[i]
				}
			}
			df.stages = append(df.stages, s)
		case "ARG":
			if len(df.stages) == 0 {
				k, v, _ := strings.Cut(rest, "=")
				df.args[k] = v
				return
			}
			fallthrough
		default:
			if len(df.stages) == 0 {
				t.Fatalf("%s: %s before FROM", rel, word)
			}
			s := &df.stages[len(df.stages)-1]
			s.lines = append(s.lines, line)
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if c, ok := strings.CutSuffix(line, "\\"); ok {
			cur += c + " "
			continue
		}
		cur += line
		flush()
	}
	flush()
	return df
}

// expand replaces ${NAME} with the global ARG default.
func (d dockerfile) expand(s string) string {
	return regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(s, func(m string) string {
		return d.args[m[2:len(m)-1]]
	})
}

// TestDockerfiles checks the two images: multi-stage, the Go release of
// go.mod, a static build, distroless and a numeric non-root user (which
// Kubernetes' runAsNonRoot can verify).
func TestDockerfiles(t *testing.T) {
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(readRepoFile(t, "go.mod"))
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	for _, tc := range []struct{ file, pkg string }{
		{"Dockerfile", "./cmd/toolmesh"},
		{"deploy/compose/demo-services.Dockerfile", "./cmd/demo-services"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			df := parseDockerfile(t, tc.file)
			if len(df.stages) != 2 {
				t.Fatalf("%d stages, want a build stage and a runtime stage", len(df.stages))
			}
			build, final := df.stages[0], df.stages[1]
			if want := "golang:" + string(goVersion[1]); df.expand(build.from) != want {
				t.Errorf("build stage FROM %s, want %s (go.mod)", df.expand(build.from), want)
			}
			all := strings.Join(build.lines, "\n")
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "go build", tc.pkg} {
				if !strings.Contains(all, want) {
					t.Errorf("build stage lacks %q", want)
				}
			}
			if !strings.HasPrefix(final.from, "gcr.io/distroless/static-") || !strings.HasSuffix(final.from, ":nonroot") {
				t.Errorf("runtime stage FROM %s, want distroless static nonroot", final.from)
			}
			var user, entrypoint string
			for _, l := range final.lines {
				word, rest, _ := strings.Cut(l, " ")
				switch word {
				case "USER":
					user = rest
				case "ENTRYPOINT":
					entrypoint = rest
				case "RUN":
					t.Errorf("runtime stage runs %q: distroless has no shell", rest)
				}
			}
			if !regexp.MustCompile(`^[1-9]\d*(:\d+)?$`).MatchString(user) {
				t.Errorf("USER %q, want a numeric non-root user", user)
			}
			var ep []string
			if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) != 1 {
				t.Errorf("ENTRYPOINT %s, want the binary alone in exec form", entrypoint)
			}
		})
	}
}

// TestDockerignoreKeepsSources checks that .dockerignore leaves in the
// build context every file the two image builds compile or embed.
func TestDockerignoreKeepsSources(t *testing.T) {
	patterns := dockerignore(t)
	for _, tc := range []struct{ dir, pkg string }{
		{repoRoot, "./cmd/toolmesh"},
		{".", "./cmd/demo-services"},
	} {
		files := buildFiles(t, tc.dir, tc.pkg)
		if len(files) < 5 {
			t.Fatalf("%s: only %d files: go list went wrong", tc.pkg, len(files))
		}
		for _, f := range files {
			if p := patterns.excludes(f); p != "" {
				t.Errorf(".dockerignore pattern %q leaves out %s, which the %s image build needs", p, f, tc.pkg)
			}
		}
	}
	// And it does exclude what it is for.
	for _, f := range []string{".git/config", "registry.test", "e2e/e2e_test.go", "deploy/helm/toolmesh/Chart.yaml", "xds/testdata/x.yaml"} {
		if patterns.excludes(f) == "" {
			t.Errorf(".dockerignore keeps %s", f)
		}
	}
}

// buildFiles lists, relative to the repository root, the module files the
// build of pkg (run in dir) reads: go.mod and go.sum, the Go files and the
// embedded files of every package of the repository's modules it imports.
func buildFiles(t *testing.T, dir, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=Dir,GoFiles,EmbedFiles,Module", pkg)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			Dir                 string
			GoFiles, EmbedFiles []string
			Module              *struct{ Path, Dir, GoMod string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !strings.HasPrefix(p.Module.Path, "github.com/toolmesh/toolmesh") {
			continue // the standard library or a downloaded module
		}
		rel := func(abs string) string {
			r, err := filepath.Rel(root, abs)
			if err != nil || strings.HasPrefix(r, "..") {
				t.Fatalf("%s is outside the repository", abs)
			}
			return filepath.ToSlash(r)
		}
		files = append(files, rel(p.Module.GoMod), rel(strings.TrimSuffix(p.Module.GoMod, ".mod")+".sum"))
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			files = append(files, rel(filepath.Join(p.Dir, f)))
		}
	}
	return files
}

// ignorePatterns are .dockerignore patterns, anchored at the context root.
type ignorePatterns []struct {
	pattern string
	re      *regexp.Regexp
	negate  bool
}

func dockerignore(t *testing.T) ignorePatterns {
	t.Helper()
	var ps ignorePatterns
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(t, ".dockerignore")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		p := filepath.ToSlash(filepath.Clean(strings.TrimPrefix(line, "!")))
		ps = append(ps, struct {
			pattern string
			re      *regexp.Regexp
			negate  bool
		}{line, globRegexp(t, p), neg})
	}
	return ps
}

// globRegexp translates a Docker ignore pattern: * and ? within a path
// element, ** across elements.
func globRegexp(t *testing.T, p string) *regexp.Regexp {
	t.Helper()
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[' || c == '\\':
			t.Fatalf(".dockerignore pattern %q: character classes and escapes are not checked here", p)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// excludes returns the pattern that leaves file out of the context, or "".
// A pattern matches a path or any directory above it; the last matching
// pattern decides.
func (ps ignorePatterns) excludes(file string) string {
	decided := ""
	elems := strings.Split(file, "/")
	for _, p := range ps {
		for i := 1; i <= len(elems); i++ {
			if p.re.MatchString(strings.Join(elems[:i], "/")) {
				if p.negate {
					decided = ""
				} else {
					decided = p.pattern
				}
				break
			}
		}
	}
	return decided
}
