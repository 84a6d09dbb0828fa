#!/usr/bin/env python3
"""Strip outputs from notebooks, or check that they have none.

    python3 notebooks/strip_outputs.py notebooks/*.ipynb          # rewrite in place
    python3 notebooks/strip_outputs.py --check notebooks/*.ipynb  # fail if any has outputs

The notebooks are committed without outputs (CI executes them on fresh data),
so that they stay small and their diffs stay readable. Only the standard
library is used; the files are written as Jupyter writes them (one-space
indent, sorted keys).
"""

import json
import sys


def strip(nb):
    """Removes outputs, execution counts and timings, and the kernel's version
    details; says whether anything was removed."""
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            changed = True
        cell["outputs"] = []
        cell["execution_count"] = None
        if cell.get("metadata", {}).pop("execution", None) is not None:
            changed = True
    language = nb.get("metadata", {}).get("language_info")
    if language and set(language) != {"name"}:
        nb["metadata"]["language_info"] = {"name": language.get("name", "python")}
        changed = True
    return changed


def main(args):
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    if not paths:
        sys.exit(__doc__)
    dirty = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        if strip(nb):
            dirty.append(path)
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    if check and dirty:
        sys.exit(f"notebooks with outputs (run notebooks/strip_outputs.py on them): {', '.join(dirty)}")
    print(f"{'stripped' if not check else 'checked'} {len(paths)} notebooks" + (f", {len(dirty)} had outputs" if dirty else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
