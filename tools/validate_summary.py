#!/usr/bin/env python3
"""Summarises a `sim validate --csv` file: median and worst |error| over all
rows, per collective, per algorithm and per size; and, for each collective
and size, whether the simulator ranks the named algorithms (the tuner's rows
left out) in the order they were measured.

usage: tools/validate_summary.py validate.csv
"""
import csv
import statistics
import sys


def spread(rows):
    errs = [abs(float(r["error_pct"])) for r in rows]
    return f"median |error| {statistics.median(errs):5.1f}%, worst {max(errs):6.1f}% ({len(errs)} rows)"


def main(path):
    rows = list(csv.DictReader(open(path)))
    print(f"# all rows: {spread(rows)}")
    for key in ("collective", "algorithm", "size_bytes"):
        groups = {}
        for r in rows:
            k = r[key]
            if key == "algorithm" and k.startswith("auto:"):
                k = "auto"
            groups.setdefault(k, []).append(r)
        order = sorted(groups, key=int) if key == "size_bytes" else sorted(groups)
        for k in order:
            print(f"#   {key} {k}: {spread(groups[k])}")
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


if __name__ == "__main__":
    main(sys.argv[1])
