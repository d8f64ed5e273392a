#!/usr/bin/env python3
"""Detection and A/A of the memory pass on a user's own test (--concurrency-memory).

Each session is a real pytest run, in a process of its own, of ``tests/data/plain_leaks.py``
(a test whose tasks malloc 4 KiB each in C and never free it, keep a growing list, leave
one task that never ends per round, or map and keep 1 MiB a round that no heap counts,
through Python's mmap or C's; and
two that leak nothing: ten tasks a round, and 100 short-lived ones) on gevent, asyncio,
threading and greenlet, judged by the memory gate with no baseline. Prints, per model and
kind, in how many sessions the leak was caught (and where: Python heap, C heap, resident
outside the heaps, threads, greenlets), how many times a case without a leak was called one
(false alarms), and the largest resident growth outside the heaps a case without a leak read.

    python3 evidence/plain_memory_evidence.py --sessions 50     # the docs' figures
    python3 evidence/plain_memory_evidence.py --sessions 3      # quick check
    python3 evidence/plain_memory_evidence.py --smoke           # one session on asyncio
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from pytest_concurrency.gate import memory as memory_gate
from pytest_concurrency.gate import verdicts as V
from pytest_concurrency.measure.records import Document

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: tests/data/
#: --smoke: the smallest run that still runs a real session and judges every kind of leak
SMOKE = {"sessions": 1, "models": "asyncio"}

KINDS = ("none", "tasks", "c", "list", "forever", "mmap", "cmap")
CLEAN = ("none", "tasks")


def session(directory: str, models: str) -> dict:
    out = os.path.join(directory, "run.json")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "test_plain_leaks.py",
        "--benchmark-only",
        "--concurrency-memory",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        f"--concurrency-backends={models}",
        f"--benchmark-json={out}",
    ]
    done = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=600)
    if not os.path.exists(out):
        sys.exit(
            f"session failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    with open(out, encoding="utf-8") as fh:
        return json.load(fh)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--models", default="gevent,asyncio,threading,greenlet")
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args()[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args()
    directory = tempfile.mkdtemp(prefix="plain-memory-")
    shutil.copy(
        os.path.join(ROOT, "tests", "data", "plain_leaks.py"),
        os.path.join(directory, "test_plain_leaks.py"),
    )
    caught = collections.Counter()  # (model, kind) -> sessions with a leak verdict
    where = collections.defaultdict(collections.Counter)  # (model, kind) -> leak key -> sessions
    started = time.monotonic()
    outside_seen = (0.0, "")  # the largest resident growth outside the heaps with no leak
    for i in range(args.sessions):
        records = Document.of(session(directory, args.models)).records
        for rec in records:
            value = rec.extra.get(memory_gate.OUTSIDE)
            if rec.key[1].split("=", 1)[1] in CLEAN and value is not None:
                outside_seen = max(outside_seen, (value, f"{rec.key[1]} on {rec.key[2]}"))
        result = memory_gate.judge(None, records)
        flagged = collections.defaultdict(set)
        for v in result.by_status(V.LEAKED):
            kind = v.key[1].split("=", 1)[1]  # params id "kind=c"
            flagged[(v.key[2], kind)].add(v.metric)
        for key, metrics in flagged.items():
            caught[key] += 1
            where[key].update(metrics)
        print(
            f"  session {i + 1}: {sum(1 for k in flagged if k[1] not in CLEAN)} leaks caught, "
            f"{sum(1 for k in flagged if k[1] in CLEAN)} false alarms",
            flush=True,
        )
    elapsed = time.monotonic() - started
    shutil.rmtree(directory, ignore_errors=True)
    print(
        f"{args.sessions} sessions ({elapsed / args.sessions:.1f} s each, "
        f"{len(KINDS)} tests a model with their memory pass)"
    )
    floor = memory_gate.find(memory_gate.OUTSIDE).floor_per_round
    print(
        f"  largest resident growth outside the heaps without a leak: "
        f"{memory_gate.amount(memory_gate.OUTSIDE, outside_seen[0])} a round ({outside_seen[1]}), "
        f"{outside_seen[0] / floor:.0%} of its floor"
    )
    alarms = 0
    for model in args.models.split(","):
        for kind in KINDS:
            n = caught[(model, kind)]
            seen = ", ".join(
                f"{memory_gate.find(k).where} {c}" for k, c in sorted(where[(model, kind)].items())
            )
            if kind in CLEAN:
                alarms += n
                print(f"  {model:10} {kind:8} no leak: {n}/{args.sessions} false alarms ({seen})")
            else:
                print(f"  {model:10} {kind:8} caught {n}/{args.sessions} ({seen})")
    missed = sum(
        args.sessions - caught[(m, k)]
        for m in args.models.split(",")
        for k in KINDS
        if k not in CLEAN
    )
    return 1 if alarms or missed else 0


if __name__ == "__main__":
    sys.exit(main())
