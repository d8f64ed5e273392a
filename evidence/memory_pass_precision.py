"""Whether the memory pass's figures are as precise after a change: sessions of the main job with
the base's code and with this one's, taken in turns, compared cell by cell.

    python evidence/memory_pass_precision.py BEFORE1 AFTER1 BEFORE2 AFTER2 [--out FILE]

Each argument is a session's ``--benchmark-json`` (``pytest benchmarks --benchmark-only``, or
``evidence/bench_breakdown.py -- --benchmark-json=FILE``, with ``PYTHONPATH`` at the base's code
for the "before" ones), in the order they ran. Per cell (a workload case on a model):

  leaks    each leak figure's verdict (gate/memory.py's floors): the same in every session?
  peak     ``peak_traced_kib``: the change between a side's two sessions (its A/A), and between
           the sides (before against after, in the same turn)
  per task ``kib_per_task`` (spawn, cancel), the same way
  rounds   how many rounds the memory pass read

"As precise": every leak verdict the same, and the after side's A/A changes no larger than the
before side's (median over cells). The per-op medians' precision is summed up as
bench_precision.py does (``compare``: each side's median change between its two sessions, and
whether the models' order agrees). The result goes to ``--out`` (JSON) and a summary is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench_precision import compare as per_op_precision  # this directory's

from pytest_concurrency.gate.memory import LEAKS

FIGURES = ("peak_traced_kib", "kib_per_task")


def cells(path: str) -> dict:
    out = {}
    for bench in json.loads(Path(path).read_text())["benchmarks"]:
        extra = bench["extra_info"]
        if "memory_rounds" not in extra:
            continue
        params = ",".join(f"{k}={v}" for k, v in sorted(extra["params"].items()))
        out[f"{extra['workload']}[{params}] {extra['backend']}"] = extra
    return out


def per_op_cells(path: str) -> dict:
    """A session's cells as bench_precision.py reads them (its per-op median, its rounds)."""
    out = {}
    for bench in json.loads(Path(path).read_text())["benchmarks"]:
        extra = bench["extra_info"]
        if "ns_per_op" in extra:
            params = ",".join(f"{k}={v}" for k, v in sorted(extra["params"].items()))
            out[f"{extra['workload']}[{params}] {extra['backend']}"] = {
                "case": f"{extra['workload']}[{params}]",
                "ns_per_op": extra["ns_per_op"],
                "rounds": bench["stats"]["rounds"],
            }
    return {"cells": out, "wall_s": 0.0, "cpu_s": 0.0, "loadavg": 0.0}


def leaks(extra: dict) -> dict:
    """{leak key: whether it reads as a leak} (the gate's rule: over its floor)."""
    return {
        leak.key: extra[leak.key] > leak.floor_for(extra) for leak in LEAKS if leak.key in extra
    }


def change(a, b) -> float | None:
    """The relative change from ``a`` to ``b`` (0 when both are 0; None when either is absent)."""
    if a is None or b is None:
        return None
    return 0.0 if a == b else abs(b - a) / max(abs(a), abs(b))


def compare(before: list[dict], after: list[dict]) -> dict:
    keys = sorted(set.intersection(*(set(s) for s in (*before, *after))))
    rows, same_verdicts = {}, 0
    for key in keys:
        sessions = [s[key] for s in (*before, *after)]
        verdicts = [leaks(e) for e in sessions]
        same = all(v == verdicts[0] for v in verdicts)
        same_verdicts += same
        row: dict = {
            "leak_verdicts_same": same,
            "leaks": verdicts[0] if same else verdicts,
            "memory_rounds": [e["memory_rounds"] for e in sessions],
        }
        for fig in FIGURES:
            values = [e.get(fig) for e in sessions]
            if all(v is None for v in values):
                continue
            row[fig] = {
                "values": values,
                "before_aa": change(before[0][key].get(fig), before[1][key].get(fig)),
                "after_aa": change(after[0][key].get(fig), after[1][key].get(fig)),
                "before_after": [
                    change(b[key].get(fig), a[key].get(fig)) for b, a in zip(before, after)
                ],
            }
        rows[key] = row
    summary: dict = {"cells": len(keys), "leak_verdicts_same": same_verdicts}
    for fig in FIGURES:
        for side in ("before_aa", "after_aa"):
            got = [r[fig][side] for r in rows.values() if fig in r and r[fig][side] is not None]
            if got:
                summary[f"{fig} {side} median"] = statistics.median(got)
                summary[f"{fig} {side} max"] = max(got)
        across = [
            c for r in rows.values() if fig in r for c in r[fig]["before_after"] if c is not None
        ]
        if across:
            summary[f"{fig} before_after median"] = statistics.median(across)
    return {"summary": summary, "cells": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "sessions", nargs=4, help="BEFORE1 AFTER1 BEFORE2 AFTER2 (--benchmark-json)"
    )
    parser.add_argument("--out", help="the result (JSON)")
    args = parser.parse_args()
    loaded = [cells(p) for p in args.sessions]
    result = {"sessions": args.sessions, **compare(loaded[0::2], loaded[1::2])}
    timed = [per_op_cells(p) for p in args.sessions]
    for side, runs in (("before", timed[0::2]), ("after", timed[1::2])):
        got = per_op_precision(runs)
        result["summary"][f"per-op {side} median change"] = got["median_change"]
        result["summary"][f"per-op {side} order agrees"] = got["order_agreement"]
    for name, value in result["summary"].items():
        print(f"{name}: {value:.4g}" if isinstance(value, float) else f"{name}: {value}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
