#!/usr/bin/env bash
# Runs the official MCP conformance suites (server scenarios) in both
# protocol eras:
#   legacy wire:    @modelcontextprotocol/conformance@0.1.16
#   stateless wire: @modelcontextprotocol/conformance@0.2.0-alpha.12 --spec-version 2026-07-28
#
# Modes:
#   run.sh           through the gateway: `toolmesh run` with the native
#                    fixture Tool Service (e2e/cmd/conformance-toolsvc) behind
#                    the route /mcp/conf, and the Go SDK conformance upstream
#                    (e2e/cmd/conformance-upstream) federated behind
#                    /mcp/fed-legacy (its legacy /mcp) and /mcp/fed (its
#                    2026-07-28 /stateless) (portal.template.json); each
#                    suite runs against /mcp/conf and against the federated
#                    route of its era
#   run.sh --direct  against the Go SDK conformance upstream
#                    (e2e/cmd/conformance-upstream) with nothing in between:
#                    the legacy suite on its /mcp, the 2026-07-28 suite on
#                    its /stateless
#
# Node 22 comes from the npm package node@22. Everything is installed and
# built under .conformance/ (git-ignored); results land in
# .conformance/results/ (gateway) or .conformance/results-direct/ (--direct).
# Exit status: 0 when every scenario passed, 1 otherwise.
set -euo pipefail

mode=gateway
case "${1:-}" in
"") ;;
--direct) mode=direct ;;
-h | --help)
  sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
  ;;
*)
  echo "usage: $0 [--direct]" >&2
  exit 2
  ;;
esac

top=$(git rev-parse --show-toplevel)
cd "$top"
work=$top/.conformance
mkdir -p "$work/legacy" "$work/stateless" "$work/bin"

install() { # dir, packages...
  local dir=$1
  shift
  if [ ! -x "$dir/node_modules/.bin/conformance" ]; then
    [ -f "$dir/package.json" ] || (cd "$dir" && npm init -y >/dev/null)
    (cd "$dir" && npm install --no-audit --no-fund "$@" >/dev/null)
  fi
}
install "$work/legacy" node@22 @modelcontextprotocol/conformance@0.1.16
install "$work/stateless" node@22 @modelcontextprotocol/conformance@0.2.0-alpha.12

# free_port prints a loopback TCP port nothing is listening on (bash's
# /dev/tcp connect fails on a closed port).
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "run.sh: no free loopback port found" >&2
  exit 1
}

# wait_for URL: poll until it answers 200 (bounded, about 20 s).
wait_for() {
  for _ in $(seq 1 100); do
    curl -fsS "$1" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  curl -fsS "$1" >/dev/null
}

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

# suite NAME DIR URL OUT [extra conformance args...]
suite() {
  local name=$1 dir=$2 url=$3 out=$4
  shift 4
  echo "== $name =="
  rm -rf "$out" && mkdir -p "$out"
  (cd "$dir" && PATH="$dir/node_modules/.bin:$PATH" \
    npx conformance server --url "$url" --suite all -o "$out" "$@" 2>&1 | tee "$out.txt") || status=1
}

# summary FILE: scenario runs that passed, from the suite's own summary
# lines (✓ passed; ✗ had a failure, or a warning in 0.2.x).
summary() {
  local pass total
  pass=$(grep -c '^✓ ' "$1" || true)
  total=$(grep -c '^[✓✗] ' "$1" || true)
  echo "$(basename "$1" .txt): $pass of $total scenario runs passed"
}

status=0
if [ "$mode" = direct ]; then
  results=$work/results-direct
  mkdir -p "$results"
  # e2e is its own Go module (e2e/go.mod), with the Go SDK.
  (cd e2e && go build -o "$work/bin/conformance-upstream" ./cmd/conformance-upstream)
  port=$(free_port)
  "$work/bin/conformance-upstream" --addr "127.0.0.1:$port" >"$work/upstream.log" 2>&1 &
  pids+=($!)
  wait_for "http://127.0.0.1:$port/healthz"
  # localhost, not 127.0.0.1: dns-rebinding-protection needs a localhost URL.
  suite "legacy wire: conformance 0.1.16 -> upstream /mcp" "$work/legacy" \
    "http://localhost:$port/mcp" "$results/legacy"
  suite "stateless wire: conformance 0.2.0-alpha.12 --spec-version 2026-07-28 -> upstream /stateless" "$work/stateless" \
    "http://localhost:$port/stateless" "$results/stateless" --spec-version 2026-07-28
  summary "$results/legacy.txt"
  summary "$results/stateless.txt"
  echo "results: $results (legacy.txt, stateless.txt); upstream log: $work/upstream.log"
  exit $status
fi

results=$work/results
mkdir -p "$results"
fport=$(free_port)
uport=$(free_port)
listen=$(free_port)
ext=$(free_port)
xds=$(free_port)
admin=$(free_port)

go build -o "$work/bin/toolmesh" ./cmd/toolmesh
(cd e2e && go build -o "$work/bin/conformance-toolsvc" ./cmd/conformance-toolsvc &&
  go build -o "$work/bin/conformance-upstream" ./cmd/conformance-upstream)
"$work/bin/conformance-toolsvc" "$fport" >"$work/fixture.log" 2>&1 &
pids+=($!)
"$work/bin/conformance-upstream" --addr "127.0.0.1:$uport" --log >"$work/upstream.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$fport/healthz"
wait_for "http://127.0.0.1:$uport/healthz"
sed -e "s/\${FIXTURE}/$fport/" -e "s/\${UPSTREAM}/$uport/" testdata/conformance/portal.template.json >"$work/portal.json"
"$work/bin/toolmesh" run --portal "$work/portal.json" --listen "127.0.0.1:$listen" \
  --extproc-listen "127.0.0.1:$ext" --xds-listen "127.0.0.1:$xds" --admin-listen "127.0.0.1:$admin" \
  --refresh-interval 5s >"$work/toolmesh.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$admin/readyz"

gw="http://localhost:$listen"
suite "legacy wire: conformance 0.1.16 -> toolmesh /mcp/conf" "$work/legacy" "$gw/mcp/conf" "$results/legacy"
suite "stateless wire: conformance 0.2.0-alpha.12 --spec-version 2026-07-28 -> toolmesh /mcp/conf" "$work/stateless" \
  "$gw/mcp/conf" "$results/stateless" --spec-version 2026-07-28
suite "legacy wire: conformance 0.1.16 -> toolmesh /mcp/fed-legacy (upstream /mcp)" "$work/legacy" \
  "$gw/mcp/fed-legacy" "$results/fed-legacy"
suite "stateless wire: conformance 0.2.0-alpha.12 --spec-version 2026-07-28 -> toolmesh /mcp/fed (upstream /stateless)" \
  "$work/stateless" "$gw/mcp/fed" "$results/fed-stateless" --spec-version 2026-07-28
summary "$results/legacy.txt"
summary "$results/stateless.txt"
summary "$results/fed-legacy.txt"
summary "$results/fed-stateless.txt"
echo "results: $results (legacy.txt, stateless.txt: native route /mcp/conf; fed-legacy.txt, fed-stateless.txt: federated routes)"
echo "logs: $work/toolmesh.log, $work/fixture.log, $work/upstream.log"
exit $status
