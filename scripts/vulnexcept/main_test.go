package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkedIn is the exception file `make vulncheck` reads.
const checkedIn = "../vulncheck-exceptions.txt"

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func TestParseExceptions(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		ids      []string // accepted, sorted
		problems []string // each a substring of the problem of that index
	}{
		{"empty", "", nil, nil},
		{"comments and blank lines", "# a comment\n\n   \n  # indented comment\n", nil, nil},
		{"one line", "GO-2026-6599 stdlib go1.26.9 2027-01-31 toolchain upgrade pending\n",
			[]string{"GO-2026-6599"}, nil},
		{"surrounding space and tabs", "\t GO-2026-6599\tstdlib  go1.26 2027-01-31 reason  \n",
			[]string{"GO-2026-6599"}, nil},
		{"five-digit number", "GO-2026-12345 stdlib go1.26.9 2027-01-31 r\n", []string{"GO-2026-12345"}, nil},
		{"valid through its expiry date", "GO-2026-6599 stdlib go1.26.9 2026-12-06 r\n", []string{"GO-2026-6599"}, nil},
		{"expired the day before", "GO-2026-6599 stdlib go1.26.9 2026-12-05 r\n", nil,
			[]string{"x:1: GO-2026-6599 expired on 2026-12-05: upgrade Go to go1.26.9"}},
		{"no reason", "GO-2026-6599 stdlib go1.26.9 2027-01-31\n", nil,
			[]string{"x:1: want ID MODULE FIXED EXPIRES REASON"}},
		{"not a Go vulnerability ID", "CVE-2026-1234 stdlib go1.26.9 2027-01-31 r\n", nil,
			[]string{`x:1: ID "CVE-2026-1234" is not a Go vulnerability ID`}},
		{"short ID number", "GO-2026-123 stdlib go1.26.9 2027-01-31 r\n", nil, []string{"is not a Go vulnerability ID"}},
		{"a dependency", "GO-2026-6599 golang.org/x/net v0.40.0 2027-01-31 r\n", nil,
			[]string{"x:1: GO-2026-6599: module golang.org/x/net: only the standard library (stdlib) may be accepted"}},
		{"FIXED not a Go version", "GO-2026-6599 stdlib v1.26.9 2027-01-31 r\n", nil,
			[]string{`x:1: GO-2026-6599: FIXED "v1.26.9" is not a Go version`}},
		{"EXPIRES not a date", "GO-2026-6599 stdlib go1.26.9 31.01.2027 r\n", nil,
			[]string{`x:1: GO-2026-6599: EXPIRES "31.01.2027" is not a date`}},
		{"EXPIRES not a day", "GO-2026-6599 stdlib go1.26.9 2027-02-30 r\n", nil, []string{"is not a date"}},
		{"repeated ID", "GO-2026-6599 stdlib go1.26.9 2027-01-31 r\n# c\nGO-2026-6599 stdlib go1.26.9 2027-02-28 r\n",
			[]string{"GO-2026-6599"}, []string{"x:3: GO-2026-6599 is already accepted on line 1"}},
		{"every wrong line named, good ones kept",
			"GO-2026-0001 stdlib go1.26.9 2027-01-31 r\nbad\nGO-2026-0002 stdlib go1.26.9 2027-01-31 r\nGO-2026-0003 other go1.26.9 2027-01-31 r\n",
			[]string{"GO-2026-0001", "GO-2026-0002"}, []string{"x:2: want", "x:4: GO-2026-0003: module other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex, problems := parseExceptions("x", strings.NewReader(tc.file), now)
			ids := make([]string, 0, len(ex))
			for id := range ex {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.ids) {
				t.Errorf("accepted %v, want %v", ids, tc.ids)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d like %q", problems, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], want)
				}
			}
		})
	}
}

