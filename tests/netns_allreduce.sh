#!/usr/bin/env bash
# A 4-rank TCP allreduce across four network namespaces ("hosts") joined by
# veth pairs to a bridge, as on a small cluster: each rank runs in its own
# namespace with its own address, the rendezvous is rank 0's address, and
# the TCP fabric listens on the namespace's veth interface.
#
# usage: tests/netns_allreduce.sh [path/to/sim]   (root; default target/release/sim)
# Skips (exit 0, with a message) where network namespaces cannot be made.
# Removes every namespace and link it made, on success, failure or Ctrl-C.
set -u
SIM="${1:-target/release/sim}"
[ -x "$SIM" ] || { echo "netns test: $SIM is not an executable (build it first)" >&2; exit 1; }
SIM="$(cd "$(dirname "$SIM")" && pwd)/$(basename "$SIM")"
N=4
PREFIX="rnt$$"          # unique per run: namespaces rnt<pid>h0.., bridge rnt<pid>br
HUB="${PREFIX}hub"
BR="${PREFIX}br"
NET=198.18.7           # RFC 2544 benchmarking block; exists only inside the namespaces
PIDS=()
OUT="$(mktemp -d)"

cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
  # Every process still inside a namespace (a rank whose wrapper was killed).
  for i in $(seq 0 $((N - 1))); do
    for p in $(ip netns pids "${PREFIX}h$i" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "${PREFIX}h$i" 2>/dev/null
  done
  ip netns del "$HUB" 2>/dev/null
  rm -rf "$OUT"
  true
}
trap cleanup EXIT INT TERM

if ! ip netns add "$HUB" 2>/dev/null; then
  echo "netns test: skipped: cannot create network namespaces here (needs root and iproute2)"
  exit 0
fi
ip -n "$HUB" link add "$BR" type bridge && ip -n "$HUB" link set "$BR" up && ip -n "$HUB" link set lo up || {
  echo "netns test: skipped: cannot create a bridge in a namespace"; exit 0; }
for i in $(seq 0 $((N - 1))); do
  ns="${PREFIX}h$i"
  ip netns add "$ns"
  # veth pair: eth0 inside the host namespace, p<i> on the hub's bridge.
  ip link add "${PREFIX}v$i" type veth peer name "${PREFIX}p$i"
  ip link set "${PREFIX}v$i" netns "$ns"
  ip link set "${PREFIX}p$i" netns "$HUB"
  ip -n "$ns" link set "${PREFIX}v$i" name eth0
  ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$HUB" link set "${PREFIX}p$i" master "$BR"
  ip -n "$HUB" link set "${PREFIX}p$i" up
done
# Reachability before the job: host 3 pings host 0 (where ping exists).
if command -v ping >/dev/null && ! ip netns exec "${PREFIX}h3" ping -c 1 -W 2 "$NET.1" >/dev/null 2>&1; then
  echo "netns test: FAILED: host 3 cannot reach host 0 over the bridge" >&2
  exit 1
fi

JOB=$((RANDOM * 32768 + RANDOM))
TOKEN="netns-$RANDOM$RANDOM"
for i in $(seq 0 $((N - 1))); do
  ip netns exec "${PREFIX}h$i" env -i PATH="$PATH" RANK="$i" WORLD_SIZE="$N" \
    MASTER_ADDR="$NET.1" MASTER_PORT=29517 REALNET_JOB_ID="$JOB" REALNET_TOKEN="$TOKEN" \
    timeout 120 "$SIM" bench --fabric tcp --interface eth0 --timeout-s 20 \
      -b 8 -e 2M -f 8 -n 5 -w 1 -c 1 --csv "$OUT/rank$i.csv" \
      </dev/null >"$OUT/rank$i.out" 2>"$OUT/rank$i.err" &
  PIDS+=("$!")
done
status=0
for i in $(seq 0 $((N - 1))); do
  wait "${PIDS[$i]}" || { echo "netns test: rank $i exited with status $?" >&2; status=1; }
done
PIDS=()
cat "$OUT/rank0.out"
if [ "$status" != 0 ]; then
  for i in $(seq 0 $((N - 1))); do sed "s/^/[rank $i] /" "$OUT/rank$i.err" >&2; done
  echo "netns test: FAILED" >&2
  exit 1
fi
# Every size checked on every rank: the #wrong column is 0 in every row, and
# the rows reached 2 MiB.
if ! grep -q "^ *2097152 " "$OUT/rank0.out"; then
  echo "netns test: FAILED: no 2 MiB row in rank 0's table" >&2; exit 1
fi
if awk '/^ *[0-9]/ && $9 != 0 { bad = 1 } END { exit !bad }' "$OUT/rank0.out"; then
  echo "netns test: FAILED: wrong results" >&2; exit 1
fi
echo "netns test: ok: 4 ranks in 4 namespaces ($NET.1-$NET.$N) ran a checked TCP allreduce"
