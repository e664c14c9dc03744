#!/bin/bash
# CRI streaming, rkt-cri beside containerd 1.6 with the same client and images: the round
# trip of `crictl exec CID true` (streaming, SPDY) and `crictl exec -s` (ExecSync), crictl's
# own floor (`crictl version`), and port-forward throughput (curl of a 256 MiB file from
# nginx through `crictl port-forward`), all inside the offline critest harness's network
# namespace (../shared/critest: its registry, images and containerd configuration).
# Run as root: bench/cri_streaming.sh (N=20 runs per kind, each timed on its own; the
# medians are printed; the release rkt-cri is built). Needs bash 5 ($EPOCHREALTIME).
# Also the same exec round trip without crictl's process start: `criclient exec-rtt`
# (bench/criclient, Go, the gRPC, CRI API and client-go of crictl, built offline inside
# cri-tools' source tree by bench/criclient/build.sh) repeats Exec + the SPDY stream in one
# process and prints the median.
# Any command that fails ends the script with a message (a failed run must not be timed as
# a fast one); the runtimes and the harness are stopped and cleaned up on every exit.
# A measurement script, not a scenario of rkt-bench (whose scenarios 11 to 13 start a
# containerd of their own): it uses the critest harness's fixed paths (/tmp/rt.sock,
# /tmp/ctd-*), so it must not run while critest or crates/cri/tests/critest.rs does.
set -u
die() { echo "cri_streaming.sh: $*" >&2; exit 1; }
repo=$(cd "$(dirname "$0")/.." && pwd)
RKT_CRI=${RKT_CRI:-$repo/target/release/rkt-cri}
[ -n "${RKT_CRI_NO_BUILD:-}" ] || (cd "$repo" && cargo build --release -q -p rkt-cri) || die "building rkt-cri failed"
cd "${RKT_SHARED_DIR:-$repo/../shared}/critest" || die "no critest harness"
CRICTL=/tmp/critest-bin/crictl
N=${N:-20}
CRICLIENT=$repo/target/bench/criclient
RKT_SHARED_DIR=$(cd .. && pwd) sh "$repo/bench/criclient/build.sh" "$CRICLIENT" || die "building criclient failed"

W=$(mktemp -d)
RKT=
PF=
cleanup() {
  [ -z "$PF" ] || kill "$PF" 2>/dev/null
  [ -z "$RKT" ] || { kill "$RKT" 2>/dev/null; wait "$RKT"; }
  ./containerd.sh stop >/dev/null 2>&1
  ./cleanup.sh >/dev/null 2>&1
  rm -rf "$W"
}
trap cleanup EXIT

# median_ms CMD...: runs CMD N times, each timed on its own, and prints the median in
# milliseconds (the mean of the middle two for an even N); fails at the first run that
# fails.
median_ms() {
  for i in $(seq "$N"); do
    t0=$EPOCHREALTIME
    "$@" >/dev/null || return 1
    t1=$EPOCHREALTIME
    echo "$t0 $t1"
  done >"$W/times"
  # Microseconds: the decimal point taken out of each time.
  awk '{ gsub(/[.,]/, ""); print $2 - $1 }' "$W/times" | sort -n |
    awk '{ t[NR] = $1 } END { m = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2; printf "%.1f\n", m / 1000 }'
}

./registry.sh start >/dev/null || die "registry.sh start failed"
./netns.sh exec python3 images.py check >/dev/null 2>&1 || { python3 images.py build && ./netns.sh exec python3 images.py push; } || die "the harness's images could not be built and pushed"
./containerd.sh config >/dev/null || die "containerd.sh config failed"
./containerd.sh start >/dev/null || die "containerd.sh start failed"
./netns.sh exec "$RKT_CRI" --listen=unix:///tmp/rt.sock --dir=/tmp/ctd-rkt --local-config=/tmp/ctd-etc --net-conf-dir=/tmp/ctd-etc/net.d >/dev/null 2>/dev/null &
RKT=$!
sleep 2
kill -0 "$RKT" 2>/dev/null || die "rkt-cri exited at start"
echo '{"metadata":{"name":"m","namespace":"bench","uid":"m1"},"linux":{}}' > "$W/pod.json"
echo '{"metadata":{"name":"b"},"image":{"image":"registry.k8s.io/e2e-test-images/busybox:1.29-2"},"command":["sleep","100000"],"linux":{}}' > "$W/b.json"
echo '{"metadata":{"name":"n"},"image":{"image":"registry.k8s.io/e2e-test-images/nginx:1.14-2"},"linux":{}}' > "$W/n.json"
for ep in unix:///tmp/ctd-run/containerd.sock unix:///tmp/rt.sock; do
  C="./netns.sh exec $CRICTL --runtime-endpoint $ep --image-endpoint $ep --timeout 60s"
  for image in busybox:1.29-2 nginx:1.14-2; do
    $C pull "registry.k8s.io/e2e-test-images/$image" >/dev/null || die "pull $image from $ep failed"
  done
  P=$($C runp "$W/pod.json") || die "runp against $ep failed"
  B=$($C create "$P" "$W/b.json" "$W/pod.json") || die "create busybox against $ep failed"
  $C start "$B" >/dev/null || die "start busybox against $ep failed"
  NG=$($C create "$P" "$W/n.json" "$W/pod.json") || die "create nginx against $ep failed"
  $C start "$NG" >/dev/null || die "start nginx against $ep failed"
  sleep 1
  $C exec -s "$NG" sh -c 'dd if=/dev/urandom of=/usr/share/nginx/html/big bs=1M count=256 2>/dev/null' >/dev/null || die "writing nginx's file against $ep failed"
  $C exec "$B" true >/dev/null || die "exec (warm-up) against $ep failed"
  ex=$(median_ms $C exec "$B" true) || die "exec against $ep failed"
  exs=$(median_ms $C exec -s "$B" true) || die "exec -s against $ep failed"
  ver=$(median_ms $C version) || die "crictl version against $ep failed"
  one=$(./netns.sh exec "$CRICLIENT" exec-rtt -endpoint "$ep" -container "$B" -n "$N") || die "criclient exec-rtt against $ep failed"
  ./netns.sh exec "$CRICTL" --runtime-endpoint "$ep" port-forward "$P" 18080:80 >/dev/null 2>&1 &
  PF=$!
  sleep 2
  kill -0 "$PF" 2>/dev/null || die "crictl port-forward against $ep exited"
  speeds=""
  for i in 1 2 3; do
    s=$(./netns.sh exec curl -sf -o /dev/null -w '%{speed_download}' http://127.0.0.1:18080/big) || die "curl through port-forward against $ep failed"
    speeds="$speeds $(( ${s%.*} / 1048576 ))"
  done
  kill "$PF"; wait "$PF" 2>/dev/null; PF=
  echo "$ep (medians of $N): exec true (streaming) ${ex} ms, exec -s true ${exs} ms, crictl version ${ver} ms (client floor), exec true in one client process ${one} ms; port-forward MiB/s:$speeds"
  $C rmp -f "$P" >/dev/null || die "rmp against $ep failed"
done
