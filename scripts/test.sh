#!/usr/bin/env bash
# `make test` and `make test-quick`: run every check and test of the three Go
# modules (main, e2e, deploy), go on after a failure, and at the end list
# every step, package and test that failed; exit 1 if any did.
#
#   scripts/test.sh          the whole suite (make test)
#   scripts/test.sh quick    gofmt, go vet and the tests of the main module;
#                            no e2e, no deploy, no test-deps (make test-quick)
#
# Environment: GO (default go), TEST_TIMEOUT (per go test run, default 15m),
# GO_TEST_ARGS (extra go test flags, e.g. '-run TestRun -v').
# shellcheck disable=SC2317 # the functions are called through step
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
GO="${GO:-go}"
TEST_TIMEOUT="${TEST_TIMEOUT:-15m}"
mode="${1:-full}"
# shellcheck disable=SC2206 # GO_TEST_ARGS is a list of flags
extra=(${GO_TEST_ARGS:-})

log="$(mktemp)"
wasmdir="$(mktemp -d)"
trap 'rm -rf "$log" "$wasmdir"' EXIT
failed=()
t0=$(date +%s)

# step NAME CMD...: runs CMD with its output shown and kept for the summary,
# and records NAME when it fails.
step() {
	local name="$1" start rc
	shift
	start=$(date +%s)
	echo "== $name: $*"
	"$@" 2>&1 | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -eq 0 ]; then
		echo "-- ok   $name ($(($(date +%s) - start))s)"
	else
		echo "-- FAIL $name (exit $rc, $(($(date +%s) - start))s)"
		failed+=("$name")
	fi
}

in_dir() {
	local dir="$1"
	shift
	(cd "$dir" && "$@")
}

fmt_check() {
	local out
	out="$(gofmt -l .)"
	[ -z "$out" ] || { echo "gofmt needed on:"; echo "$out"; return 1; }
}

# The WebAssembly guest modules the tests load are built and compiled once,
# without the race detector (which slows wazero's compiler several-fold),
# into a directory the test binaries share (TOOLMESH_TEST_WASM_DIR; see
# internal/wasmtest). wazero files its compilation cache under its version
# as the binary's build information gives it; test binaries have none and
# get "dev", so prepare is linked with that name.
prepare_wasm() {
	"$GO" run -ldflags='-X github.com/tetratelabs/wazero/internal/version.version=dev' \
		./internal/wasmtest/prepare "$wasmdir" >/dev/null
}

# How the time is spent, cold, on 2 cores (docs in CONTRIBUTING.md): module
# downloads, then compiling the dependencies, then the race-enabled test
# binaries. So:
# - go vet runs once per module, with the build flags of that module's
#   tests (-race for main and e2e): vet compiles the dependencies and the
#   tests reuse them from the build cache, instead of compiling everything
#   once plain for vet and once more with -race; go test then runs with
#   -vet=off (its vet subset is part of the full vet that already ran).
#   `make vet` and `make lint` use the same flags, so in CI they hit the
#   cache after `make test`.
# - The race detector covers the main and e2e modules whole: their
#   packages without goroutines of their own are small and fast, and
#   running them plain would compile their dependencies (CEL, protobuf,
#   gRPC) a second time without -race, which costs more than it saves.
#   deploy (chart rendering, Helm and Kubernetes libraries, none of our
#   concurrency) runs plain, as vet compiled it.
# - Module downloads and the test dependencies (apt) are network and disk
#   work: they run in the background while vet compiles the main module.
# - go test runs GOMAXPROCS packages at once; more would only contend on
#   2 cores.
# - bin/toolmesh (make build: -trimpath, no race) is built as a step of its
#   own before the tests: cmd/toolmesh's `make run` test and deploy's
#   monitoring test build the same binary within their deadlines, which a
#   cold compile of every package on a loaded machine could outlast; after
#   this step both find it in the build cache.
race=(-race)
if [ "$mode" = quick ]; then
	step "gofmt" fmt_check
	step "go vet: ." "$GO" vet "${race[@]}" ./...
	step "wasm modules" prepare_wasm
	step "build bin/toolmesh" make --no-print-directory build GO="$GO"
	step "main module (unit, race)" env TOOLMESH_TEST_WASM_DIR="$wasmdir" \
		"$GO" test "${race[@]}" -vet=off -count=1 -timeout "$TEST_TIMEOUT" "${extra[@]}" ./...
else
	depslog="$(mktemp)"
	sh scripts/test-deps.sh >"$depslog" 2>&1 &
	deps_pid=$!
	for m in e2e deploy; do
		(cd "$m" && "$GO" mod download) >/dev/null 2>&1 &
	done
	step "gofmt" fmt_check
	step "standalone" make --no-print-directory standalone
	step "go vet: . (race build)" "$GO" vet "${race[@]}" ./...
	step "wasm modules" prepare_wasm
	step "go vet: e2e (race build)" in_dir e2e "$GO" vet "${race[@]}" ./...
	step "go vet: deploy" in_dir deploy "$GO" vet ./...
	# Waited for here, not inside step: step runs its command in a subshell,
	# which cannot wait for this shell's children.
	wait "$deps_pid"
	deps_rc=$?
	show_deps() {
		cat "$depslog"
		rm -f "$depslog"
		return "$deps_rc"
	}
	step "test dependencies (scripts/test-deps.sh)" show_deps
	step "build bin/toolmesh" make --no-print-directory build GO="$GO"
	step "main module (race)" env TOOLMESH_TEST_WASM_DIR="$wasmdir" \
		"$GO" test "${race[@]}" -vet=off -count=1 -timeout "$TEST_TIMEOUT" "${extra[@]}" ./...
	step "e2e module (race)" in_dir e2e "$GO" test "${race[@]}" -vet=off -count=1 -timeout "$TEST_TIMEOUT" "${extra[@]}" ./...
	step "deploy module" in_dir deploy "$GO" test -vet=off -count=1 -timeout "$TEST_TIMEOUT" "${extra[@]}" ./...
	# The exception-file filter of `make vulncheck` is a module of its own
	# (standard library only, a second to build): vet and tests, no race.
	vulnexcept_module() {
		in_dir scripts/vulnexcept "$GO" vet ./... &&
			in_dir scripts/vulnexcept "$GO" test -vet=off -count=1 -timeout "$TEST_TIMEOUT" "${extra[@]}" ./...
	}
	step "scripts/vulnexcept module" vulnexcept_module
	wait
fi

echo
echo "== summary ($mode, $(($(date +%s) - t0))s)"
if [ ${#failed[@]} -eq 0 ]; then
	echo "all steps passed"
	exit 0
fi
for f in "${failed[@]}"; do
	echo "FAILED step: $f"
done
# go test's lines for failed packages and tests, and panics, in order.
grep -E '^(FAIL|--- FAIL|panic:)' "$log" | grep -v '^FAIL$' | sed 's/^/  /'
exit 1
