#!/bin/sh
# Writes a CycloneDX SBOM (JSON) of the Go modules linked into a toolmesh
# binary: their versions, package URLs, go.sum hashes and detected licenses.
#
#   scripts/sbom.sh BINARY OUTPUT [VERSION]
#
# `make sbom` runs it on bin/toolmesh, the Dockerfile on the image's binary,
# and a test in the deploy module checks its output against `go list -m`.
# cyclonedx-gomod (a CycloneDX project) comes from the Go module proxy at the
# version pinned here. Its `bin` mode reads the module list Go embeds in
# the binary, so the SBOM is of exactly what was built and needs no .git
# (the image build has none; `app` mode reads the version from git tags).
set -eu

CYCLONEDX_GOMOD_VERSION=v1.10.0

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: $0 BINARY OUTPUT [VERSION]" >&2
	exit 2
fi
bin=$1
out=$2
version=${3:-dev}
go=${GO:-go}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Built for the machine running it, whatever GOOS/GOARCH the binary has.
GOBIN=$tmp GOOS='' GOARCH='' "$go" install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION"
# The licenses are read from the module cache. `go mod download` in the
# main module fills it with every module of its build list, each checked
# against go.sum (a build alone leaves some without the metadata the
# generator asks for).
(cd "$(dirname "$0")/.." && "$go" mod download)
# The generator then looks each module up with its own `go mod download`,
# run outside the module, so without go.sum: GOSUMDB=off lets it read the
# modules verified above from the cache, and GOPROXY=off keeps it from
# fetching anything (it would look up toolmesh's own version, which is not
# published). Without both, every module but a few was "not in cache" and
# had no license.
GOPROXY=off GOSUMDB=off "$tmp/cyclonedx-gomod" bin -json -licenses -version "$version" -output "$out" "$bin"
