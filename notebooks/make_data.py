#!/usr/bin/env python3
"""Generate the small CSVs the notebooks read, with the `sim` binary.

    python3 notebooks/make_data.py [--sim target/release/sim] [--out notebooks/data]

writes, from the scenarios in notebooks/scenarios/:

- run.csv             `sim run busbw.toml --csv`      (busbw_vs_size, simulated_vs_model)
- topology_run.csv    `sim run links.toml --csv`       (simulated_vs_model)
- links.csv           `sim run links.toml --links-csv` (link_utilisation)
- links_timeline.csv  `sim run links.toml --links-timeline` (link_utilisation)
- sweep.csv           `sim sweep scaling.toml --csv`   (scaling_efficiency)

Only the standard library is used, so this runs before any package is
installed.
"""

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"


def sim_run(sim, scenario, *args):
    """Runs `sim run SCENARIO ARGS...`; stops with its stderr if it fails."""
    cmd = [str(sim), "run", str(scenario), *map(str, args)]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"make_data: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", type=Path, default=HERE.parent / "target/release/sim")
    parser.add_argument("--out", type=Path, default=HERE / "data")
    args = parser.parse_args()
    if not args.sim.is_file():
        sys.exit(f"make_data: no sim binary at {args.sim} (cargo build --release -p sim)")
    args.out.mkdir(parents=True, exist_ok=True)

    sim_run(args.sim, SCENARIOS / "busbw.toml", "--csv", args.out / "run.csv")

    sim_run(
        args.sim,
        SCENARIOS / "links.toml",
        "--csv",
        args.out / "topology_run.csv",
        "--links-csv",
        args.out / "links.csv",
        "--links-timeline",
        args.out / "links_timeline.csv",
    )

    sweep_csv = args.out / "sweep.csv"
    cmd = [str(args.sim), "sweep", str(SCENARIOS / "scaling.toml"), "--quiet", "--csv", str(sweep_csv)]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"make_data: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")

    for name in ("run.csv", "topology_run.csv", "links.csv", "links_timeline.csv", "sweep.csv"):
        path = args.out / name
        # Comment lines (a sweep's `# sweep` line) are not rows.
        lines = sum(1 for line in open(path) if not line.startswith("#"))
        print(f"make_data: {path}: {lines - 1} rows")


if __name__ == "__main__":
    main()
