#!/usr/bin/env bash
# Measures `sim bench` on shared memory and TCP beside the peers of
# ../shared/peers (Open MPI and MPICH over shared memory, Gloo over TCP, the
# memory-copy ceiling) in one run, float sum allreduce, 8 B to 256 MiB, at 2
# and 4 ranks, and prints busbw side by side with the ratios the README
# quotes. A benchmark, not a test: CI does not run it.
#
# usage: realnet/bench/compare_peers.sh [PEERS_DIR=../shared/peers] [OUT_DIR]
# needs: a release sim (cargo build --release -p sim), the peers' setup
# (openmpi-bin libopenmpi-dev mpich libmpich-dev; a venv with torch for Gloo,
# see PEERS_DIR/README.md). A peer that cannot run is reported and skipped.
set -u
cd "$(dirname "$0")/../.."
PEERS="$(cd "${1:-../shared/peers}" && pwd)"
OUT="${2:-target/compare_peers/$(date +%Y%m%d_%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SIM="$PWD/target/release/sim"
[ -x "$SIM" ] || { echo "build the sim first: cargo build --release -p sim" >&2; exit 1; }
export PEERS_WORKDIR="$OUT/peers"
MAXB=${MAXB:-268435456}

# REPORT_ONLY=1: print the table from an earlier run's files in OUT_DIR.
if [ "${REPORT_ONLY:-0}" != 1 ]; then
echo "# memory-copy ceiling"
(cd "$PEERS/membw" && ./run.sh > "$OUT/membw.log" 2>&1 && cp "$(ls -t "$PEERS_WORKDIR"/membw/results/*.csv 2>/dev/null | head -1)" "$OUT/membw.csv") \
    || echo "membw: skipped (see $OUT/membw.log)"

for np in 2 4; do
    echo "# $np ranks"
    for mpi in openmpi mpich; do
        (cd "$PEERS/mpi" && NP=$np MPI=$mpi OUT="$OUT/${mpi}_np$np.csv" ./run.sh 8 "$MAXB" > "$OUT/${mpi}_np$np.log" 2>&1) \
            || echo "$mpi: skipped (see $OUT/${mpi}_np$np.log)"
    done
    (cd "$PEERS/gloo" && ./run.sh --nproc "$np" --min-bytes 8 --max-bytes "$MAXB" > "$OUT/gloo_np$np.log" 2>&1 \
        && cp "$(ls -t "$PEERS_WORKDIR"/gloo/results/*.csv | head -1)" "$OUT/gloo_np$np.csv") \
        || echo "gloo: skipped (see $OUT/gloo_np$np.log)"
    for fabric in shm tcp; do
        # Small sizes get many iterations, large ones few (as the peers do).
        "$SIM" launch -n "$np" --fabric "$fabric" -- bench -b 8 -e 1M -f 2 -n 1000 -w 50 -c 1 \
            --csv "$OUT/sim_${fabric}_np${np}_small.csv" > "$OUT/sim_${fabric}_np$np.txt" 2>&1 \
            && "$SIM" launch -n "$np" --fabric "$fabric" -- bench -b 2M -e "$MAXB" -f 2 -n 10 -w 2 -c 1 \
            --csv "$OUT/sim_${fabric}_np${np}_large.csv" >> "$OUT/sim_${fabric}_np$np.txt" 2>&1 \
            || echo "sim $fabric: failed (see $OUT/sim_${fabric}_np$np.txt)"
    done
done

fi

python3 - "$OUT" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
def peer(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        lines = [l for l in f if not l.startswith('#')]
    for r in csv.DictReader(lines):
        if r.get('time_us') and r.get('busbw_GBps'):
            rows[int(r['bytes'])] = (float(r['time_us']), float(r['busbw_GBps']))
    return rows
def ours(prefix):
    rows = {}
    for path in sorted(glob.glob(prefix + '_*.csv')):
        for r in csv.DictReader(open(path)):
            rows[int(r['size_bytes'])] = (float(r['time_us']), float(r['busbw_gb_per_s']))
    return rows
ceiling = None
if os.path.exists(f'{out}/membw.csv'):
    for r in csv.DictReader(open(f'{out}/membw.csv')):
        if r['kernel'] == 'memcpy' and r['threads'] == '1' and int(r['bytes_per_thread']) >= 1 << 27:
            ceiling = float(r['best_GBps'])
for np in (2, 4):
    cols = {
        'shm': ours(f'{out}/sim_shm_np{np}'), 'tcp': ours(f'{out}/sim_tcp_np{np}'),
        'openmpi': peer(f'{out}/openmpi_np{np}.csv'), 'mpich': peer(f'{out}/mpich_np{np}.csv'),
        'gloo': peer(f'{out}/gloo_np{np}.csv'),
    }
    print(f'\n## {np} ranks: time (us) / busbw (GB/s)')
    print('%12s' % 'bytes' + ''.join('%22s' % k for k in cols))
    for size in sorted(set().union(*[c.keys() for c in cols.values()])):
        cells = [('%9.2f / %8.3f' % c[size]) if size in c else '-' for c in cols.values()]
        print('%12d' % size + ''.join('%22s' % x for x in cells))
    best_peer = lambda size, i, pick: pick([c[size][i] for k, c in cols.items() if k not in ('shm', 'tcp') and size in c] or [float('nan')])
    for size, label in ((8, '8 B time'), (1 << 26, '64 MiB busbw')):
        if size in cols['shm']:
            if size == 8:
                b = best_peer(size, 0, min)
                print(f'{label}: shm {cols["shm"][size][0]:.2f} us, tcp {cols["tcp"].get(size, (float("nan"),))[0]:.2f} us, best peer {b:.2f} us (shm/best = {cols["shm"][size][0] / b:.2f}x)')
            else:
                b = best_peer(size, 1, max)
                print(f'{label}: shm {cols["shm"][size][1]:.3f}, tcp {cols["tcp"].get(size, (0, float("nan")))[1]:.3f}, best peer {b:.3f} GB/s (shm/best = {cols["shm"][size][1] / b:.2f})'
                      + (f', memcpy ceiling {ceiling:.1f} GB/s (ceiling/shm = {ceiling / cols["shm"][size][1]:.1f}x)' if ceiling else ''))
PY
echo "raw files: $OUT"
