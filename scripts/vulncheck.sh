#!/bin/sh
# Runs govulncheck (golang.org/x/vuln) on every package of each module
# directory given; fails when code calls a known-vulnerable symbol.
#
#   scripts/vulncheck.sh VERSION DB MODULE_DIR...
#
# `make vulncheck` runs it on the three modules. When the vulnerability
# database DB cannot be fetched (vuln.go.dev does not resolve on every
# build machine), nothing was checked: it says so, naming DB, and exits 2,
# so the failure is not read as a finding.
set -u

if [ $# -lt 3 ]; then
	echo "usage: $0 GOVULNCHECK_VERSION DB MODULE_DIR..." >&2
	exit 2
fi
version=$1
db=$2
shift 2
go=${GO:-go}

for m in "$@"; do
	echo "govulncheck: $m"
	out=$(cd "$m" && "$go" run "golang.org/x/vuln/cmd/govulncheck@$version" -db "$db" ./... 2>&1)
	rc=$?
	printf '%s\n' "$out"
	# govulncheck's own words when the database cannot be fetched
	# ("fetching vulnerabilities: ... no such host") or read at all
	# ("creating client: ...").
	if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -qE '^govulncheck: (fetching vulnerabilities|creating client)|^creating client:'; then
		echo "vulncheck: the vulnerability database $db cannot be reached or read from this machine, so nothing was checked." >&2
		echo "vulncheck: run it where $db resolves, or set VULNDB to a reachable copy (make vulncheck VULNDB=file:///path/to/vulndb)." >&2
		exit 2
	fi
	if [ "$rc" -ne 0 ]; then
		exit "$rc"
	fi
done
