#!/usr/bin/env bash
# `make build`: builds bin/toolmesh and says what it is doing. The first
# build downloads the modules and compiles a few hundred packages, which on
# 2 cores takes minutes; later builds take seconds. So it prints the phases
# and, while compiling, a line every 25 packages.
#
#   scripts/build.sh OUTPUT VERSION
#
# Environment: GO (default go).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
GO="${GO:-go}"
out="$1"
version="$2"
start=$(date +%s)

if ! "$GO" list -deps ./cmd/toolmesh >/dev/null 2>&1; then
	echo "downloading Go modules into $("$GO" env GOMODCACHE) (first build only; about 750 MB)"
	"$GO" mod download || exit 1
	echo "downloaded in $(($(date +%s) - start))s"
fi
total=$("$GO" list -deps ./cmd/toolmesh | wc -l)
echo "building $out: $total packages; a first build compiles them all (about 3 minutes of CPU time; on a loaded 2-core machine 10 to 20 minutes), later ones only what changed"
# go build -v names each package as it compiles it; everything else it
# prints (compile errors) passes through.
pkg='^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~+-]+)*$'
"$GO" build -v -trimpath -ldflags "-X github.com/toolmesh/toolmesh/internal/app.version=$version" -o "$out" ./cmd/toolmesh 2>&1 | {
	n=0
	while IFS= read -r line; do
		if [[ $line =~ $pkg ]]; then
			n=$((n + 1))
			if [ $((n % 25)) -eq 0 ]; then
				echo "  compiled $n of up to $total packages ($(($(date +%s) - start))s)"
			fi
		else
			printf '%s\n' "$line"
		fi
	done
	if [ "$n" -gt 0 ]; then echo "  compiled $n packages"; fi
}
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ]; then
	echo "built $out in $(($(date +%s) - start))s"
fi
exit "$rc"
