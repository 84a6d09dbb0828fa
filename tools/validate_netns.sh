#!/usr/bin/env bash
# The multi-host validation benchmark: a cluster of network namespaces
# (tests/netns_cluster.sh) calibrated with `sim calibrate` over TCP, then
# `sim validate` of ring, tree, recursive doubling and the tuner (allreduce),
# ring, recursive doubling, Bruck and the tuner (allgather), pairwise, Bruck
# and the tuner (alltoall), 16 B to 64 MiB in steps of 4, on the calibrated
# simulator and on the hosts. Three variants:
#   flat   one bridge; calibrated on it.
#   racks  two racks (h0..h(N/2-1) and the rest) joined by a veth pair shaped
#          by tc tbf at RATE_MBIT; the scenario is the flat calibration (the
#          same hosts and TCP stack) with `racks = 2`, and `rack_gb_per_s`
#          the pair bandwidth `sim calibrate` measures between two hosts
#          across the tbf link (a 2-host cluster, one host a rack: TCP gets
#          less through the shaper than its rate, so the rate is measured, not
#          taken from the tc command; the tc rate is printed beside it).
#   lossy  one bridge with LOSS_PERCENT of every host's outgoing packets
#          dropped by a BPF filter (cluster_loss); calibrated under the loss.
# Every validated row is out of the fit: the fit sees only the
# microbenchmarks (ping-pong, shift, streams, flows, reductions).
#
# Prints per variant: the side-by-side table, median and worst |error| per
# collective, per algorithm and per size, and for each collective and size
# whether the simulator ranks the named algorithms in the measured order.
# Results in target/validate_netns/VARIANT/.
#
# usage: tools/validate_netns.sh [path/to/sim] [HOSTS] [RATE_MBIT] [LOSS_PERCENT]
#        (root; defaults target/release/sim, 4 hosts, 1000 mbit, 0.1 %;
#        VARIANTS="flat racks lossy" selects variants; racks needs flat's
#        calibration, from this run or an earlier one)
set -u
SIM="${1:-target/release/sim}"
HOSTS="${2:-4}"
RATE_MBIT="${3:-1000}"
LOSS="${4:-0.1}"
VARIANTS="${VARIANTS:-flat racks lossy}"
[ -x "$SIM" ] || { echo "$SIM is not an executable (cargo build --release -p sim)" >&2; exit 1; }
SIM="$(cd "$(dirname "$SIM")" && pwd)/$(basename "$SIM")"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
. "$HERE/tests/netns_cluster.sh"
RESULTS="$HERE/target/validate_netns"
mkdir -p "$RESULTS"
trap cluster_down EXIT INT TERM
CLUSTER_TIMEOUT_S=1800
# TCP payload through the tbf: it counts whole Ethernet frames, 1514 bytes
# for 1448 of payload at MTU 1500 (14 Ethernet + 20 IPv4 + 20 TCP + 12 of
# timestamps, RFC 791/793/7323).
RACK_GB=$(awk -v m="$RATE_MBIT" 'BEGIN { printf "%.6f", m * 1e6 / 8 / 1e9 * 1448 / 1514 }')

entry() { # kind algorithm: 16 B to 1 MiB with 10 timed calls (a call there
  # takes under a few ms, and one descheduled rank on these shared cores
  # costs that much), 4 MiB to 64 MiB with 3
  cat <<TOML
[[collective]]
kind = "$1"
${2:+algorithm = \"$2\"}
min_bytes = 16
max_bytes = "1M"
step_factor = 4
iters = 10
warmup = 2
check = false
[[collective]]
kind = "$1"
${2:+algorithm = \"$2\"}
min_bytes = "4M"
max_bytes = "64M"
step_factor = 4
iters = 3
warmup = 1
check = false
TOML
}

scenario() { # calibration file, then extra [calibration] lines
  echo "world_size = $HOSTS"
  echo "[calibration]"
  echo "file = \"$1\""
  shift
  for line in "$@"; do echo "$line"; done
  for a in ring tree recursive_doubling ""; do entry allreduce "$a"; done
  for a in ring recursive_doubling bruck ""; do entry allgather "$a"; done
  for a in pairwise bruck ""; do entry alltoall "$a"; done
}

for variant in $VARIANTS; do
  out="$RESULTS/$variant"
  rm -rf "$out"
  mkdir -p "$out"
  if [ "$variant" = racks ]; then
    # The rack link on its own: one host each side of it, calibrated.
    cluster_up 2 "${RATE_MBIT}mbit" || { echo "cannot build the 2-host racks" >&2; exit 1; }
    cluster_run "$out/cross" "$SIM" calibrate --out "$out/cross.toml" --max-bytes 16M --reps 5 || exit 1
    cat "$out/cross/rank0.out"
    cluster_down
    CROSS_GB=$(awk '/^bandwidth_gb_per_s/ { print $3 }' "$out/cross.toml")
    cluster_up "$HOSTS" "${RATE_MBIT}mbit"
  else
    cluster_up "$HOSTS"
  fi
  case $? in
    0) ;;
    3) echo "skipped: cannot create network namespaces here (needs root and iproute2)"; exit 0 ;;
    *) echo "the hosts cannot reach each other" >&2; exit 1 ;;
  esac
  if [ "$variant" = lossy ]; then
    cluster_loss "$LOSS" || { echo "cannot attach the BPF drop filter" >&2; exit 1; }
  fi
  case $variant in
    flat) echo "== flat ($HOSTS hosts on one bridge)" ;;
    racks) echo "== racks ($HOSTS hosts, two racks joined by a ${RATE_MBIT}mbit tbf link ($RACK_GB GB/s of TCP payload); flat's calibration, racks = 2, rack_gb_per_s = $CROSS_GB as measured across it)" ;;
    lossy) echo "== lossy ($HOSTS hosts on one bridge, $LOSS% of packets dropped)" ;;
  esac
  start=$SECONDS
  if [ "$variant" = racks ]; then
    [ -f "$RESULTS/flat/tcp.toml" ] || { echo "racks needs the flat variant's calibration" >&2; exit 1; }
    cp "$RESULTS/flat/tcp.toml" "$out/tcp.toml"
    scenario tcp.toml "racks = 2" "rack_gb_per_s = $CROSS_GB" > "$out/validate.toml"
  else
    cluster_run "$out/cal" "$SIM" calibrate --out "$out/tcp.toml" --max-bytes 16M --reps 11 || exit 1
    cat "$out/cal/rank0.out"
    scenario tcp.toml > "$out/validate.toml"
  fi
  cluster_run "$out/val" "$SIM" validate "$out/validate.toml" --csv "$out/validate.csv" || exit 1
  sed -n '/^# sim validate/,$p' "$out/val/rank0.out"
  python3 "$HERE/tools/validate_summary.py" "$out/validate.csv"
  echo "# $variant: $((SECONDS - start)) s"
  cluster_down
done
