package docs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptsShellcheck lints the scripts behind the commands the README
// and CONTRIBUTING.md tell a reader to run (make test, make test-quick,
// make build, CI), with shellcheck, which `make test` installs or locates.
func TestScriptsShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck not found (%v): install Debian's shellcheck package (make test-deps does)", err)
	}
	var scripts []string
	for _, s := range []string{"scripts/test.sh", "scripts/test-deps.sh", "scripts/build.sh", "scripts/vulncheck.sh", ".ci/run"} {
		scripts = append(scripts, filepath.Join(root, s))
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// govulncheckVersion is the Makefile's GOVULNCHECK_VERSION.
func govulncheckVersion(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOVULNCHECK_VERSION\s*:?=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no GOVULNCHECK_VERSION in the Makefile")
	}
	return string(m[1])
}

// vulncheck runs scripts/vulncheck.sh with db on the module directories
// dirs and returns its exit status and output.
func vulncheck(t *testing.T, db string, dirs ...string) (int, string) {
	t.Helper()
	return vulncheckExcepting(t, "", db, dirs...)
}

// vulncheckExcepting is vulncheck with the exception file exceptions, or
// the repository's when it is "".
func vulncheckExcepting(t *testing.T, exceptions, db string, dirs ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"scripts/vulncheck.sh", govulncheckVersion(t), db}, dirs...)...)
	cmd.Dir = root
	if exceptions != "" {
		cmd.Env = append(os.Environ(), "VULNCHECK_EXCEPTIONS="+exceptions)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("vulncheck.sh: %v\n%s", err, out)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestVulncheckFindsCalledVulnerability: `make vulncheck` fails (exit 3)
// on a module that calls a known-vulnerable function
// (testdata/vulncheck, github.com/golang-jwt/jwt/v4 v4.5.0's Parse,
// GO-2024-3250), passes a module that calls
// none, and says nothing was checked (exit 2) when its canary, that same
// call, is not reported. A called standard library symbol (a made-up
// GO-2099-0001 in net/http.ReadResponse, which internal/idletest calls)
// passes, named, only while an exception line accepts it; a line that is
// expired, malformed, for a dependency or with another fixed version fails
// the run (exit 2, naming the line). The databases are one- and two-entry
// copies in the layout govulncheck reads from a file:// URL, as `make
// vulncheck` builds the whole one from golang.org/x/vulndb when
// vuln.go.dev does not answer.
func TestVulncheckFindsCalledVulnerability(t *testing.T) {
	const entry = `{"schema_version":"1.3.1","id":"GO-2024-3250","modified":"2024-11-04T00:00:00Z",
		"aliases":["CVE-2024-51744"],"summary":"Parse returns a token with an error a caller may not check",
		"affected":[{"package":{"name":"github.com/golang-jwt/jwt/v4","ecosystem":"Go"},
			"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"4.5.1"}]}],
			"ecosystem_specific":{"imports":[{"path":"github.com/golang-jwt/jwt/v4","symbols":["Parse","ParseWithClaims","Parser.Parse","Parser.ParseWithClaims"]}]}}],
		"database_specific":{"url":"https://pkg.go.dev/vuln/GO-2024-3250"}}`
	one := vulnDB(t, map[string]string{
		"index/db.json":        `{"modified":"2024-11-04T00:00:00Z"}`,
		"index/modules.json":   `[{"path":"github.com/golang-jwt/jwt/v4","vulns":[{"id":"GO-2024-3250","modified":"2024-11-04T00:00:00Z","fixed":"4.5.1"}]}]`,
		"index/vulns.json":     `[{"id":"GO-2024-3250","modified":"2024-11-04T00:00:00Z","aliases":["CVE-2024-51744"]}]`,
		"ID/GO-2024-3250.json": entry,
	})
	const stdlibEntry = `{"schema_version":"1.3.1","id":"GO-2099-0001","modified":"2024-11-04T00:00:00Z",
		"summary":"A made-up vulnerability of net/http.ReadResponse",
		"affected":[{"package":{"name":"stdlib","ecosystem":"Go"},
			"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.999.0"}]}],
			"ecosystem_specific":{"imports":[{"path":"net/http","symbols":["ReadResponse"]}]}}]}`
	withStdlib := vulnDB(t, map[string]string{
		"index/db.json": `{"modified":"2024-11-04T00:00:00Z"}`,
		"index/modules.json": `[{"path":"github.com/golang-jwt/jwt/v4","vulns":[{"id":"GO-2024-3250","modified":"2024-11-04T00:00:00Z","fixed":"4.5.1"}]},
			{"path":"stdlib","vulns":[{"id":"GO-2099-0001","modified":"2024-11-04T00:00:00Z","fixed":"1.999.0"}]}]`,
		"index/vulns.json": `[{"id":"GO-2024-3250","modified":"2024-11-04T00:00:00Z","aliases":["CVE-2024-51744"]},
			{"id":"GO-2099-0001","modified":"2024-11-04T00:00:00Z","aliases":[]}]`,
		"ID/GO-2024-3250.json": entry,
		"ID/GO-2099-0001.json": stdlibEntry,
	})
	empty := vulnDB(t, map[string]string{
		"index/db.json": `{"modified":"2024-11-04T00:00:00Z"}`, "index/modules.json": `[]`, "index/vulns.json": `[]`,
	})
	const reason = " standard library of go1.26.8; toolchain upgrade pending\n"
	for _, tc := range []struct {
		name, db, dir string
		exceptions    string // the exception file's text; "" is the repository's file
		code          int
		say           string
	}{
		{"a called vulnerable function", one, "testdata/vulncheck", "", 3, "called, not accepted: GO-2024-3250 "},
		{"no call", one, "internal/idletest", "", 0, "no vulnerable symbol is called"},
		{"canary not reported", empty, "internal/idletest", "", 2, "the canary's call of GO-2024-3250 was not reported"},
		{"stdlib accepted", withStdlib, "internal/idletest", "GO-2099-0001 stdlib go1.999.0 2099-12-31" + reason, 0,
			"accepted until 2099-12-31: GO-2099-0001 (stdlib, fixed in go1.999.0)"},
		{"stdlib not accepted", withStdlib, "internal/idletest", "# none\n", 3, "called, not accepted: GO-2099-0001 (stdlib@"},
		{"expired", withStdlib, "internal/idletest", "# expired\nGO-2099-0001 stdlib go1.999.0 2020-01-31" + reason, 2,
			"exceptions.txt:2: GO-2099-0001 expired on 2020-01-31"},
		{"dependency", withStdlib, "testdata/vulncheck", "GO-2024-3250 github.com/golang-jwt/jwt/v4 v4.5.1 2099-12-31 upgrade pending\n", 2,
			"exceptions.txt:1: GO-2024-3250: module github.com/golang-jwt/jwt/v4: only the standard library (stdlib) may be accepted"},
		{"malformed", withStdlib, "internal/idletest", "GO-2099-0001 stdlib go1.999.0\n", 2, "exceptions.txt:1: want ID MODULE FIXED EXPIRES REASON"},
		{"bad date", withStdlib, "internal/idletest", "GO-2099-0001 stdlib go1.999.0 31.12.2099" + reason, 2, `exceptions.txt:1: GO-2099-0001: EXPIRES "31.12.2099" is not a date`},
		{"another fixed version", withStdlib, "internal/idletest", "GO-2099-0001 stdlib go1.26.10 2099-12-31" + reason, 2,
			"exceptions.txt:1: GO-2099-0001 is fixed in go1.999.0 by the database, not go1.26.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exceptions := ""
			if tc.exceptions != "" {
				exceptions = filepath.Join(t.TempDir(), "exceptions.txt")
				if err := os.WriteFile(exceptions, []byte(tc.exceptions), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, out := vulncheckExcepting(t, exceptions, tc.db, tc.dir)
			if code != tc.code || !strings.Contains(out, tc.say) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, tc.code, tc.say, out)
			}
		})
	}
}

// vulnDB writes files into a new directory and returns its file:// URL.
func vulnDB(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return "file://" + dir
}

// TestVulncheckUnreachableDatabase: when govulncheck cannot fetch the
// vulnerability database, `make vulncheck` (scripts/vulncheck.sh) says
// so, naming the database, and exits 2, rather than failing with only
// govulncheck's network error. A .invalid host never resolves (RFC 2606).
func TestVulncheckUnreachableDatabase(t *testing.T) {
	const db = "https://vulndb.invalid"
	code, out := vulncheck(t, db, "internal/idletest")
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	if want := "the vulnerability database " + db + " cannot be reached or read"; !strings.Contains(out, want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
}
