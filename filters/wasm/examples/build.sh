#!/bin/sh
# Builds the example WebAssembly filters with Go's own toolchain.
# Usage: filters/wasm/examples/build.sh [out-dir]   (default: ./bin/wasm)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-bin/wasm}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for dir in "$here"/*/; do
	name=$(basename "$dir")
	(cd "$dir" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -o "$out/$name.wasm" .)
	echo "$out/$name.wasm"
done
