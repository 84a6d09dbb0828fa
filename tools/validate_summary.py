#!/usr/bin/env python3
"""Summarises a `sim validate --csv` file: median and worst |error| over all
rows, per collective, per algorithm and per size; and, for each collective
and size, whether the simulator ranks the named algorithms (the tuner's rows
left out) in the order they were measured; and the measurement's own
spread: where the tuner picked an algorithm that also has a named row of the
same collective and size, the two are one algorithm measured twice in one
run, so their difference is a floor under any model's error.

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
    tied = 0
    for (coll, size), rs in sorted(by.items()):
        m = [r["algorithm"] for r in sorted(rs, key=lambda r: float(r["measured_us"]))]
        s = [r["algorithm"] for r in sorted(rs, key=lambda r: float(r["simulated_us"]))]
        same += m == s
        if m != s:
            ties = "" if not agrees_up_to_ties(rs) else " (the simulator ties the ones it swaps)"
            tied += ties != ""
            print(f"# ranking differs: {coll} {size} B: measured {' < '.join(m)}; simulated {' < '.join(s)}{ties}")
    print(
        f"# same algorithm ranking at {same} of {len(by)} (collective, size) points; "
        f"{same + tied} counting the simulator's ties (within {TIE_PCT}%) as either order"
    )
    repeat = repeatability(rows)
    if repeat:
        print(
            f"# measured twice (the tuner's pick against its named row): median |difference| "
            f"{statistics.median(repeat):5.1f}%, worst {max(repeat):6.1f}% ({len(repeat)} pairs)"
        )


TIE_PCT = 0.5


def agrees_up_to_ties(rs):
    """Whether every pair of algorithms the hosts ran in one order is
    simulated in that order or within TIE_PCT% of each other."""
    for a in rs:
        for b in rs:
            ma, mb = float(a["measured_us"]), float(b["measured_us"])
            sa, sb = float(a["simulated_us"]), float(b["simulated_us"])
            if ma < mb and sa > sb and (sa - sb) > TIE_PCT / 100 * sb:
                return False
    return True


def repeatability(rows):
    """|difference| in % (of the faster) between each tuner row and the named
    row of the algorithm it picked, same collective and size."""
    named = {
        (r["collective"], r["algorithm"], r["size_bytes"]): float(r["measured_us"])
        for r in rows
        if not r["algorithm"].startswith("auto:")
    }
    out = []
    for r in rows:
        if not r["algorithm"].startswith("auto:"):
            continue
        twin = named.get((r["collective"], r["algorithm"][len("auto:"):], r["size_bytes"]))
        if twin is not None:
            a = float(r["measured_us"])
            out.append(abs(a - twin) / min(a, twin) * 100)
    return out


if __name__ == "__main__":
    main(sys.argv[1])
