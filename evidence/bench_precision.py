"""Whether the benchmark suite is as precise as before a change: the main job run again and again
with the base's code and with this checkout's, each cell's per-op median compared between runs.

    python evidence/bench_precision.py                          # main against this checkout, default scale
    python evidence/bench_precision.py --scale smoke --label smoke
    python evidence/bench_precision.py --smoke                  # one model's rings at smoke scale: seconds
    python evidence/bench_precision.py -- --concurrency-backends=asyncio,greenlet -k "ring or switch"

The base (``--base``, a git ref: ``main``) is checked out in a git worktree of its own (removed at
the end) and imported first (``PYTHONPATH``), as this checkout is for its side. The sides take
turns, ``--runs`` sessions each (before, after, before, after, ...), so that the machine's load
and speed drift hit both alike. Each session is ``pytest benchmarks --benchmark-only`` with its
``--benchmark-json``. Per cell (a workload case on a model) and side:

  change   |ln(median of run k+1 / median of run k)| of its ``ns_per_op``, over consecutive runs
  order    whether the cell's rank among the models on its case is the same in consecutive runs

and per side: the median and 90th percentile of the changes, the fraction of cells whose order
agrees, the rounds a cell ran, and each session's wall and CPU seconds (its process tree's).
"After" must have a median change and an order agreement at least as good as "before". Whether
the two sides' changes differ beyond chance is asked cell by cell (each cell's mean change on
each side): a Wilcoxon signed-rank test, and a bootstrap 95% interval of the difference of the
medians (after - before). The result goes to ``evidence/bench_precision/LABEL.json``
(``--label``; a smoke run writes nowhere); ``--judge LABEL.json`` prints a kept result again,
with the paired comparison.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "bench_precision"


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def session(code: Path, pytest_args: list[str], out: Path) -> dict:
    """One session of the suite with ``code`` imported first; its cells and its cost."""
    started, cpu = time.perf_counter(), _children_cpu()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks",
            "--benchmark-only",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--benchmark-json={out}",
            *pytest_args,
        ],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code), "CI": "true"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if run.returncode != 0:
        raise SystemExit(f"a session with {code} failed ({run.returncode}):\n{run.stdout[-3000:]}")
    cells = {}
    for bench in json.loads(out.read_text())["benchmarks"]:
        extra = bench["extra_info"]
        if "ns_per_op" not in extra:
            continue
        case = f"{extra['workload']}[{','.join(f'{k}={v}' for k, v in sorted(extra['params'].items()))}]"
        cells[f"{case} {extra['backend']}"] = {
            "case": case,
            "model": extra["backend"],
            "ns_per_op": extra["ns_per_op"],
            "rounds": bench["stats"]["rounds"],
        }
    return {"wall_s": wall, "cpu_s": cpu, "cells": cells, "loadavg": os.getloadavg()[0]}


def _ranks(cells: dict) -> dict:
    """Each cell's rank among the models on its case (0: the fastest)."""
    by_case = defaultdict(list)
    for key, cell in cells.items():
        by_case[cell["case"]].append((cell["ns_per_op"], key))
    return {key: i for pairs in by_case.values() for i, (_, key) in enumerate(sorted(pairs))}


def compare(runs: list[dict]) -> dict:
    """A side's precision over its consecutive runs."""
    changes, agree, per_cell = [], [], defaultdict(list)
    for first, second in zip(runs, runs[1:]):
        ranks = (_ranks(first["cells"]), _ranks(second["cells"]))
        for key in sorted(set(first["cells"]) & set(second["cells"])):
            a, b = first["cells"][key]["ns_per_op"], second["cells"][key]["ns_per_op"]
            change = abs(math.log(b / a))
            same = ranks[0][key] == ranks[1][key]
            changes.append(change)
            agree.append(same)
            per_cell[key].append({"change": change, "order_same": same})
    changes.sort()
    return {
        "median_change": statistics.median(changes) if changes else None,
        "p90_change": changes[min(len(changes) - 1, int(0.9 * len(changes)))] if changes else None,
        "order_agreement": sum(agree) / len(agree) if agree else None,
        "comparisons": len(changes),
        "rounds_per_cell": statistics.mean(
            c["rounds"] for run in runs for c in run["cells"].values()
        ),
        "wall_s": [round(r["wall_s"], 1) for r in runs],
        "cpu_s": [round(r["cpu_s"], 1) for r in runs],
        "loadavg": [round(r["loadavg"], 1) for r in runs],
        "cells": per_cell,
    }


