#!/usr/bin/env python3
"""A/A for the memory gate: how far memory figures move between sessions of the same code.

Each session is a real ``pytest benchmarks --benchmark-only`` run in a process of its own,
saved as a one-session baseline (``--concurrency-rounds`` only shortens the timed part: the
memory pass after it is the same). Then, offline, with the memory gate's own ``judge``,
every session is judged against every other one (ordered pairs: n sessions give n*(n-1)
comparisons). A leak, regressed or improved verdict is a false alarm. It also prints the
largest change each metric showed, which is what the default threshold must sit above.

    python3 evidence/memory_evidence.py --sessions 5                  # the README figures
    python3 evidence/memory_evidence.py --sessions 2 --scale smoke    # quick check
    python3 evidence/memory_evidence.py --reuse DIR                   # judge sessions saved before
    python3 evidence/memory_evidence.py --smoke    # 2 sessions of the smoke suite's ring on asyncio
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

from pytest_concurrency.gate import memory as memory_gate
from pytest_concurrency.gate import verdicts as V
from pytest_concurrency.measure.records import Document, key_label
from pytest_concurrency.store.history import Baseline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: its benchmarks/
#: --smoke: the smallest run that still saves two real sessions and judges them both ways
SMOKE = {"sessions": 2, "scale": "smoke", "rounds": 1, "backends": "asyncio", "select": "ring"}


def run_session(
    path: str, scale: str, rounds: int, backends: str | None, select: str | None = None
) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "benchmarks",
        "--benchmark-only",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--concurrency-scale={scale}",
        f"--concurrency-rounds={rounds}",
        f"--concurrency-save-baseline={path}",
        "--concurrency-baseline-sessions=1",
    ]
    if backends:
        cmd.append(f"--concurrency-backends={backends}")
    if select:
        cmd += ["-k", select]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if not os.path.exists(path):
        sys.exit(
            f"session failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    print(f"  {path}: exit {done.returncode}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--scale", default="default")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="timed rounds per benchmark (memory is measured apart)",
    )
    ap.add_argument("--backends", default=None)
    ap.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="memory threshold, percent (default: the gate's)",
    )
    ap.add_argument("--reuse", metavar="DIR", help="judge the s*.json sessions already in DIR")
    ap.add_argument("-k", dest="select", help="only the benchmarks pytest's -k selects")
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args()[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args()
    directory = args.reuse or tempfile.mkdtemp(prefix="memory-aa-")
    if not args.reuse:
        print(f"{args.sessions} sessions into {directory}", flush=True)
        for i in range(args.sessions):
            run_session(
                os.path.join(directory, f"s{i}.json"),
                args.scale,
                args.rounds,
                args.backends,
                args.select,
            )
    paths = sorted(
        os.path.join(directory, f)
        for f in os.listdir(directory)
        if f.startswith("s") and f.endswith(".json")
    )
    docs = [json.load(open(p, encoding="utf-8")) for p in paths]
    threshold = None if args.threshold is None else args.threshold / 100
    comparisons = alarms = judged = 0
    largest: dict = {}  # metric -> (|change|, label, change)
    for a, b in itertools.permutations(range(len(docs)), 2):
        result = memory_gate.judge(Baseline.of(docs[a]), Document.of(docs[b]).records, threshold)
        comparisons += 1
        for v in result.verdicts:
            judged += 1
            if v.status in (V.LEAKED, V.REGRESSED, V.IMPROVED):
                alarms += 1
                print(f"  false alarm, s{b} vs s{a}: {memory_gate.line(v)}")
            if v.change is not None and abs(v.change) > largest.get(v.metric, (0,))[0]:
                largest[v.metric] = (abs(v.change), key_label(v.key), v.change)
    records = [r for d in docs for r in Document.of(d).records]
    print(
        f"{len(docs)} sessions, {comparisons} A/A comparisons, {judged} memory verdicts: {alarms} false alarms "
        f"(threshold {(threshold or memory_gate.DEFAULT_THRESHOLD):.0%})"
    )
    for metric, (_, label, change) in sorted(largest.items()):
        print(f"  largest change of {metric}: {change:+.1%} ({label})")
    for leak in memory_gate.LEAKS:  # how close the cases that leak nothing came to each floor
        seen = [
            (r.extra[leak.key] / leak.floor_for(r.extra), r.extra[leak.key], r.label)
            for r in records
            if isinstance(r.extra.get(leak.key), (int, float))
        ]
        if seen:
            share, value, label = max(seen)
            print(
                f"  largest {leak.key}: {memory_gate.amount(leak.key, value)} ({label}): "
                f"{share:.0%} of its leak floor"
            )
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
