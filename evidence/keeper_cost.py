#!/usr/bin/env python3
"""What running a command under ``lifetime.run``'s keeper costs beside ``subprocess.run``
(issue 65): the same command, each way in turns, ``--calls`` times; the CPU seconds of this
process and its waited-for children (``RUSAGE_SELF`` + ``RUSAGE_CHILDREN``) and the wall seconds of
each call. One line in ``keeper/results.jsonl`` (``--out``) per run, with the load before and after.

    python3 evidence/keeper_cost.py                    # git --version, 20 calls each way
    python3 evidence/keeper_cost.py --smoke            # 2 calls each way, nothing recorded
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import time
from pathlib import Path

from pytest_concurrency import lifetime


def _cpu() -> float:
    mine, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="2 calls each way, nothing recorded")
    here = Path(__file__).parent / "keeper" / "results.jsonl"
    parser.add_argument("--out", default=str(here))
    args = parser.parse_args()
    calls = 2 if args.smoke else args.calls
    command = ["git", "--version"]
    ways = {"keeper": lifetime.run, "subprocess": subprocess.run}
    totals = {way: [0.0, 0.0] for way in ways}
    load = os.getloadavg()[0]
    for _ in range(calls):
        for way, run in ways.items():
            cpu, wall = _cpu(), time.perf_counter()
            run(command, capture_output=True)
            totals[way][0] += _cpu() - cpu
            totals[way][1] += time.perf_counter() - wall
    row = {
        "command": command,
        "calls": calls,
        **{f"{w}_cpu_ms": round(c / calls * 1000, 1) for w, (c, _) in totals.items()},
        **{f"{w}_wall_ms": round(t / calls * 1000, 1) for w, (_, t) in totals.items()},
        "load": [round(load, 1), round(os.getloadavg()[0], 1)],
    }
    print(json.dumps(row))
    print(
        f"keeper: {row['keeper_cpu_ms']} ms of CPU a call, subprocess.run: "
        f"{row['subprocess_cpu_ms']} ms ({calls} calls each way, in turns)"
    )
    if not args.smoke:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