def paired(before: dict, after: dict) -> dict:
    """Whether after's changes differ from before's beyond chance, cell by cell."""
    from scipy import stats

    keys = sorted(set(before["cells"]) & set(after["cells"]))
    b, a = (
        [statistics.mean(c["change"] for c in side["cells"][k]) for k in keys]
        for side in (before, after)
    )
    rng = random.Random(1)
    draws = sorted(
        statistics.median(a[i] for i in pick) - statistics.median(b[i] for i in pick)
        for pick in ([rng.randrange(len(keys)) for _ in keys] for _ in range(4000))
    )
    return {
        "cells": len(keys),
        "median_difference": statistics.median(a) - statistics.median(b),
        "interval_95": [draws[100], draws[-101]],
        "wilcoxon_p": float(stats.wilcoxon(a, b).pvalue),
    }


def _paired_line(p: dict) -> str:
    low, high = (100 * x for x in p["interval_95"])
    return (
        f"paired over {p['cells']} cells: median change after - before "
        f"{100 * p['median_difference']:+.2f} points (95% {low:+.2f} to {high:+.2f}), "
        f"Wilcoxon p={p['wilcoxon_p']:.2f}"
    )


def _line(name: str, side: dict) -> str:
    return (
        f"{name}: median change {100 * side['median_change']:.2f}%, "
        f"p90 {100 * side['p90_change']:.2f}%, order agrees {100 * side['order_agreement']:.0f}% "
        f"({side['comparisons']} cells), {side['rounds_per_cell']:.1f} rounds a cell; "
        f"CPU s a run {side['cpu_s']}, wall s {side['wall_s']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--base", default=None, help="the git ref of 'before' (default: main; HEAD with --smoke)"
    )
    parser.add_argument("--scale", default="default", choices=("smoke", "default"))
    parser.add_argument("--runs", type=int, default=2, help="sessions a side (2 or more)")
    parser.add_argument("--label", default=None, help="the result's name (default: the scale)")
    parser.add_argument("--smoke", action="store_true", help="asyncio's rings at smoke scale")
    parser.add_argument("--judge", type=Path, help="print a kept result again, paired")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    if args.judge:
        kept = json.loads(args.judge.read_text())
        print(_line("before", kept["before"]))
        print(_line("after ", kept["after"]))
        print(_paired_line(paired(kept["before"], kept["after"])))
        return 0
    if args.runs < 2:
        parser.error("--runs: 2 or more (a change is between two runs)")
    scale = "smoke" if args.smoke else args.scale
    args.base = args.base or ("HEAD" if args.smoke else "main")  # a clone may have no main
    extra = [f"--concurrency-scale={scale}", *args.pytest_args]
    if args.smoke:
        extra += ["--concurrency-backends=asyncio", "-k", "ring"]
    with tempfile.TemporaryDirectory(prefix="bench-precision-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.base],
            check=True,
        )
        try:
            sides: dict = {"before": [], "after": []}
            for k in range(args.runs):
                for name, code in (("before", base), ("after", ROOT)):
                    sides[name].append(session(code, extra, Path(tmp) / f"{name}-{k}.json"))
                    print(f"{name} run {k + 1}: {sides[name][-1]['wall_s']:.0f} s", flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False
            )
    result = {
        "command": " ".join(["pytest benchmarks --benchmark-only", *extra]),
        "base": args.base,
        "before": compare(sides["before"]),
        "after": compare(sides["after"]),
    }
    before, after = result["before"], result["after"]
    result["at_least_as_good"] = (
        after["median_change"] <= before["median_change"]
        and after["order_agreement"] >= before["order_agreement"]
    )
    result["paired"] = paired(before, after)
    print(_line("before", before))
    print(_line("after ", after))
    print(_paired_line(result["paired"]))
    print(f"after at least as good: {'yes' if result['at_least_as_good'] else 'no'}")
    if not args.smoke:
        HERE.mkdir(exist_ok=True)
        out = HERE / f"{args.label or scale}.json"
        out.write_text(json.dumps(result, indent=1))
        print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
