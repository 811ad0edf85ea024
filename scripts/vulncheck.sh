#!/bin/sh
# Runs govulncheck (golang.org/x/vuln) on every package of each module
# directory given; fails when code calls a known-vulnerable symbol.
#
#   scripts/vulncheck.sh VERSION DB MODULE_DIR...
#
# VERSION is govulncheck's. DB is its -db, or "auto" (`make vulncheck`'s
# default): https://vuln.go.dev when it answers, otherwise a copy built from
# the database's source module, golang.org/x/vulndb, which the Go module
# proxy serves: its data/osv entries are indexed into the database layout
# govulncheck reads (index/db.json, index/modules.json, index/vulns.json,
# ID/<id>.json) by that module's own cmd/indexdb, in VULNDB_DIR/<version>
# (default bin/vulndb), kept for the next run. VULNDB_VERSION (default
# latest) picks the module version.
#
# First the canary: testdata/vulncheck calls a function that is known to be
# vulnerable (GO-2024-3250). When the check does not report it, or the
# database cannot be fetched or read (vuln.go.dev does not resolve on every
# build machine), nothing was checked: it says so, naming the database, and
# exits 2, so the failure is not read as a finding or as a pass.
#
# govulncheck writes JSON (-format json), which scripts/vulnexcept (a Go
# program, its own module) reads: every called vulnerable symbol fails the
# check unless the reviewed exception file, VULNCHECK_EXCEPTIONS (default
# scripts/vulncheck-exceptions.txt), accepts it. Only the standard library
# may be accepted, each line until its expiry date, and each accepted one is
# named on every run ("accepted until DATE: ID (stdlib, fixed in goX)").
#
# Exit status: 0 no module calls a vulnerable symbol that is not accepted;
# 3 one does; 2 nothing was checked, or the exception file is wrong (a
# dependency's, an expired or a malformed line, named); anything else,
# govulncheck or go failed.
set -u

if [ $# -lt 3 ]; then
	echo "usage: $0 GOVULNCHECK_VERSION DB MODULE_DIR..." >&2
	exit 2
fi
version=$1
db=$2
shift 2
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
canary=$root/testdata/vulncheck
canary_id=GO-2024-3250

exceptions=${VULNCHECK_EXCEPTIONS:-$root/scripts/vulncheck-exceptions.txt}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The filter is built, not run with `go run`, whose status would be 1 for
# any failure: 3 is how it says a called symbol is not accepted. A wrong
# exception file stops the run before anything is scanned.
if ! "$go" -C "$root/scripts/vulnexcept" build -o "$tmp/vulnexcept" .; then
	echo "vulncheck: scripts/vulnexcept cannot be built" >&2
	exit 1
fi
"$tmp/vulnexcept" -check -exceptions "$exceptions" || exit 2

# govulncheck is installed for the same reason.
bin=$root/bin/govulncheck/$version
if ! GOBIN=$bin "$go" install "golang.org/x/vuln/cmd/govulncheck@$version"; then
	echo "vulncheck: govulncheck@$version cannot be installed" >&2
	exit 1
fi

# govulncheck DIR: govulncheck on every package of the module in DIR, its
# findings filtered by the exception file; their report in $out, the
# status in $rc: govulncheck's when it failed (with -format json it exits
# 0 on findings), otherwise the filter's.
govulncheck() {
	(cd "$1" && "$bin/govulncheck" -format json -db "$db" ./... >"$tmp/json" 2>"$tmp/err")
	rc=$?
	out=$(cat "$tmp/err")
	if [ "$rc" -eq 0 ]; then
		out=$("$tmp/vulnexcept" -exceptions "$exceptions" <"$tmp/json" 2>&1)
		rc=$?
	fi
}

# unreadable: govulncheck's own words when the database cannot be fetched
# ("fetching vulnerabilities: ... no such host") or read at all
# ("creating client: ...").
unreadable() {
	[ "$rc" -ne 0 ] && grep -qE '^govulncheck: (fetching vulnerabilities|creating client)|^creating client:' "$tmp/err"
}

nothing_checked() {
	echo "vulncheck: $1, so nothing was checked." >&2
	echo "vulncheck: run it where the database $db resolves, or set VULNDB to a reachable copy (make vulncheck VULNDB=file:///path/to/vulndb)." >&2
	exit 2
}

# proxydb: builds (or finds) the database from golang.org/x/vulndb and sets
# db to it.
proxydb() {
	dir=${VULNDB_DIR:-$root/bin/vulndb}
	mod=$("$go" mod download -json "golang.org/x/vulndb@${VULNDB_VERSION:-latest}") || return 1
	v=$(printf '%s\n' "$mod" | sed -n 's/^[[:space:]]*"Version": "\(.*\)",$/\1/p')
	src=$(printf '%s\n' "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$v" ] && [ -d "$src/data/osv" ] || return 1
	if [ ! -f "$dir/$v/index/modules.json" ]; then
		echo "vulncheck: indexing golang.org/x/vulndb@$v ($(find "$src/data/osv" -name '*.json' | wc -l) entries) into $dir/$v"
		rm -rf "$dir/$v.tmp" && mkdir -p "$dir" &&
			"$go" run "golang.org/x/vulndb/cmd/indexdb@$v" -vulns "$src/data/osv" -out "$dir/$v.tmp" &&
			mv "$dir/$v.tmp" "$dir/$v" || return 1
	fi
	db=file://$dir/$v
}

if [ "$db" = auto ]; then
	db=https://vuln.go.dev
	echo "govulncheck: canary $canary, database $db"
	govulncheck "$canary"
	if unreadable; then
		echo "vulncheck: $db cannot be reached; using golang.org/x/vulndb from the Go module proxy"
		proxydb || nothing_checked "the vulnerability database cannot be fetched from $db or built from golang.org/x/vulndb"
		echo "govulncheck: canary $canary, database $db"
		govulncheck "$canary"
	fi
else
	echo "govulncheck: canary $canary, database $db"
	govulncheck "$canary"
fi
if unreadable; then
	printf '%s\n' "$out"
	nothing_checked "the vulnerability database $db cannot be reached or read"
fi
if [ "$rc" -ne 3 ] || ! printf '%s' "$out" | grep -q "not accepted: $canary_id "; then
	printf '%s\n' "$out"
	nothing_checked "the canary's call of $canary_id was not reported (govulncheck exit $rc) with the database $db"
fi
echo "govulncheck: the canary's $canary_id is reported"

# Every module is checked; the status is the first module's that failed.
status=0
for m in "$@"; do
	echo "govulncheck: $m"
	govulncheck "$m"
	printf '%s\n' "$out"
	if unreadable; then
		nothing_checked "the vulnerability database $db cannot be reached or read"
	fi
	if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
		status=$rc
	fi
done
exit "$status"
