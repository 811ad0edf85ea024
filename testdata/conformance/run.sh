#!/usr/bin/env bash
# Runs the official MCP conformance suite against `toolmesh run`, with the
# shared fixture Tool Service behind the route /mcp/conf, in both protocol
# eras:
#   legacy wire:    @modelcontextprotocol/conformance@0.1.16
#   stateless wire: @modelcontextprotocol/conformance@0.2.0-alpha.12 --spec-version 2026-07-28
# Node 22 comes from the npm package node@22. Everything is installed under
# .conformance/ (git-ignored). Results land in .conformance/results/.
# Usage: testdata/conformance/run.sh [path/to/fixture_toolsvc.py]
set -euo pipefail
top=$(git rev-parse --show-toplevel)
cd "$top"
fixture=${1:-$top/../shared/conformance/fixture_toolsvc.py}
work=$top/.conformance
mkdir -p "$work/legacy" "$work/stateless" "$work/results"

install() { # dir, packages...
  local dir=$1; shift
  if [ ! -x "$dir/node_modules/.bin/conformance" ]; then
    (cd "$dir" && [ -f package.json ] || (cd "$dir" && npm init -y >/dev/null))
    (cd "$dir" && npm install --no-audit --no-fund "$@" >/dev/null)
  fi
}
install "$work/legacy" node@22 @modelcontextprotocol/conformance@0.1.16
install "$work/stateless" node@22 @modelcontextprotocol/conformance@0.2.0-alpha.12

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
fport=$(free_port); listen=$(free_port); ext=$(free_port); xds=$(free_port); admin=$(free_port)

go build -o "$work/toolmesh" ./cmd/toolmesh
python3 "$fixture" "$fport" >"$work/fixture.log" 2>&1 &
fixture_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$fport/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
sed "s/\${FIXTURE}/$fport/" testdata/conformance/portal.template.json >"$work/portal.json"
"$work/toolmesh" run --portal "$work/portal.json" --listen "127.0.0.1:$listen" \
  --extproc-listen "127.0.0.1:$ext" --xds-listen "127.0.0.1:$xds" --admin-listen "127.0.0.1:$admin" \
  --refresh-interval 5s >"$work/toolmesh.log" 2>&1 &
gw_pid=$!
trap 'kill $gw_pid $fixture_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null

url="http://localhost:$listen/mcp/conf"
status=0
echo "== legacy wire: conformance 0.1.16 (suite: all) =="
(cd "$work/legacy" && PATH="$work/legacy/node_modules/.bin:$PATH" \
  npx conformance server --url "$url" --suite all -o "$work/results/legacy" 2>&1 | tee "$work/results/legacy.txt") || status=1
echo "== stateless wire: conformance 0.2.0-alpha.12 --spec-version 2026-07-28 =="
(cd "$work/stateless" && PATH="$work/stateless/node_modules/.bin:$PATH" \
  npx conformance server --url "$url" --suite all --spec-version 2026-07-28 -o "$work/results/stateless" 2>&1 | tee "$work/results/stateless.txt") || status=1
echo "results: $work/results (legacy.txt, stateless.txt); toolmesh log: $work/toolmesh.log"
exit $status
