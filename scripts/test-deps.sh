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
# newer; the e2e test runs `npm ci` in e2e/tsclient itself).
# Exits non-zero with a message naming the package when it can neither find
# nor install something.
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
[ -z "$missing_cmds" ] && exit 0

echo "make test needs:$missing_cmds (not on PATH); installing Debian package(s):$missing_pkgs"
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	install() { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing_pkgs; }
	# One retry: a mirror that is briefly unreachable should not fail a run.
	if install || { sleep 5 && install; }; then
		for c in $missing_cmds; do
			command -v "$c" >/dev/null 2>&1 || { echo "installed$missing_pkgs but $c is still not on PATH" >&2; exit 1; }
		done
		exit 0
	fi
	echo "apt-get could not install$missing_pkgs" >&2
fi
cat >&2 <<MSG
make test cannot run: missing$missing_cmds.
Install it and run make test again, for example:
  Debian/Ubuntu:  sudo apt-get install$missing_pkgs
  macOS:          brew install redis shellcheck prometheus node; brew install --cask chromium
or put the binaries on PATH (for Chromium, or set CHROMIUM to a Chrome or
Chromium binary).
MSG
exit 1
