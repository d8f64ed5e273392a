"""What the memory pass costs per cell, before and after a change: sessions of bench_breakdown.py
taken in turns, compared cell by cell.

    python evidence/memory_pass_cost.py BEFORE1 AFTER1 BEFORE2 AFTER2 [--out FILE]

Each argument is a session's result (``evidence/bench_breakdown.py --out FILE``, with the base's
code for the "before" ones), in the order they ran. Per cell: the memory pass's CPU seconds (the
session's process: multiprocessing's task processes are not in it) and wall seconds in each
session, and the ratio of the sides' sums; the totals over the cells every session ran. CPU
seconds move far less with other processes' load than wall seconds do, and the sessions taking
turns share what load there was.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PART = "memory pass"


def passes(path: str) -> dict:
    """{cell id: (wall s, CPU s)} of the memory pass in one bench_breakdown.py session."""
    result = json.loads(Path(path).read_text())
    return {c["id"]: tuple(c["parts"][PART]) for c in result["cells"] if PART in c["parts"]}


def compare(before: list[dict], after: list[dict]) -> dict:
    keys = sorted(set.intersection(*(set(s) for s in (*before, *after))))
    rows = {}
    for key in keys:
        cpu_b = [s[key][1] for s in before]
        cpu_a = [s[key][1] for s in after]
        rows[key] = {
            "cpu_before": cpu_b,
            "cpu_after": cpu_a,
            "wall_before": [s[key][0] for s in before],
            "wall_after": [s[key][0] for s in after],
            "cpu_ratio": sum(cpu_a) / sum(cpu_b) if sum(cpu_b) else None,
        }
    totals = {
        f"{what}_{side}": [sum(s[k][i] for k in keys) for s in sessions]
        for what, i in (("wall", 0), ("cpu", 1))
        for side, sessions in (("before", before), ("after", after))
    }
    return {"cells": rows, "totals": {"cells": len(keys), **totals}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sessions", nargs=4, help="BEFORE1 AFTER1 BEFORE2 AFTER2 (--out files)")
    parser.add_argument("--out", help="the result (JSON)")
    args = parser.parse_args()
    loaded = [passes(p) for p in args.sessions]
    result = {"sessions": args.sessions, **compare(loaded[0::2], loaded[1::2])}
    print(f"{'cell':64} {'CPU s before':>14} {'CPU s after':>14} {'ratio':>6}")
    for key, row in sorted(result["cells"].items(), key=lambda kv: -sum(kv[1]["cpu_before"])):
        before = " ".join(f"{v:6.2f}" for v in row["cpu_before"])
        after = " ".join(f"{v:6.2f}" for v in row["cpu_after"])
        ratio = f"{row['cpu_ratio']:6.2f}" if row["cpu_ratio"] is not None else "     -"
        print(f"{key[:64]:64} {before:>14} {after:>14} {ratio}")
    for name, value in result["totals"].items():
        print(
            f"{name}: {value}"
            if isinstance(value, int)
            else f"{name}: {value[0]:.1f}, {value[1]:.1f}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
