#!/usr/bin/env bash
# run_test.sh: a clean stop of `make run` exits 0. It runs `make run` on a
# pseudo-terminal (script(1)), types Ctrl-C there once toolmesh has
# started, and checks make's exit status; then it stops scripts/run.sh
# without a terminal by SIGINT and checks that status too. Every address is
# 127.0.0.1:0, so it needs no free port, and every step is bounded.
set -eu
unset MAKEFLAGS MFLAGS MAKELEVEL # a make that runs this test passes its jobserver on
cd "$(dirname "$0")/.."
command -v script >/dev/null || { echo "run_test.sh needs script(1) (Debian's bsdutils)" >&2; exit 1; }
MAKE=${MAKE:-make}
args='--listen 127.0.0.1:0 --extproc-listen 127.0.0.1:0 --xds-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --drain-delay 0s'
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# waitstarted waits up to 5 minutes (the first build compiles) for the
# start-up line; it reports false if it never came.
waitstarted() {
	for _ in $(seq 1 3000); do
		grep -q 'toolmesh started' "$log" && return 0
		sleep 0.1
	done
	return 1
}

# 1. Ctrl-C on the terminal of `make run`. The input side of the pipe
# types ^C once toolmesh is up and stays open until script(1) is done.
status=0
# shellcheck disable=SC2094 # the input side watches the log script(1) writes
{
	waitstarted || echo "toolmesh did not start" >&2
	printf '\003'
	for _ in $(seq 1 300); do
		grep -q 'toolmesh stopped' "$log" && break
		sleep 0.1
	done
	sleep 2 # make's own exit
} | timeout 360 script -qefc "$MAKE --no-print-directory run ARGS='$args'" /dev/null >"$log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
	echo "FAIL: make run stopped by Ctrl-C exited $status, want 0; its output:" >&2
	tail -n 30 "$log" >&2
	exit 1
fi
grep -q 'building bin/toolmesh' "$log" || { echo "FAIL: make run did not say it builds first" >&2; exit 1; }
grep -q 'toolmesh stopped' "$log" || { echo "FAIL: toolmesh did not stop cleanly" >&2; tail -n 30 "$log" >&2; exit 1; }

# 2. No terminal: run.sh becomes toolmesh, which exits 0 on SIGINT.
: >"$log"
# shellcheck disable=SC2086 # args is a list of flags
timeout 60 bash scripts/run.sh bin/toolmesh $args </dev/null >"$log" 2>&1 &
pid=$!
waitstarted || { echo "FAIL: run.sh without a terminal did not start toolmesh" >&2; tail -n 30 "$log" >&2; exit 1; }
kill -INT "$pid" 2>/dev/null || true
status=0
wait "$pid" || status=$?
if [ "$status" -ne 0 ]; then
	echo "FAIL: run.sh without a terminal, stopped by SIGINT, exited $status, want 0" >&2
	tail -n 30 "$log" >&2
	exit 1
fi
echo "ok: make run and run.sh exit 0 on a clean stop"
