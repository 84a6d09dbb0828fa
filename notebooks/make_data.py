#!/usr/bin/env python3
"""Generate the small CSVs the notebooks read, with the `sim` binary.

    python3 notebooks/make_data.py [--sim target/release/sim] [--out notebooks/data]

writes, from the scenarios in notebooks/scenarios/:

- run.csv             `sim run busbw.toml --csv`      (busbw_vs_size, simulated_vs_model)
- topology_run.csv    `sim run links.toml --csv`       (simulated_vs_model)
- links.csv           `sim run links.toml --links-csv` (link_utilisation)
- links_timeline.csv  `sim run links.toml --links-timeline`, where `sim run` has
                      that option (link_utilisation)
- sweep.csv           `sim sweep scaling.toml --csv`   (scaling_efficiency)

Where the binary has no `sim sweep` yet, sweep.csv is built the same shape by
running `sim run --csv` on every point of the scenario's [sweep] table and
adding the axis, status and scaling columns (see `fallback_sweep`). Only the
standard library is used, so this runs before any package is installed.
"""

import argparse
import csv
import io
import itertools
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"


def sim_run(sim, scenario, *args):
    """Runs `sim run SCENARIO ARGS...`; stops with its stderr if it fails."""
    cmd = [str(sim), "run", str(scenario), *map(str, args)]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"make_data: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")


def has_subcommand(sim, *words):
    """`sim WORDS... --help`: whether it succeeded (the binary knows the
    subcommand) and the help text it printed."""
    done = subprocess.run([str(sim), *words, "--help"], capture_output=True, text=True)
    return done.returncode == 0, done.stdout


def toml_value(value):
    """One TOML value: strings quoted as JSON (a subset of TOML's basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def is_table_array(value):
    return isinstance(value, list) and value and all(isinstance(v, dict) for v in value)


def write_toml(table, out, prefix=""):
    """Writes a parsed scenario back as TOML: scalars, then tables, then arrays of tables."""
    for key, value in table.items():
        if not isinstance(value, dict) and not is_table_array(value):
            out.write(f"{key} = {toml_value(value)}\n")
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.write(f"\n[{name}]\n")
            write_toml(value, out, f"{name}.")
        elif is_table_array(value):
            for item in value:
                out.write(f"\n[[{name}]]\n")
                write_toml(item, out, f"{name}.")


def apply_axis(scenario, axis, value):
    """Sets one sweep axis in a parsed scenario, as `sim sweep` would."""
    collectives = scenario.get("collective", [])
    if axis in ("nodes", "oversubscription", "nic"):
        scenario.setdefault("topology", {})[axis] = value
    elif axis in ("world_size", "seed"):
        scenario[axis] = value
        if axis == "world_size":
            for c in collectives:
                c.pop("world_size", None)
    elif axis == "bytes":
        for c in collectives:
            c["min_bytes"] = c["max_bytes"] = value
    elif axis == "algorithm":
        for c in collectives:
            c["algorithm"] = value
    else:
        sys.exit(f"make_data: the fallback sweep cannot set axis {axis!r}")


def scaling_columns(rows, axes, rank_axis):
    """Speedup and efficiency of every row against the row with the fewest
    ranks in its group (same other axes, collective, size, and algorithm when
    that is no axis): speedup = (ranks / time) / (ranks0 / time0), the
    aggregate throughput's gain; efficiency = speedup / (ranks / ranks0)."""
    axis_col = {axis: 1 + i for i, axis in enumerate(axes)}  # after point
    run_at = len(axes) + 2  # after point, the axes and status
    key_cols = [axis_col[a] for a in axes if a != rank_axis]
    key_cols += [run_at + RUN_KEYS.index(k) for k in ("collective", "size_bytes")]
    if "algorithm" not in axes:
        key_cols.append(run_at + RUN_KEYS.index("algorithm"))
    rank_col, ranks_col = axis_col[rank_axis], run_at + RUN_KEYS.index("ranks")
    time_col = run_at + RUN_KEYS.index("time_ps")
    base = {}
    for row in rows:
        key = tuple(row[i] for i in key_cols)
        if key not in base or float(row[rank_col]) < float(base[key][rank_col]):
            base[key] = row
    for row in rows:
        b = base[tuple(row[i] for i in key_cols)]
        ratio = int(row[ranks_col]) / int(b[ranks_col])
        speedup = ratio * int(b[time_col]) / int(row[time_col])
        row += [f"{speedup:.6f}", f"{speedup / ratio:.6f}"]


