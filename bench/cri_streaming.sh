#!/bin/bash
# CRI streaming, rkt-cri beside containerd 1.6 with the same client and images: the round
# trip of `crictl exec CID true` (streaming, SPDY) and `crictl exec -s` (ExecSync), crictl's
# own floor (`crictl version`), and port-forward throughput (curl of a 256 MiB file from
# nginx through `crictl port-forward`), all inside the offline critest harness's network
# namespace (../shared/critest: its registry, images and containerd configuration).
# Run as root: bench/cri_streaming.sh (N=20 execs per kind; the release rkt-cri is built).
# Also the same exec round trip without crictl's process start: `criclient exec-rtt`
# (bench/criclient, Go, the gRPC, CRI API and client-go of crictl, built offline inside
# cri-tools' source tree by bench/criclient/build.sh) repeats Exec + the SPDY stream in one
# process and prints the median.
# A measurement script, not a scenario of rkt-bench (whose scenarios 11 to 13 start a
# containerd of their own): it uses the critest harness's fixed paths (/tmp/rt.sock,
# /tmp/ctd-*), so it must not run while critest or crates/cri/tests/critest.rs does.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
RKT_CRI=${RKT_CRI:-$repo/target/release/rkt-cri}
[ -n "${RKT_CRI_NO_BUILD:-}" ] || (cd "$repo" && cargo build --release -q -p rkt-cri) || exit 1
cd "${RKT_SHARED_DIR:-$repo/../shared}/critest" || exit 1
CRICTL=/tmp/critest-bin/crictl
N=${N:-20}
CRICLIENT=$repo/target/bench/criclient
RKT_SHARED_DIR=$(cd .. && pwd) sh "$repo/bench/criclient/build.sh" "$CRICLIENT" || exit 1
./registry.sh start >/dev/null && { ./netns.sh exec python3 images.py check >/dev/null 2>&1 || { python3 images.py build && ./netns.sh exec python3 images.py push; }; } && ./containerd.sh config >/dev/null || exit 1
./containerd.sh start >/dev/null || exit 1
./netns.sh exec $RKT_CRI --listen=unix:///tmp/rt.sock --dir=/tmp/ctd-rkt --local-config=/tmp/ctd-etc --net-conf-dir=/tmp/ctd-etc/net.d >/dev/null 2>/dev/null &
RKT=$!
sleep 2
W=$(mktemp -d)
echo '{"metadata":{"name":"m","namespace":"bench","uid":"m1"},"linux":{}}' > $W/pod.json
echo '{"metadata":{"name":"b"},"image":{"image":"registry.k8s.io/e2e-test-images/busybox:1.29-2"},"command":["sleep","100000"],"linux":{}}' > $W/b.json
echo '{"metadata":{"name":"n"},"image":{"image":"registry.k8s.io/e2e-test-images/nginx:1.14-2"},"linux":{}}' > $W/n.json
for ep in unix:///tmp/ctd-run/containerd.sock unix:///tmp/rt.sock; do
  C="./netns.sh exec $CRICTL --runtime-endpoint $ep --image-endpoint $ep --timeout 60s"
  $C pull registry.k8s.io/e2e-test-images/busybox:1.29-2 >/dev/null
  $C pull registry.k8s.io/e2e-test-images/nginx:1.14-2 >/dev/null
  P=$($C runp $W/pod.json)
  B=$($C create $P $W/b.json $W/pod.json); $C start $B >/dev/null
  NG=$($C create $P $W/n.json $W/pod.json); $C start $NG >/dev/null
  sleep 1
  $C exec -s $NG sh -c 'dd if=/dev/urandom of=/usr/share/nginx/html/big bs=1M count=256 2>/dev/null' >/dev/null
  $C exec $B true >/dev/null   # warm
  t0=$(date +%s%N); for i in $(seq $N); do $C exec $B true >/dev/null; done; t1=$(date +%s%N)
  ex=$(( (t1-t0)/N/1000000 ))
  t0=$(date +%s%N); for i in $(seq $N); do $C exec -s $B true >/dev/null; done; t1=$(date +%s%N)
  exs=$(( (t1-t0)/N/1000000 ))
  t0=$(date +%s%N); for i in $(seq $N); do $C version >/dev/null; done; t1=$(date +%s%N)
  ver=$(( (t1-t0)/N/1000000 ))
  one=$(./netns.sh exec "$CRICLIENT" exec-rtt -endpoint "$ep" -container "$B" -n "$N")
  ./netns.sh exec $CRICTL --runtime-endpoint $ep port-forward $P 18080:80 >/dev/null 2>&1 &
  PF=$!
  sleep 2
  speeds=""
  for i in 1 2 3; do
    s=$(./netns.sh exec curl -s -o /dev/null -w '%{speed_download}' http://127.0.0.1:18080/big)
    speeds="$speeds $(( ${s%.*} / 1048576 ))"
  done
  kill $PF; wait $PF 2>/dev/null
  echo "$ep: exec true (streaming) ${ex} ms, exec -s true ${exs} ms, crictl version ${ver} ms (client floor), exec true in one client process (median) ${one} ms; port-forward MiB/s:$speeds"
  $C rmp -f $P >/dev/null
done
kill $RKT; wait $RKT
./containerd.sh stop >/dev/null
./cleanup.sh >/dev/null 2>&1
rm -rf $W
