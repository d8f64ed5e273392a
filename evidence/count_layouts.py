#!/usr/bin/env python3
"""Why a count moves with no change in the code: the same ring counted round by round in several layouts.

Each layout is one process under callgrind (as the plugin counts: started uninstrumented, hash
seed pinned, ``gc.collect()`` before every round) in a working directory whose name has another
length and with another amount of environment: what differs between two checkouts of the same
code, or a laptop and CI. Every round is its own dump, so the script prints each round's count,
marks the rounds in which CPython 3.11 quickened code (a function runs unquickened until its
8th call), and for the two layouts whose late rounds differ most, the functions that differ.

    python3 evidence/count_layouts.py --backends gevent,asyncio --rounds 16
    python3 evidence/count_layouts.py --backends gevent --rounds 10 --layouts 1:0,5:0,9:0,13:0,17:0,21:0,25:0,29:0,33:0,37:0
    python3 evidence/count_layouts.py --smoke     # asyncio, 2 rounds in 2 layouts
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from plain_count_repeat import LAPS, N_TASKS, TEST  # beside this script

from pytest_concurrency import backends
from pytest_concurrency.measure import callgrind, profile

QUICKEN = "_PyCode_Quicken"
#: --smoke: the smallest run that still counts under valgrind, round by round, in two layouts
SMOKE = {"backends": "asyncio", "rounds": 2, "late": 1, "layouts": "1:0,8:0"}


def user_ring():
    """The ring of evidence/plain_count_repeat.py's test (the same file text), unchanged (``extra(0)``):
    compiled once, as a test file is (code compiled anew would run unquickened every round)."""
    namespace: dict = {}
    exec(compile(TEST, "test_plain.py", "exec"), namespace)
    return namespace["ring"]


def child(model: str, rounds: int, keep: str) -> None:
    """Under callgrind: ``rounds`` rounds, each dump kept as ``keep/roundN``; the counts as JSON."""
    backend, ring = backends.load(model), user_ring()
    counter = callgrind.Counter(os.environ[callgrind.ENV_DIR])
    counts = []
    for r in range(rounds):
        gc.collect()
        before = counter()
        total = backend.run(ring(backend))
        counts.append(int(counter() - before))
        assert total == LAPS * (N_TASKS - 1), total  # every lap: one increment per other task
        shutil.copy(counter.last_dump, os.path.join(keep, f"round{r}"))
    print(json.dumps(counts))


def layout(model: str, rounds: int, name_length: int, pad: int, work: str) -> tuple[list, str]:
    """One process in a directory whose name is ``name_length`` long, with ``pad`` bytes more environment."""
    cwd = os.path.join(work, f"{model}-{name_length}-{pad}", "d" * name_length)
    keep, dumps = os.path.join(cwd, "rounds"), os.path.join(cwd, "dumps")
    os.makedirs(keep)
    os.makedirs(dumps)
    env = {
        **callgrind.counted_env({k: v for k, v in os.environ.items() if k != "PAD"}, dumps),
        "PAD": "x" * pad,
    }
    argv = callgrind.command(
        [sys.executable, os.path.abspath(__file__), "--child", model, str(rounds), keep], dumps
    )
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(
            f"{model} in layout {name_length}:{pad} exited {done.returncode}:\n{done.stderr[-2000:]}"
        )
    return json.loads(done.stdout.splitlines()[-1]), keep


def quickened(keep: str, r: int) -> bool:
    with open(os.path.join(keep, f"round{r}"), encoding="utf-8", errors="replace") as fh:
        return QUICKEN in fh.read()


def differing(a: str, b: str, shown: int = 6) -> list[str]:
    """The functions whose own cost differs most between two dumps."""

    def costs(path):
        return {(fn, ob): n for fn, ob, n in profile.read(path, top=10**6)["profile"]}

    ca, cb = costs(a), costs(b)
    moved = sorted(
        ((cb.get(k, 0) - ca.get(k, 0), k) for k in set(ca) | set(cb)), key=lambda d: -abs(d[0])
    )
    return [f"{d:+,} {fn} ({ob})" for d, (fn, ob) in moved[:shown]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="gevent,asyncio")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument(
        "--late",
        type=int,
        default=8,
        help="rounds from this one on are 'late': after 3.11's quickening",
    )
    ap.add_argument(
        "--layouts",
        default="1:0,8:0,32:0,1:1000,1:3000",
        help="NAME_LENGTH:ENV_PAD,...: the working directory's name length and bytes of environment added",
    )
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args()[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    if not 0 <= args.late < args.rounds:
        ap.error(f"--late {args.late} must be a round of the {args.rounds} (--rounds)")
    if callgrind.unavailable_reason():
        raise SystemExit(callgrind.unavailable_reason())
    layouts = [tuple(int(x) for x in part.split(":")) for part in args.layouts.split(",")]
    with tempfile.TemporaryDirectory(prefix="count-layouts-") as work:
        for model in args.backends.split(","):
            late = {}
            for name_length, pad in layouts:
                counts, keep = layout(model, args.rounds, name_length, pad, work)
                marks = ["q" if quickened(keep, r) else "" for r in range(len(counts))]
                late[(name_length, pad)] = (statistics.median(counts[args.late :]), keep)
                print(
                    f"{model}, directory name {name_length}, +{pad} B environment: "
                    + " ".join(f"{c:,}{m}" for c, m in zip(counts, marks)),
                    flush=True,
                )
            values = sorted((v, k) for k, (v, _) in late.items())
            (low, a), (high, b) = values[0], values[-1]
            print(
                f"{model}: medians of rounds {args.late}+ across layouts {low:,.0f} .. {high:,.0f} "
                f"({high / low - 1:.3%}); q: the round quickened code"
            )
            if high > low:
                print(f"  {a} -> {b}, round {args.late}, by function (own cost):")
                for line in differing(
                    os.path.join(late[a][1], f"round{args.late}"),
                    os.path.join(late[b][1], f"round{args.late}"),
                ):
                    print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
