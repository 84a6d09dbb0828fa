#!/usr/bin/env bash
# Trees at scale: wall time and peak memory of `sim run` for the
# catalogue's double binary tree (`tree`), NCCL's tree (`nccl_tree`),
# NCCL's NVLS-Tree (`nccl_nvls_tree`, NVSwitch reduction inside each node,
# a tree over the nodes) allreduces and NCCL's PAT (`nccl_pat`) allgather
# on a rail-optimised fat-tree of DGX H100-style nodes (IB NDR, flow
# model), phantom payloads, one timed call per point.
#
#   tools/bench_trees.sh                      # 512 and 2048 GPUs at 32 GiB, all four
#   tools/bench_trees.sh --nodes "8 64" --sizes "1G 32G" --algorithms tree
#   tools/bench_trees.sh --timeout 120        # give up on a point after 120 s
#   tools/bench_trees.sh --algorithms nccl_tree --symmetry fold   # folded by the node turn
#   tools/bench_trees.sh --algorithms "nccl_pat nccl_ring" --symmetry fold   # folded by a node shift
#   tools/bench_trees.sh --algorithms nccl_pat --kind reduce_scatter --symmetry fold
#   tools/bench_trees.sh --algorithms nccl_tree --symmetry fold --extrapolate-above 1G
#
# Options: --sim PATH (default: target/release/sim, built with
# `cargo build --release -p sim`), --nodes "N..." (8 GPUs each; default
# "64 256"), --sizes "S..." (default "32G"), --algorithms "A..." (default
# "tree nccl_tree nccl_nvls_tree nccl_pat"; `nccl_pat` and `pat` run an
# allgather, the others an allreduce), --kind K (run collective K, e.g.
# reduce_scatter, for every algorithm instead), --reduce-gbps G (a
# `[compute]` section: reductions at G GB/s per GPU; default none, so
# reductions cost nothing), --model flow|packet
# (default flow), --timeout SECONDS
# (default 900; a point that takes longer is reported as such), --symmetry
# routes|fold (default none: `[topology] symmetry`; `fold` folds `nccl_tree` and `nccl_nvls_tree`
# by turning every node's GPUs by a quarter of a node, `pat`, `nccl_pat` and `nccl_ring` by one node),
# --extrapolate-above T (the collective's `extrapolate_above`: a size above T is drawn on the line
# through simulated runs at T/2 and T, which the wall time and memory then include; a size at or
# below T is simulated in full; default none).
#
# Prints one line per point: algorithm, collective, GPUs, bytes, wall seconds, peak
# RSS (MiB), the simulated time of the call (us), and the exit status.
# Needs GNU time at /usr/bin/time and coreutils' timeout.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
sim="$root/target/release/sim"
nodes="64 256"
sizes="32G"
algorithms="tree nccl_tree nccl_nvls_tree nccl_pat"
model="flow"
limit=900
symmetry=""
kind_override=""
reduce_gbps=""
extrapolate=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sim) sim="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        --sizes) sizes="$2"; shift 2 ;;
        --algorithms) algorithms="$2"; shift 2 ;;
        --model) model="$2"; shift 2 ;;
        --timeout) limit="$2"; shift 2 ;;
        --symmetry) symmetry="$2"; shift 2 ;;
        --kind) kind_override="$2"; shift 2 ;;
        --reduce-gbps) reduce_gbps="$2"; shift 2 ;;
        --extrapolate-above) extrapolate="$2"; shift 2 ;;
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [[ ! -x "$sim" ]]; then
    echo "error: no sim binary at $sim; run \`cargo build --release -p sim\` or pass --sim" >&2
    exit 2
fi
if [[ ! -x /usr/bin/time ]]; then
    echo "error: GNU time (/usr/bin/time) is needed for the peak memory" >&2
    exit 2
fi

# The bytes of a size as sim reads it (8, 64K, 128M, 1G).
bytes() {
    local n="${1%%[!0-9]*}"
    case "${1#"$n"}" in
        K|KB|KiB|k) echo $((n << 10)) ;;
        M|MB|MiB) echo $((n << 20)) ;;
        G|GB|GiB) echo $((n << 30)) ;;
        *) echo "$n" ;;
    esac
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

printf '%-14s %-14s %6s %8s %10s %10s %14s %s\n' algorithm collective gpus bytes "wall (s)" "rss (MiB)" "simulated (us)" status
for algorithm in $algorithms; do
    # PAT is NCCL's allgather and reduce-scatter; the rest reduce.
    case "$algorithm" in
        pat|nccl_pat) kind="allgather" ;;
        *) kind="allreduce" ;;
    esac
    kind="${kind_override:-$kind}"
    for n in $nodes; do
        for size in $sizes; do
            scenario="$work/${algorithm}_${n}_${size}.toml"
            # A size at or below T is simulated in full (sim refuses an
            # extrapolate_above with no size above it).
            lined=""
            if [[ -n "$extrapolate" ]] && (( $(bytes "$size") > $(bytes "$extrapolate") )); then
                lined="$extrapolate"
            fi
            cat > "$scenario" <<TOML
name = "bench_${algorithm}_${n}_${size}"
seed = 1

[topology]
preset = "fat_tree"
nodes = $n
gpus_per_node = 8
style = "h100"
nic = "ib_ndr"
model = "$model"
${symmetry:+symmetry = \"$symmetry\"}

[[collective]]
kind = "$kind"
algorithm = "$algorithm"
min_bytes = "$size"
max_bytes = "$size"
iters = 1
warmup = 0
phantom = true
${lined:+extrapolate_above = \"$lined\"}
${reduce_gbps:+[compute]
reduce_gb_per_s = $reduce_gbps}
TOML
            status=0
            # `timeout` runs under `time` and kills `sim` itself (its own
            # child) with SIGKILL: `sim run` treats SIGTERM as "stop after
            # the current row", and a point is one row, so SIGTERM would
            # leave it running to the end.
            /usr/bin/time -f '%e %M' -o "$work/time" \
                timeout --signal=KILL "$limit" "$sim" run "$scenario" \
                > "$work/out" 2> "$work/err" || status=$?
            wall="-"; rss="-"
            # GNU time writes "Command exited with non-zero status N" first
            # when the command failed: the figures are on the last line.
            if read -r w kb < <(tail -n 1 "$work/time") 2>/dev/null && [[ -n "${kb:-}" ]]; then
                wall="$w"; rss="$((kb / 1024))"
            fi
            # The result row: size, count, dtype, op, root, time (us), ...
            simulated="$(awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $6 }' "$work/out" | tail -n 1)"
            case "$status" in
                0) what="ok" ;;
                124|137) what="timed out after ${limit} s"; wall=">$limit"; rss="-" ;;
                *) what="exit $status: $(head -c 300 "$work/err" | tr '\n' ' ')" ;;
            esac
            printf '%-14s %-14s %6d %8s %10s %10s %14s %s\n' "$algorithm" "$kind" $((n * 8)) "$size" \
                "$wall" "$rss" "${simulated:--}" "$what"
        done
    done
done
