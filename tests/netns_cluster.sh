# A small cluster of network namespaces ("hosts"), sourced by
# tests/netns_validate.sh and tools/validate_netns.sh (root; iproute2).
#
#   cluster_up N [RACK_RATE]   N hosts h0..h(N-1), each with eth0 at $NET.(i+1)
#                              on a bridge in a hub namespace. With RACK_RATE
#                              (a tc rate such as 200mbit) the hosts form two
#                              "racks", h0..h(N/2-1) and the rest, on two
#                              bridges joined by one veth pair whose two ends
#                              are shaped by tc tbf at RACK_RATE: the
#                              inter-rack bottleneck.
#   cluster_run OUTDIR SIM ARGS...   runs `SIM ARGS...` in every host as one job
#                              (torchrun's RANK, WORLD_SIZE, MASTER_ADDR,
#                              MASTER_PORT; rank 0's address is the
#                              rendezvous), rank i's stdout and stderr in
#                              OUTDIR/rank<i>.out|err; returns non-zero if any
#                              rank failed.
#   cluster_loss PERCENT       drops that share of every host's outgoing packets
#                              (a classic BPF filter, direct action, on eth0's
#                              clsact egress: the packet is dropped when the
#                              kernel's per-packet random number is below
#                              PERCENT/100 of 2^32; this kernel has no netem).
#                              Returns 3 where the filter cannot be attached.
#   cluster_down               removes every namespace and link (also on exit).
#
# Returns 3 from cluster_up where namespaces cannot be made (callers skip).

NET=198.18.9            # RFC 2544 benchmarking block; exists only inside the namespaces
CLUSTER_PREFIX="rnc$$"
CLUSTER_N=0
CLUSTER_PIDS=()
CLUSTER_PORT=29611

cluster_down() {
  for p in "${CLUSTER_PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
  CLUSTER_PIDS=()
  for i in $(seq 0 $((CLUSTER_N - 1))); do
    for p in $(ip netns pids "${CLUSTER_PREFIX}h$i" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "${CLUSTER_PREFIX}h$i" 2>/dev/null
  done
  ip netns del "${CLUSTER_PREFIX}hub" 2>/dev/null
  CLUSTER_N=0
  true
}

cluster_up() {
  local n=$1 rate=${2:-} hub="${CLUSTER_PREFIX}hub"
  CLUSTER_N=$n
  ip netns add "$hub" 2>/dev/null || return 3
  ip -n "$hub" link set lo up
  ip -n "$hub" link add br0 type bridge || return 3
  ip -n "$hub" link set br0 up
  local half=$n
  if [ -n "$rate" ]; then
    half=$((n / 2))
    ip -n "$hub" link add br1 type bridge
    ip -n "$hub" link set br1 up
    # The inter-rack link: a veth pair between the two bridges, each
    # direction shaped by a token bucket at $rate.
    ip -n "$hub" link add up0 type veth peer name up1
    ip -n "$hub" link set up0 master br0
    ip -n "$hub" link set up1 master br1
    ip -n "$hub" link set up0 up
    ip -n "$hub" link set up1 up
    for end in up0 up1; do
      ip netns exec "$hub" tc qdisc add dev "$end" root tbf rate "$rate" burst 64kb latency 50ms || return 3
    done
  fi
  for i in $(seq 0 $((n - 1))); do
    local ns="${CLUSTER_PREFIX}h$i" bridge=br0
    [ "$i" -ge "$half" ] && bridge=br1
    ip netns add "$ns"
    ip link add "${CLUSTER_PREFIX}v$i" type veth peer name "${CLUSTER_PREFIX}p$i"
    ip link set "${CLUSTER_PREFIX}v$i" netns "$ns"
    ip link set "${CLUSTER_PREFIX}p$i" netns "$hub"
    ip -n "$ns" link set "${CLUSTER_PREFIX}v$i" name eth0
    ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$hub" link set "${CLUSTER_PREFIX}p$i" master "$bridge"
    ip -n "$hub" link set "${CLUSTER_PREFIX}p$i" up
  done
  # Reachability before any job: the last host pings the first.
  if command -v ping >/dev/null; then
    ip netns exec "${CLUSTER_PREFIX}h$((n - 1))" ping -c 1 -W 3 "$NET.1" >/dev/null 2>&1 || return 1
  fi
}

cluster_loss() {
  # ld [SKF_AD_OFF + SKF_AD_RANDOM]; jge #threshold -> pass; ret TC_ACT_SHOT; ret TC_ACT_OK
  local threshold
  threshold=$(awk -v p="$1" 'BEGIN { printf "%d", p / 100 * 4294967296 }')
  for i in $(seq 0 $((CLUSTER_N - 1))); do
    local ns="${CLUSTER_PREFIX}h$i"
    ip netns exec "$ns" tc qdisc add dev eth0 clsact || return 3
    ip netns exec "$ns" tc filter add dev eth0 egress bpf da \
      bytecode "4,32 0 0 4294963256,53 1 0 $threshold,6 0 0 2,6 0 0 0" || return 3
  done
}

cluster_run() {
  local out=$1 sim=$2
  shift 2
  local job=$((RANDOM * 32768 + RANDOM)) token="netns-$RANDOM$RANDOM" status=0
  CLUSTER_PORT=$((CLUSTER_PORT + 1))
  mkdir -p "$out"
  CLUSTER_PIDS=()
  for i in $(seq 0 $((CLUSTER_N - 1))); do
    ip netns exec "${CLUSTER_PREFIX}h$i" env -i PATH="$PATH" RANK="$i" WORLD_SIZE="$CLUSTER_N" \
      MASTER_ADDR="$NET.1" MASTER_PORT="$CLUSTER_PORT" REALNET_JOB_ID="$job" REALNET_TOKEN="$token" \
      timeout "${CLUSTER_TIMEOUT_S:-600}" "$sim" "$@" --fabric tcp --interface eth0 --timeout-s 60 \
      </dev/null >"$out/rank$i.out" 2>"$out/rank$i.err" &
    CLUSTER_PIDS+=("$!")
  done
  for i in $(seq 0 $((CLUSTER_N - 1))); do
    wait "${CLUSTER_PIDS[$i]}" || { echo "rank $i exited with status $?" >&2; status=1; }
  done
  CLUSTER_PIDS=()
  if [ "$status" != 0 ]; then
    for i in $(seq 0 $((CLUSTER_N - 1))); do sed "s/^/[rank $i] /" "$out/rank$i.err" >&2; done
  fi
  return "$status"
}
