#!/usr/bin/env bash
# Smoke test of toolmesh behind real Envoy: starts this directory's Compose
# stack (Envoy at the version in .envoy-version, toolmesh, the demo Tool
# Services, Redis), then through Envoy on 127.0.0.1:10000
#   1. replays the contract examples of docs/contracts/examples with
#      e2e/cmd/replay, the runner of the e2e contract test (examples that need
#      the contract's own Tool Services are skipped, each with its reason);
#   2. probes a tools/call that runs into the Tool Service's timeout and a
#      2 MiB request body;
#   3. leaves the ADS stream idle (3 minutes by default), then checks that a
#      request still works and that Envoy's ADS connection was not reset
#      (Envoy admin /stats: control_plane.connected_state, and the xDS
#      cluster's upstream_cx_total, upstream_rq_total and
#      upstream_cx_destroy_remote_with_active_rq did not grow);
#   4. stops the demo Tool Services and probes a call to an unreachable one;
#   5. opens a change-notification stream of each era (a 2026-07-28
#      subscriptions/listen POST, which must start with its acknowledgement,
#      and a legacy GET, which must carry a keep-alive comment within 20s),
#      each cut by curl's --max-time.
# It needs Docker with Compose v2, Go and curl, and takes about five minutes
# after the images are built. README.md beside this file says more.
#
#   deploy/compose/smoke.sh [--dry-run] [--keep] [--idle SECONDS]
#
# --dry-run checks the inputs and starts nothing: the Envoy image in
# compose.yaml is the one in .envoy-version, `docker compose config` accepts
# the stack (skipped, with the reason, when Docker Compose is missing), the
# replay command builds, every example loads and is either selected or
# skipped with a reason, and the Portal has what the probes call.
# deploy/compose_smoke_test.go runs it. --keep leaves the stack running.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
compose_file="${SMOKE_COMPOSE_FILE:-${here}/compose.yaml}"
portal="${SMOKE_PORTAL:-${here}/portal.yaml}"
examples="${root}/docs/contracts/examples"

# What the smoke run talks to. deploy/compose_smoke_test.go checks each
# against compose.yaml, portal.yaml and envoy/gateway.yaml.
MCP_ADDR=127.0.0.1:10000     # Envoy's MCP listener, published by service envoy
XDS_ADMIN=127.0.0.1:9090     # toolmesh xds admin, published by service toolmesh
EXTPROC_ADMIN=127.0.0.1:9091 # toolmesh extproc admin, published by service toolmesh
ENVOY_SERVICE=envoy
ENVOY_ADMIN_PORT=9901        # Envoy's admin, on loopback inside its container
XDS_CLUSTER=toolmesh_xds     # the bootstrap's ADS cluster
ROUTE=core                   # the route the probes call
TOOLS_SERVICE=tools          # the service of the demo Tool Services

idle=180
dry_run=false
keep=false
while (($# > 0)); do
	case "$1" in
	--dry-run) dry_run=true ;;
	--keep) keep=true ;;
	--idle)
		[[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "smoke: --idle needs a number of seconds" >&2; exit 2; }
		idle="$2"
		shift
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
		exit 0
		;;
	*) echo "smoke: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

log() { printf 'smoke: %s\n' "$*"; }
fail() { printf 'smoke: FAIL: %s\n' "$*" >&2; exit 1; }

tmp="$(mktemp -d)"
cleanup_tmp() { rm -rf "${tmp}"; }
trap cleanup_tmp EXIT

# --- inputs -----------------------------------------------------------------

[[ -f "${compose_file}" ]] || fail "no compose file ${compose_file}"
[[ -f "${portal}" ]] || fail "no Portal ${portal}"
envoy_version="$(tr -d '[:space:]' <"${root}/.envoy-version")"
want_image="envoyproxy/envoy:${envoy_version}"
grep -Eq "^[[:space:]]+image:[[:space:]]*${want_image//./\\.}[[:space:]]*(#.*)?$" "${compose_file}" ||
	fail "${compose_file}: service ${ENVOY_SERVICE} does not run ${want_image}, the version in .envoy-version"
