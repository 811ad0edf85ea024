package rules

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// verifyForm is what a [verify] marker must hold (issue 28, "The rules
// follow Envoy"): the Envoy source file, a function in it, and after ": "
// why it is still open.
var verifyForm = regexp.MustCompile(`^\[verify: (source|test|api|envoy)/[\w/.-]+\.(cc|h|proto) .*\w::\w.*: .+\]$`)

// TestVerifyMarkersNameFileAndFunction reads every [verify] marker in the
// data plane's Go comments, joined across comment lines, and fails on one
// that does not name the Envoy file and function to read or say why it is
// still open.
func TestVerifyMarkersNameFileAndFunction(t *testing.T) {
	root := filepath.Join("..", "..", "..") // envoy/
	var markers int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range commentMarkers(string(src)) {
			if strings.HasPrefix(m, "[verify: <") { // the legend in rules.go
				continue
			}
			markers++
			if !verifyForm.MatchString(m) {
				t.Errorf("%s: marker does not name an Envoy file, a Class::function and why: %q", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if markers == 0 {
		t.Fatal("no [verify] marker found: the walk is looking in the wrong place")
	}
}

// commentMarkers returns each "[verify...]" in the // comments of src, with
// the comment lines it spans joined by single spaces.
func commentMarkers(src string) []string {
	var text strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			text.WriteString(strings.TrimSpace(line[i+2:]))
		}
		text.WriteByte(' ')
	}
	s := strings.Join(strings.Fields(text.String()), " ")
	var out []string
	for {
		i := strings.Index(s, "[verify")
		if i < 0 {
			return out
		}
		s = s[i:]
		end := closingBracket(s)
		if end < 0 {
			return append(out, s)
		}
		out = append(out, s[:end+1])
		s = s[end+1:]
	}
}

// closingBracket is the index of the ']' that closes s's leading '['.
func closingBracket(s string) int {
	depth := 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}
