#!/bin/sh
# Builds criclient (bench/criclient/main.go), offline, inside cri-tools 1.26.1's source tree
# against its vendor directory: the same gRPC, CRI API and client-go as crictl. Does nothing
# when OUTPUT is newer than main.go.
# Usage: build.sh OUTPUT
# Needs golang-go (Go 1.19 or newer) and ../shared/cri-tools/cri-tools-1.26.1.tar.gz
# (RKT_SHARED_DIR overrides ../shared).
set -eu
out=${1:?usage: build.sh OUTPUT}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -x "$out" ] && [ ! "$here/main.go" -nt "$out" ]; then
  exit 0
fi
command -v go >/dev/null 2>&1 || {
  echo "build.sh: go not found: install golang-go (Go 1.19 or newer) to build criclient, the one-process CRI client of bench scenarios 11 to 13 and bench/cri_streaming.sh" >&2
  exit 1
}
tarball=${RKT_SHARED_DIR:-$repo/../shared}/cri-tools/cri-tools-1.26.1.tar.gz
[ -f "$tarball" ] || {
  echo "build.sh: $tarball not found: criclient builds against cri-tools 1.26.1's vendored sources (set RKT_SHARED_DIR to the directory holding cri-tools/)" >&2
  exit 1
}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -xzf "$tarball" -C "$src"
mkdir -p "$src/cri-tools-1.26.1/cmd/criclient" "$(dirname "$out")"
cp "$here/main.go" "$src/cri-tools-1.26.1/cmd/criclient/"
case $out in /*) abs=$out ;; *) abs=$(pwd)/$out ;; esac
cd "$src/cri-tools-1.26.1"
export GOCACHE="${GOCACHE:-${TMPDIR:-/tmp}/rkt-go-cache}"
env GOFLAGS=-mod=vendor GOPROXY=off go build -o "$abs.tmp" ./cmd/criclient
mv "$abs.tmp" "$abs"
