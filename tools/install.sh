#!/usr/bin/env bash
# Installs rkt from this checkout on Debian or Ubuntu, then runs a first pod:
#   1. the packages rkt needs (containernetworking-plugins: the CNI plugins the built-in
#      networks use; iptables, iproute2: what the plugins and rkt call; build-essential:
#      the C linker the Rust build needs), only those missing;
#   2. checks for a Rust toolchain on PATH recent enough for the workspace (its
#      rust-version), and says how to get one if there is none;
#   3. builds rkt (release) and installs it in $PREFIX/bin (default /usr/local), with its
#      bash completion and manual pages;
#   4. runs a pod on the built-in `default` network that prints its address, then removes it.
# It needs root: apt-get installs packages, rkt goes to /usr/local, and a pod needs root
# (network namespaces, CNI plugins, iptables rules). Running it again redoes only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr/local}
say() { printf 'install.sh: %s\n' "$*"; }
fail() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
    fail "needs root (apt-get, $PREFIX, and running a pod need it): sudo $0"
fi
say "installs what rkt needs, builds and installs rkt in $PREFIX, then runs a first pod" \
    "(as root: apt-get, $PREFIX and a pod's namespaces and firewall rules need it)"

# 1. Packages.
packages=(containernetworking-plugins iptables iproute2 build-essential ca-certificates)
if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
    missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "packages: all there (${packages[*]})"
    else
        say "packages: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends "${missing[@]}"
    fi
else
    say "packages: no apt-get here; install yourself: the CNI plugins (in /usr/lib/cni," \
        "/usr/libexec/cni or /opt/cni/bin), iptables, iproute2, a C toolchain"
fi

# 2. Rust, the workspace's rust-version or later.
need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -n1)
how="get a current one with rustup (https://rustup.rs), as the user who builds: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y && . \"\$HOME/.cargo/env\"; then run this script again, under sudo with your PATH: sudo env PATH=\"\$PATH\" $0"
if ! command -v cargo >/dev/null || ! command -v rustc >/dev/null; then
    fail "rust: no cargo and rustc on PATH; $how"
fi
have=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$need" "${have%%-*}" | sort -V | head -n1)" != "$need" ]; then
    fail "rust: rustc $have is older than the workspace's rust-version $need (Debian 12's own rustc is 1.63); $how"
fi
say "rust: rustc $have (the workspace needs $need or later)"

# 3. Build and install.
say "building rkt (cargo build --release --locked -p rkt)"
cargo build --release --locked -p rkt
install -d "$PREFIX/bin" "$PREFIX/share/man/man1" /etc/bash_completion.d
if cmp -s target/release/rkt "$PREFIX/bin/rkt"; then
    say "installed: $PREFIX/bin/rkt is already this build"
else
    install -m 0755 target/release/rkt "$PREFIX/bin/rkt"
    say "installed: $PREFIX/bin/rkt"
fi
"$PREFIX/bin/rkt" completion bash >/etc/bash_completion.d/rkt
"$PREFIX/bin/rkt" man "$PREFIX/share/man/man1" >/dev/null
say "installed: /etc/bash_completion.d/rkt, manual pages in $PREFIX/share/man/man1"

# 4. A first pod on the built-in default network.
say "a first pod: rkt run --net=default -- ip -4 -o addr show eth0"
uuid_file=$(mktemp)
trap 'rm -f "$uuid_file"' EXIT
if ! "$PREFIX/bin/rkt" run --net=default --uuid-file-save="$uuid_file" -- ip -4 -o addr show eth0; then
    fail "the first pod failed (above); docs/troubleshooting.md says what to look at"
fi
"$PREFIX/bin/rkt" rm "$(cat "$uuid_file")" >/dev/null
say "done: rkt $("$PREFIX/bin/rkt" version | head -n1 | awk '{print $3}') works; next: rkt --help, man rkt, README.md"
