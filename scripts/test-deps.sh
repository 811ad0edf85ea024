#!/bin/sh
# Locates what `make test` needs besides Go, and installs what is missing
# with apt-get when it can (root, or password-less sudo, on Debian/Ubuntu).
# Today: redis-server (the Redis snapshot store is tested against a real
# server, never a mock), shellcheck (the Compose smoke script is linted),
# chromium (the operator console is tested in a real headless browser),
# promtool (the Prometheus alert rules are checked and unit-tested; Debian
# ships it in the prometheus package, which also installs the Prometheus
# server as a service; the tests use only promtool), node and npm (the
# official MCP TypeScript SDK client drives the gateway under Node.js 18 or
# newer; the e2e tests run `npm ci` in e2e/tsclient and e2e/interop/*
# themselves).
# Exits non-zero with a message naming the package when it can neither find
# nor install something.
#
# No service starts on the host. Two of the packages ship one that Debian
# enables and starts on install: prometheus (prometheus.service, listening
# on 9090, toolmesh's default admin port) and redis-server
# (redis-server.service, on 6379). The tests use only the binaries and
# start their own servers on free 127.0.0.1 ports. So the install runs with
# a policy-rc.d that forbids starting services (unless the host has one
# already), and afterwards, where systemd runs, the units of the packages
# installed here are stopped, disabled and masked (undo with
# `systemctl unmask --now prometheus.service`, then enable it).
set -eu

# Pairs of command and Debian package.
deps="redis-server redis-server shellcheck shellcheck promtool prometheus node nodejs npm npm"
# CHROMIUM names a Chrome or Chromium binary that the browser test uses
# instead of the chromium on PATH.
if [ -z "${CHROMIUM:-}" ]; then
	deps="$deps chromium chromium"
fi

missing_cmds=""
missing_pkgs=""
# shellcheck disable=SC2086 # split into command/package pairs on purpose
set -- $deps
while [ $# -ge 2 ]; do
	if ! command -v "$1" >/dev/null 2>&1; then
		missing_cmds="$missing_cmds $1"
		missing_pkgs="$missing_pkgs $2"
	fi
	shift 2
done
# A Prometheus server installed earlier holds toolmesh's admin port.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus.service 2>/dev/null; then
	echo "note: prometheus.service is running and may hold 127.0.0.1:9090, toolmesh's default admin port; the tests need only promtool (systemctl disable --now prometheus.service frees it)" >&2
fi
[ -z "$missing_cmds" ] && exit 0

echo "make test needs:$missing_cmds (not on PATH); installing Debian package(s):$missing_pkgs"
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	fi
fi
# Units that packages installed here enable; see the top of this file.
services=""
for p in $missing_pkgs; do
	case "$p" in
	prometheus) services="$services prometheus.service" ;;
	redis-server) services="$services redis-server.service" ;;
	esac
done

# no_services_during_install puts a policy-rc.d in place that forbids
# invoke-rc.d to start anything (exit 101), unless the host has its own.
policy=/usr/sbin/policy-rc.d
own_policy=""
no_services_during_install() {
	[ -e "$policy" ] && return 0
	printf '#!/bin/sh\n# make test-deps: no service starts while test dependencies install\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 755 "$policy"
	own_policy=1
}
restore_policy() {
	if [ -n "$own_policy" ]; then
		$sudo rm -f "$policy"
	fi
}

# stop_services stops, disables and masks the units the packages enabled,
# where systemd runs (a container without it started nothing).
stop_services() {
	[ -n "$services" ] || return 0
	command -v systemctl >/dev/null 2>&1 || return 0
	case "$(systemctl is-system-running 2>/dev/null || true)" in
	"" | offline | unknown) return 0 ;;
	esac
	for u in $services; do
		echo "make test-deps: stopping, disabling and masking $u (the tests start their own servers)"
		# shellcheck disable=SC2086 # $sudo is empty or a command with flags
		$sudo systemctl disable --now "$u" >/dev/null 2>&1 || true
		# shellcheck disable=SC2086
		$sudo systemctl mask "$u" >/dev/null 2>&1 || true
	done
}

if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	install() { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing_pkgs; }
	no_services_during_install
	trap restore_policy EXIT
	# One retry: a mirror that is briefly unreachable should not fail a run.
	if install || { sleep 5 && install; }; then
		restore_policy
		stop_services
		for c in $missing_cmds; do
			command -v "$c" >/dev/null 2>&1 || { echo "installed$missing_pkgs but $c is still not on PATH" >&2; exit 1; }
		done
		exit 0
	fi
	restore_policy
	echo "apt-get could not install$missing_pkgs" >&2
fi
cat >&2 <<MSG
make test cannot run: missing$missing_cmds.
Install it and run make test again, for example:
  Debian/Ubuntu:  sudo apt-get install$missing_pkgs
  macOS:          brew install redis shellcheck prometheus node; brew install --cask chromium
(the tests start their own servers: do not start the redis or prometheus
services these install; 9090 is toolmesh's admin port), or put the binaries on PATH (for Chromium, or set CHROMIUM to a Chrome or
Chromium binary).
MSG
exit 1
