// Command vulnexcept reads govulncheck's -format json output on stdin and
// fails on every called vulnerable symbol that the reviewed exception file
// does not accept (scripts/vulncheck.sh runs it; docs/security.md, "Supply
// chain").
//
//	vulnexcept -exceptions FILE [-check] < govulncheck.json
//
// FILE has one accepted finding a line: ID MODULE FIXED EXPIRES REASON, for
// example
//
//	GO-2026-6599 stdlib go1.26.9 2027-01-31 standard library of go1.26.8; fixed in go1.26.9; toolchain upgrade pending
//
// '#' starts a comment line. Only the standard library (stdlib) may be
// accepted: a vulnerable dependency is upgraded instead. An exception is
// valid through its EXPIRES date (UTC).
//
// Exit status: 0 every called vulnerable symbol is accepted (each is named
// on every run); 3 one is not; 2 the exception file is wrong (the line is
// named), and then nothing else is read. -check only checks the file.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

func main() {
	file := flag.String("exceptions", "", "the exception file")
	check := flag.Bool("check", false, "only check the exception file")
	flag.Parse()
	os.Exit(run(*file, *check, time.Now().UTC(), os.Stdin, os.Stdout, os.Stderr))
}

func run(file string, check bool, now time.Time, in io.Reader, stdout, stderr io.Writer) int {
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(stderr, "vulncheck: exceptions: %v\n", err)
		return 2
	}
	ex, problems := parseExceptions(file, f, now)
	f.Close()
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "vulncheck: "+p)
		}
		return 2
	}
	if check {
		return 0
	}
	called, summary, err := readFindings(in)
	if err != nil {
		fmt.Fprintf(stderr, "vulncheck: reading govulncheck's JSON output: %v\n", err)
		return 1
	}
	if len(called) == 0 {
		fmt.Fprintln(stdout, "vulncheck: no vulnerable symbol is called")
		return 0
	}
	code, accepted := 0, 0
	for _, v := range called {
		e, ok := ex[v.id]
		switch {
		case ok && v.module != "stdlib":
			// Not reached while only stdlib lines parse; kept so a
			// dependency's finding can never be accepted.
			ok = false
		case ok && e.fixed != goVersion(v.fixed):
			fmt.Fprintf(stderr, "vulncheck: %s:%d: %s is fixed in %s by the database, not %s: correct the line\n",
				file, e.line, v.id, goVersion(v.fixed), e.fixed)
			return 2
		}
		if ok {
			accepted++
			fmt.Fprintf(stdout, "vulncheck: accepted until %s: %s (stdlib, fixed in %s): %s\n",
				e.expires.Format(time.DateOnly), v.id, e.fixed, summary[v.id])
			continue
		}
		code = 3
		fixed := v.fixed
		if v.module == "stdlib" {
			fixed = goVersion(fixed)
		}
		fmt.Fprintf(stdout, "vulncheck: called, not accepted: %s (%s@%s, fixed in %s): %s\n",
			v.id, v.module, v.version, fixed, summary[v.id])
		for _, s := range v.symbols {
			fmt.Fprintln(stdout, "    "+s)
		}
	}
	if code == 0 {
		fmt.Fprintf(stdout, "vulncheck: every called vulnerable symbol is accepted (%d vulnerabilities)\n", accepted)
	}
	return code
}

// exception is one line of the exception file.
type exception struct {
	line    int
	fixed   string
	expires time.Time
}

var (
	idRE    = regexp.MustCompile(`^GO-\d{4}-\d{4,}$`)
	fixedRE = regexp.MustCompile(`^go1\.\d+(\.\d+)?$`)
)

