#!/usr/bin/env bash
# Installs what the tests need on Debian or Ubuntu (only the packages missing), then runs the
# whole test suite, `cargo test --workspace`; with arguments, `cargo test ARGS` instead, to
# run less (tools/test.sh -p rkt --test cli, one room's binary). .ci/run calls it without any.
#   containernetworking-plugins, iptables, iproute2: the real plugins and what they call;
#   golang-go, golang-github-appc-cni-dev: build the reference libcni driver the conformance
#     tests compare against; golang-go, gcc, libc6-dev also build Nomad v0.10.9 from the
#     shared source archive for the Nomad tests (crates/rkt/tests/nomad, cgo);
#   docker-registry, skopeo, umoci, busybox-static: the image tests build their images from
#     busybox-static and serve them on loopback;
#   dnsmasq-base: the DHCP server of the multi-host tests;
#   libapr1, libaprutil1, curl, util-linux, python3: critest's offline harness
#     (../shared/critest, run by crates/cri/tests/critest.rs) copies apache2's libraries
#     into its httpd image, builds its images with python3, checks its registry with curl
#     and uses util-linux's unshare, nsenter and ipcs.
# Installing needs root; so do many tests, which skip themselves without it.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test.sh: %s\n' "$*"; }

packages=(containernetworking-plugins iptables iproute2 golang-go golang-github-appc-cni-dev gcc libc6-dev
    docker-registry skopeo umoci busybox-static dnsmasq-base ca-certificates libapr1 libaprutil1
    curl util-linux python3)
missing=()
if command -v dpkg-query >/dev/null; then
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        say "missing packages: ${missing[*]}; install them as root (sudo $0), or the tests that need them fail"
    else
        say "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        # A fresh machine has no package lists yet (.ci/run updates them first).
        apt-get install -y --no-install-recommends "${missing[@]}" ||
            { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
    fi
fi

# crictl (cri-tools 1.26.1) for rkt-cri's tests, built offline from the shared archive with
# golang-go (about 90 s the first time, then nothing); without it those tests skip.
if [ -x ../shared/cri-tools/build ] && command -v go >/dev/null; then
    if ../shared/cri-tools/build /tmp/critest-bin >/dev/null; then
        export CRICTL=/tmp/critest-bin/crictl
    else
        say "could not build crictl: rkt-cri's crictl tests will skip"
    fi
fi

if [ $# -eq 0 ]; then
    set -- --workspace
fi
say "cargo test $*"
exec cargo test "$@"