# The run CSV's columns (sim/src/report.rs CSV_HEADER), as `sim run --csv` writes them.
RUN_KEYS = [
    "collective", "algorithm", "tuned", "chunk_bytes", "ranks", "size_bytes", "count",
    "type", "redop", "root", "time_us", "algbw_gb_per_s", "busbw_gb_per_s", "wrong",
    "time_ps", "model_time_us",
]


def fallback_sweep(sim, scenario_path, out_csv):
    """A `sim sweep` CSV made with `sim run`: point, the axes, status, the run
    columns, speedup, efficiency; points in the cross product's order (the
    first axis slowest)."""
    scenario = tomllib.loads(scenario_path.read_text())
    sweep = scenario.pop("sweep")
    axes = list(sweep)
    rank_axis = "nodes" if "nodes" in axes else "world_size"
    if rank_axis not in axes:
        sys.exit(f"make_data: {scenario_path}: the sweep needs a nodes or world_size axis")
    header = ["point", *axes, "status", *RUN_KEYS, "speedup", "efficiency"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for point, values in enumerate(itertools.product(*sweep.values())):
            variant = tomllib.loads(scenario_path.read_text())
            variant.pop("sweep")
            for axis, value in zip(axes, values):
                apply_axis(variant, axis, value)
            toml_path, csv_path = Path(tmp, f"p{point}.toml"), Path(tmp, f"p{point}.csv")
            text = io.StringIO()
            write_toml(variant, text)
            toml_path.write_text(text.getvalue())
            sim_run(sim, toml_path, "--csv", csv_path)
            with open(csv_path, newline="") as f:
                reader = csv.reader(f)
                if next(reader) != RUN_KEYS:
                    sys.exit(f"make_data: `sim run --csv` columns differ from {RUN_KEYS}")
                for run_row in reader:
                    rows.append([str(point), *map(str, values), "ok", *run_row])
    scaling_columns(rows, axes, rank_axis)
    with open(out_csv, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", type=Path, default=HERE.parent / "target/release/sim")
    parser.add_argument("--out", type=Path, default=HERE / "data")
    args = parser.parse_args()
    if not args.sim.is_file():
        sys.exit(f"make_data: no sim binary at {args.sim} (cargo build --release -p sim)")
    args.out.mkdir(parents=True, exist_ok=True)

    sim_run(args.sim, SCENARIOS / "busbw.toml", "--csv", args.out / "run.csv")

    timeline = args.out / "links_timeline.csv"
    timeline.unlink(missing_ok=True)  # the notebook uses it whenever it exists
    links_args = ["--csv", args.out / "topology_run.csv", "--links-csv", args.out / "links.csv"]
    if "--links-timeline" in has_subcommand(args.sim, "run")[1]:
        links_args += ["--links-timeline", timeline]
    sim_run(args.sim, SCENARIOS / "links.toml", *links_args)

    sweep_csv = args.out / "sweep.csv"
    if has_subcommand(args.sim, "sweep")[0]:
        cmd = [str(args.sim), "sweep", str(SCENARIOS / "scaling.toml"), "--csv", str(sweep_csv)]
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"make_data: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
        how = "sim sweep"
    else:
        fallback_sweep(args.sim, SCENARIOS / "scaling.toml", sweep_csv)
        how = "sim run per point (no sim sweep in this binary)"

    for name in ("run.csv", "topology_run.csv", "links.csv", "links_timeline.csv", "sweep.csv"):
        path = args.out / name
        if path.exists():
            lines = sum(1 for _ in open(path))
            print(f"make_data: {path}: {lines - 1} rows" + (f" ({how})" if name == "sweep.csv" else ""))


if __name__ == "__main__":
    main()