func TestParseExceptionsEntry(t *testing.T) {
	ex, problems := parseExceptions("x", strings.NewReader("# c\n\nGO-2026-6809 stdlib go1.26.10 2027-01-31 a reason\n"), now)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	want := exception{line: 3, fixed: "go1.26.10", expires: time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)}
	if got := ex["GO-2026-6809"]; got != want {
		t.Fatalf("entry %+v, want %+v", got, want)
	}
}

// TestCheckedInFile: every line of the checked-in file is well-formed (at a
// date before any of them expires, so the test does not age).
func TestCheckedInFile(t *testing.T) {
	f, err := os.Open(checkedIn)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ex, problems := parseExceptions(checkedIn, f, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	if len(problems) > 0 || len(ex) == 0 {
		t.Fatalf("%d entries, problems %q", len(ex), problems)
	}
}

// govulncheck's JSON messages (protocol v1.0.0), as -format json writes
// them: config, progress and OSV entries, then findings at module, package
// and symbol level.
const findingsJSON = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck"}}
{"progress":{"message":"Scanning your code..."}}
{"osv":{"id":"GO-2026-6599","summary":"Panic in net/http"}}
{"osv":{"id":"GO-2026-7000","summary":"Imported, not called"}}
{"osv":{"id":"GO-2026-7001","summary":"Bug in a dependency"}}
{"finding":{"osv":"GO-2026-7000","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"crypto/x509"}]}}
{"finding":{"osv":"GO-2026-6599","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"ReadRequest"},{"module":"github.com/toolmesh/toolmesh","package":"github.com/toolmesh/toolmesh/mcp","function":"Serve","receiver":"*Server","position":{"filename":"mcp/http.go","line":42}}]}}
{"finding":{"osv":"GO-2026-6599","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Get","receiver":"*Client"}]}}
{"finding":{"osv":"GO-2026-7001","fixed_version":"v0.41.0","trace":[{"module":"golang.org/x/net","version":"v0.40.0","package":"golang.org/x/net/html","function":"Parse"},{"module":"github.com/toolmesh/toolmesh","package":"github.com/toolmesh/toolmesh/demo","function":"Run"}]}}
{"finding":{"osv":"GO-2026-7002","trace":[null]}}
{"finding":{"osv":"GO-2026-7003","trace":[]}}
`

func TestReadFindings(t *testing.T) {
	called, summary, err := readFindings(strings.NewReader(findingsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(called) != 2 {
		t.Fatalf("called %d vulnerabilities, want 2 (module-level and malformed findings are not calls)", len(called))
	}
	v := called[0]
	if v.id != "GO-2026-6599" || v.module != "stdlib" || v.version != "v1.26.8" || v.fixed != "v1.26.9" {
		t.Errorf("first %+v", v)
	}
	want := []string{
		"net/http.ReadRequest, called from github.com/toolmesh/toolmesh/mcp.Server.Serve (mcp/http.go:42)",
		"net/http.Client.Get",
	}
	if !slices.Equal(v.symbols, want) {
		t.Errorf("symbols %q, want %q", v.symbols, want)
	}
	if called[1].id != "GO-2026-7001" || called[1].module != "golang.org/x/net" {
		t.Errorf("second %+v", called[1])
	}
	if summary["GO-2026-6599"] != "Panic in net/http" || summary["GO-2026-7000"] != "Imported, not called" {
		t.Errorf("summary %v", summary)
	}
	if _, _, err := readFindings(strings.NewReader(`{"finding":`)); err == nil {
		t.Error("truncated JSON read without an error")
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.txt", "GO-2026-6599 stdlib go1.26.9 2027-01-31 pending\n")
	wrongFix := write("fix.txt", "GO-2026-6599 stdlib go1.26.10 2027-01-31 pending\n")
	expired := write("old.txt", "GO-2026-6599 stdlib go1.26.9 2026-01-31 pending\n")
	stdlibOnly := `{"finding":{"osv":"GO-2026-6599","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Get"}]}}`
	tests := []struct {
		name, file, in string
		check          bool
		code           int
		stdout, stderr string
	}{
		{"nothing called", good, `{"progress":{"message":"x"}}`, false, 0, "no vulnerable symbol is called", ""},
		{"accepted", good, stdlibOnly, false, 0, "accepted until 2027-01-31: GO-2026-6599 (stdlib, fixed in go1.26.9)", ""},
		{"accepted, every one named", good, stdlibOnly, false, 0, "every called vulnerable symbol is accepted (1 vulnerabilities)", ""},
		{"not accepted", good, findingsJSON, false, 3, "called, not accepted: GO-2026-7001 (golang.org/x/net@v0.40.0, fixed in v0.41.0)", ""},
		{"the database's fix differs", wrongFix, stdlibOnly, false, 2, "", "is fixed in go1.26.9 by the database, not go1.26.10"},
		{"expired file", expired, stdlibOnly, false, 2, "", "GO-2026-6599 expired on 2026-01-31"},
		{"check only", good, "not JSON", true, 0, "", ""},
		{"check, expired", expired, "", true, 2, "", "expired"},
		{"no file", filepath.Join(dir, "missing.txt"), "", true, 2, "", "vulncheck: exceptions:"},
		{"not JSON", good, "{", false, 1, "", "reading govulncheck's JSON output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.file, tc.check, now, strings.NewReader(tc.in), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// FuzzParseExceptions: any file parses without a panic, and what it accepts
// is what the format allows: a Go vulnerability ID of the standard library
// with a Go version and a date not past, once, on a line of the file; every
// other line that is not blank or a comment is named in a problem.
func FuzzParseExceptions(f *testing.F) {
	data, err := os.ReadFile(checkedIn)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	for line := range strings.Lines(string(data)) {
		f.Add(line)
	}
	f.Add("GO-2026-6599 stdlib go1.26.9 2026-12-06 r\nGO-2026-6599 stdlib go1.26.9 2027-01-31 r\n")
	f.Add("GO-2026-6599 golang.org/x/net v0.40.0 2027-01-31 r")
	f.Fuzz(func(t *testing.T, file string) {
		ex, problems := parseExceptions("x", strings.NewReader(file), now)
		lines := strings.Split(file, "\n")
		entries := 0
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				entries++
			}
		}
		// One accepted entry or one problem a line, unless a line was too
		// long for the scanner, which then stops.
		tooLong := slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "token too long") })
		if len(ex)+len(problems) != entries && !tooLong {
			t.Fatalf("%d lines, %d accepted and %d problems %q", entries, len(ex), len(problems), problems)
		}
		for id, e := range ex {
			fields := strings.Fields(lines[e.line-1])
			if !idRE.MatchString(id) || !fixedRE.MatchString(e.fixed) || len(fields) < 5 ||
				fields[0] != id || fields[1] != "stdlib" || fields[2] != e.fixed {
				t.Fatalf("accepted %s %+v from line %q", id, e, lines[e.line-1])
			}
			if !now.Before(e.expires.AddDate(0, 0, 1)) {
				t.Fatalf("accepted %s, expired on %s", id, e.expires)
			}
		}
		for _, p := range problems {
			if !strings.HasPrefix(p, "x:") {
				t.Fatalf("problem %q does not name the file", p)
			}
		}
	})
}

// FuzzReadFindings: any input is read without a panic, and every
// vulnerability returned is called: it has an ID once and a symbol.
func FuzzReadFindings(f *testing.F) {
	f.Add(findingsJSON)
	for line := range strings.Lines(findingsJSON) {
		f.Add(line)
	}
	f.Add(`{"finding":{"osv":"GO-2026-1","trace":[{"function":"F"},null]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		called, _, err := readFindings(strings.NewReader(in))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, v := range called {
			if seen[v.id] || len(v.symbols) == 0 {
				t.Fatalf("vulnerability %+v (seen before: %v)", v, seen[v.id])
			}
			seen[v.id] = true
		}
	})
}
