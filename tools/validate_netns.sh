#!/usr/bin/env bash
# The multi-host validation benchmark: a cluster of network namespaces
# (tests/netns_cluster.sh) calibrated with `sim calibrate` over TCP, then
# `sim validate` of ring, tree, recursive doubling and the tuner (allreduce),
# ring, recursive doubling, Bruck and the tuner (allgather), pairwise, Bruck
# and the tuner (alltoall), 16 B to 64 MiB in steps of 4, on the calibrated
# simulator and on the hosts. Two variants: one bridge ("flat"), and two
# racks joined by a tc tbf rate-limited link ("racks"; each variant is
# calibrated on its own cluster). Every validated row is out of the fit:
# the fit sees only the microbenchmarks.
#
# Prints per variant: the side-by-side table, median and worst |error| per
# collective, and for each collective and size whether the simulator ranks
# the named algorithms in the measured order. Results in target/validate_netns/.
#
# usage: tools/validate_netns.sh [path/to/sim] [HOSTS] [RACK_RATE]
#        (root; defaults target/release/sim, 4 hosts, 1gbit)
set -u
SIM="${1:-target/release/sim}"
HOSTS="${2:-4}"
RATE="${3:-1gbit}"
[ -x "$SIM" ] || { echo "$SIM is not an executable (cargo build --release -p sim)" >&2; exit 1; }
SIM="$(cd "$(dirname "$SIM")" && pwd)/$(basename "$SIM")"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
. "$HERE/tests/netns_cluster.sh"
RESULTS="$HERE/target/validate_netns"
mkdir -p "$RESULTS"
trap cluster_down EXIT INT TERM
CLUSTER_TIMEOUT_S=1800

entry() { # kind algorithm
  cat <<TOML
[[collective]]
kind = "$1"
${2:+algorithm = \"$2\"}
min_bytes = 16
max_bytes = "64M"
step_factor = 4
iters = 3
warmup = 1
check = false
TOML
}

scenario() { # calibration file
  echo "world_size = $HOSTS"
  echo "[calibration]"
  echo "file = \"$1\""
  for a in ring tree recursive_doubling ""; do entry allreduce "$a"; done
  for a in ring recursive_doubling bruck ""; do entry allgather "$a"; done
  for a in pairwise bruck ""; do entry alltoall "$a"; done
}

for variant in flat racks; do
  out="$RESULTS/$variant"
  rm -rf "$out"
  mkdir -p "$out"
  if [ "$variant" = racks ]; then cluster_up "$HOSTS" "$RATE"; else cluster_up "$HOSTS"; fi
  case $? in
    0) ;;
    3) echo "skipped: cannot create network namespaces here (needs root and iproute2)"; exit 0 ;;
    *) echo "the hosts cannot reach each other" >&2; exit 1 ;;
  esac
  echo "== $variant ($HOSTS hosts$([ "$variant" = racks ] && echo ", two racks joined by a $RATE tbf link"))"
  start=$SECONDS
  cluster_run "$out/cal" "$SIM" calibrate --out "$out/tcp.toml" --max-bytes 4M --reps 5 || exit 1
  cat "$out/cal/rank0.out"
  scenario tcp.toml > "$out/validate.toml"
  cluster_run "$out/val" "$SIM" validate "$out/validate.toml" --csv "$out/validate.csv" || exit 1
  sed -n '/^# sim validate/,$p' "$out/val/rank0.out"
  python3 - "$out/validate.csv" <<'PY'
import csv, sys, statistics
rows = list(csv.DictReader(open(sys.argv[1])))
errs = [abs(float(r["error_pct"])) for r in rows]
print(f"# all rows: median |error| {statistics.median(errs):.1f}%, worst {max(errs):.1f}%, {len(rows)} rows")
by = {}
for r in rows:
    if r["algorithm"].startswith("auto:"):
        continue
    by.setdefault((r["collective"], int(r["size_bytes"])), []).append(r)
same = 0
for (coll, size), rs in sorted(by.items()):
    m = [r["algorithm"] for r in sorted(rs, key=lambda r: float(r["measured_us"]))]
    s = [r["algorithm"] for r in sorted(rs, key=lambda r: float(r["simulated_us"]))]
    same += m == s
    if m != s:
        print(f"# ranking differs: {coll} {size} B: measured {' < '.join(m)}; simulated {' < '.join(s)}")
print(f"# same algorithm ranking at {same} of {len(by)} (collective, size) points")
PY
  echo "# $variant: $((SECONDS - start)) s"
  cluster_down
done