// parseExceptions reads the exception file and returns its lines by ID, and
// a problem for each wrong line: malformed, not the standard library, a
// repeated ID, or expired at now.
func parseExceptions(name string, r io.Reader, now time.Time) (map[string]exception, []string) {
	ex := map[string]exception{}
	var problems []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) {
			problems = append(problems, fmt.Sprintf("%s:%d: ", name, n)+fmt.Sprintf(format, a...))
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			bad("want ID MODULE FIXED EXPIRES REASON, got %q", line)
			continue
		}
		id, module, fixed, date := f[0], f[1], f[2], f[3]
		expires, err := time.Parse(time.DateOnly, date)
		switch {
		case !idRE.MatchString(id):
			bad("ID %q is not a Go vulnerability ID (GO-YYYY-NNNN)", id)
		case module != "stdlib":
			bad("%s: module %s: only the standard library (stdlib) may be accepted; upgrade the dependency instead", id, module)
		case !fixedRE.MatchString(fixed):
			bad("%s: FIXED %q is not a Go version (go1.N.P)", id, fixed)
		case err != nil:
			bad("%s: EXPIRES %q is not a date (YYYY-MM-DD)", id, date)
		case !now.Before(expires.AddDate(0, 0, 1)):
			bad("%s expired on %s: upgrade Go to %s, or review the exception and renew it", id, date, fixed)
		default:
			if prev, dup := ex[id]; dup {
				bad("%s is already accepted on line %d", id, prev.line)
				continue
			}
			ex[id] = exception{line: n, fixed: fixed, expires: expires}
		}
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", name, err))
	}
	return ex, problems
}

// vuln is one vulnerability whose symbols are called.
type vuln struct {
	id, module, version, fixed string
	symbols                    []string
}

// The parts of govulncheck's JSON messages read here
// (golang.org/x/vuln/internal/govulncheck, protocol v1.0.0).
type (
	message struct {
		OSV     *osv     `json:"osv"`
		Finding *finding `json:"finding"`
	}
	osv struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	}
	finding struct {
		OSV          string   `json:"osv"`
		FixedVersion string   `json:"fixed_version"`
		Trace        []*frame `json:"trace"`
	}
	frame struct {
		Module   string `json:"module"`
		Version  string `json:"version"`
		Package  string `json:"package"`
		Function string `json:"function"`
		Receiver string `json:"receiver"`
		Position *struct {
			Filename string `json:"filename"`
			Line     int    `json:"line"`
		} `json:"position"`
	}
)

// readFindings returns the vulnerabilities whose symbols are called, in
// the order govulncheck reports them, and each entry's summary. A finding
// at symbol level has a function in its first frame (the vulnerable
// symbol); its last frame is the caller in the scanned module. Module- and
// package-level findings (imported, not called) do not fail the check, as
// they do not fail govulncheck's.
func readFindings(r io.Reader) ([]*vuln, map[string]string, error) {
	var called []*vuln
	byID := map[string]*vuln{}
	summary := map[string]string{}
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return called, summary, nil
		} else if err != nil {
			return nil, nil, err
		}
		if m.OSV != nil {
			summary[m.OSV.ID] = m.OSV.Summary
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0] == nil || f.Trace[0].Function == "" {
			continue
		}
		v := byID[f.OSV]
		if v == nil {
			top := f.Trace[0]
			v = &vuln{id: f.OSV, module: top.Module, version: top.Version, fixed: f.FixedVersion}
			byID[f.OSV] = v
			called = append(called, v)
		}
		s := symbol(f.Trace[0])
		if last := f.Trace[len(f.Trace)-1]; len(f.Trace) > 1 && last != nil {
			s += ", called from " + symbol(last)
			if last.Position != nil {
				s += fmt.Sprintf(" (%s:%d)", last.Position.Filename, last.Position.Line)
			}
		}
		v.symbols = append(v.symbols, s)
	}
}

func symbol(f *frame) string {
	if f.Receiver != "" {
		return f.Package + "." + strings.TrimPrefix(f.Receiver, "*") + "." + f.Function
	}
	return f.Package + "." + f.Function
}

// goVersion writes a standard library version as Go does: v1.26.9 is
// go1.26.9.
func goVersion(v string) string {
	return "go" + strings.TrimPrefix(v, "v")
}
