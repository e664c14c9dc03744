#!/bin/sh
# Builds the reference libcni driver from Debian's packaged sources, offline.
# Usage: build.sh OUTPUT
# Needs the Debian packages golang-go and golang-github-appc-cni-dev.
set -eu
out=${1:?usage: build.sh OUTPUT}
here=$(cd "$(dirname "$0")" && pwd)
export GOPATH=/usr/share/gocode GO111MODULE=off
export GOCACHE="${GOCACHE:-${TMPDIR:-/tmp}/rkt-go-cache}"
exec go build -o "$out" "$here/main.go"