log "Envoy image ${want_image} (.envoy-version)"

compose=(docker compose -f "${compose_file}")
if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
	"${compose[@]}" config --quiet || fail "docker compose config rejects ${compose_file}"
	log "docker compose config: ok"
elif ${dry_run}; then
	log "skip docker compose config: $(command -v docker >/dev/null 2>&1 && echo 'the docker compose plugin (Compose v2) is not installed' || echo 'docker is not installed')"
else
	fail "Docker with the Compose v2 plugin is needed (docker compose version)"
fi

command -v go >/dev/null 2>&1 || fail "go is needed to build e2e/cmd/replay"
# e2e is its own Go module (e2e/go.mod).
(cd "${root}/e2e" && go build -o "${tmp}/replay" ./cmd/replay) || fail "go build ./cmd/replay in e2e/"
replay=("${tmp}/replay" --examples "${examples}" --portal "${portal}" --base "http://${MCP_ADDR}")
probes=ping,timeout,large-body,unreachable
"${replay[@]}" --dry-run || fail "the contract examples do not load or select"
"${replay[@]}" --dry-run --probe "${probes}" || fail "the Portal lacks what the probes call"
log "targets mcp=${MCP_ADDR} xds-admin=${XDS_ADMIN} extproc-admin=${EXTPROC_ADMIN} envoy-admin=${ENVOY_SERVICE}:${ENVOY_ADMIN_PORT} xds-cluster=${XDS_CLUSTER} route=${ROUTE} tools-service=${TOOLS_SERVICE}"

if ${dry_run}; then
	log "dry run passed; nothing started"
	exit 0
fi

# --- the stack --------------------------------------------------------------

command -v curl >/dev/null 2>&1 || fail "curl is needed"
cleanup() {
	if ${keep}; then
		log "--keep: the stack keeps running; stop it with: docker compose -f ${compose_file} down"
	else
		"${compose[@]}" down --volumes --remove-orphans >/dev/null 2>&1 || true
	fi
	cleanup_tmp
}
trap cleanup EXIT

log "starting the stack (docker compose up --build)"
"${compose[@]}" up --build --detach --wait --wait-timeout 300 ||
	{ "${compose[@]}" ps; "${compose[@]}" logs --tail 50; fail "the stack did not start"; }

# wait_for DESCRIPTION SECONDS COMMAND...: retries COMMAND every second.
wait_for() {
	local what="$1" limit="$2"
	shift 2
	local deadline=$((SECONDS + limit))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || { "${compose[@]}" logs --tail 50; fail "${what} after ${limit}s"; }
		sleep 1
	done
}
wait_for "toolmesh xds is not ready" 120 curl -fsS "http://${XDS_ADMIN}/readyz"
wait_for "toolmesh extproc is not ready" 120 curl -fsS "http://${EXTPROC_ADMIN}/readyz"
wait_for "Envoy does not answer a ping on /mcp/${ROUTE}" 120 "${replay[@]}" --probe ping
log "stack ready"

# envoy_stats prints Envoy's admin /stats answer, as the raw HTTP response
# (replay --ads-before/--ads-after read it). The admin interface listens on loopback
# inside the container and the envoyproxy/envoy image has bash but no curl
# (envoyproxy/envoy ci/Dockerfile-envoy, stage envoy: Ubuntu with
# ca-certificates only), so bash's /dev/tcp sends the request: HTTP/1.1,
# since Envoy answers HTTP/1.0 with 426 unless accept_http_10 is set.
# [verify] on a v1.40 image: the Dockerfile read was not the v1.40 one.
envoy_stats() {
	"${compose[@]}" exec -T "${ENVOY_SERVICE}" bash -c \
		"exec 3<>/dev/tcp/127.0.0.1/${ENVOY_ADMIN_PORT} && printf 'GET /stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3 && cat <&3"
}

# --- 1. the contract examples -----------------------------------------------

log "replaying the contract examples through Envoy"
"${replay[@]}" || fail "contract examples against real Envoy"

# --- 2. timeout and large body ----------------------------------------------

log "probing a call past the Tool Service's timeout and a 2 MiB body"
"${replay[@]}" --probe timeout,large-body,ping || fail "probes"

# --- 3. idle ADS stream -----------------------------------------------------

envoy_stats >"${tmp}/stats.before" || fail "read Envoy's admin /stats"
"${replay[@]}" --ads-before "${tmp}/stats.before" --ads-after "${tmp}/stats.before" --xds-cluster "${XDS_CLUSTER}" >/dev/null ||
	fail "Envoy is not connected to the control plane (control_plane.connected_state), or /stats lacks cluster ${XDS_CLUSTER}"
log "leaving the ADS stream idle for ${idle}s"
sleep "${idle}"
"${replay[@]}" --probe ping || fail "a request after ${idle}s idle"
envoy_stats >"${tmp}/stats.after" || fail "read Envoy's admin /stats"
"${replay[@]}" --ads-before "${tmp}/stats.before" --ads-after "${tmp}/stats.after" --xds-cluster "${XDS_CLUSTER}" ||
	fail "the ADS connection did not survive ${idle}s idle"

# --- 4. unreachable Tool Service --------------------------------------------

log "stopping ${TOOLS_SERVICE} and calling one of its tools"
"${compose[@]}" stop "${TOOLS_SERVICE}" >/dev/null
"${replay[@]}" --probe unreachable || fail "a call to an unreachable Tool Service"
"${compose[@]}" start "${TOOLS_SERVICE}" >/dev/null

# --- 5. change-notification streams ------------------------------------------

# open_stream NAME SECONDS CURL_ARGS...: opens a stream on /mcp/ROUTE through
# Envoy and keeps what arrives in SECONDS. A stream does not end by itself,
# so curl's --max-time (exit 28) is the expected end.
open_stream() {
	local name="$1" seconds="$2" rc=0
	shift 2
	curl -sS -N --max-time "${seconds}" -D "${tmp}/${name}.headers" -o "${tmp}/${name}.body" \
		"$@" "http://${MCP_ADDR}/mcp/${ROUTE}" 2>"${tmp}/${name}.err" || rc=$?
	((rc == 0 || rc == 28)) || fail "${name} stream: curl exit ${rc}: $(cat "${tmp}/${name}.err")"
	grep -Eq '^HTTP/[0-9.]+ 200' "${tmp}/${name}.headers" ||
		fail "${name} stream: $(head -n 1 "${tmp}/${name}.headers"), want 200 (is notificationsAddresses set?)"
	grep -iq '^content-type: text/event-stream' "${tmp}/${name}.headers" || fail "${name} stream: not text/event-stream"
}
log "opening a subscriptions/listen stream (2026-07-28) on /mcp/${ROUTE}"
open_stream listen 5 -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: subscriptions/listen' \
	--data '{"jsonrpc":"2.0","id":"smoke","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}'
grep -q 'notifications/subscriptions/acknowledged' "${tmp}/listen.body" ||
	fail "the subscriptions/listen stream did not start with its acknowledgement: $(head -c 300 "${tmp}/listen.body")"
log "opening a legacy GET stream on /mcp/${ROUTE}; its first bytes are a keep-alive comment (notificationsKeepAlive, 15s)"
open_stream legacy 20 -H 'Accept: text/event-stream' -H 'MCP-Protocol-Version: 2025-11-25'
grep -q '^:' "${tmp}/legacy.body" || fail "the legacy GET stream carried no keep-alive comment in 20s"

log "passed: contract examples, timeout, 2 MiB body, ${idle}s idle ADS stream, unreachable Tool Service, change-notification streams against ${want_image}"
