"""What to divide a round by: wall time, CPU time, and CPU time over the controls' (measure/control.py).

Each process times three kinds of round for ``--seconds`` each with the plugin's ``Bracket``
beside them (a pure-Python loop, an asyncio loop's 300 ``sleep(0)`` hops, a dict of 3,000 string
keys), and reports each estimator's median. ``--processes`` processes run quiet, then as many
beside ``--busy`` busy loops. The spread of the medians across processes (coefficient of
variation) says how far two sessions of the same code read apart by each estimator, and the
ratio of the busy processes' mean to the quiet ones' how far a neighbour moves it.

    python3 evidence/control_estimators.py                    # 5 + 5 processes, 1.5 s a round kind
    python3 evidence/control_estimators.py --processes 10 --busy 1
    python3 evidence/control_estimators.py --smoke            # one process each, 0.2 s a kind
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from against_evidence import busy_loops  # beside this script


def one_process(seconds: float) -> dict:
    """In a process of its own: each round kind's median by each estimator."""
    import asyncio
    import time

    from pytest_concurrency.measure import control

    def pure():
        total = 0
        for i in range(20000):
            total += i * i % 7
        assert total

    loop = asyncio.new_event_loop()

    async def hops(n):
        for _ in range(n):
            await asyncio.sleep(0)

    def ring():
        loop.run_until_complete(hops(300))

    def keys():
        table = {str(i): i for i in range(3000)}
        assert len(table) == 3000

    out = {}
    for name, round_ in (
        ("pure-Python loop", pure),
        ("asyncio hops", ring),
        ("dict of strings", keys),
    ):
        bracket, walls = control.Bracket(), []
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            bracket.before()
            start = time.perf_counter()
            round_()
            took = time.perf_counter() - start
            bracket.after(took)
            walls.append(took)
        got = bracket.figures(len(walls))
        over = control.divided(walls, got["control_factor"], 1.0)  # CPU time in controls
        cpu = [w * b for w, b in zip(walls, bracket._busy)]  # each round's CPU share, as read
        out[name] = {
            "wall time": statistics.median(walls),
            "CPU time": statistics.median(cpu),
            "CPU time over the controls'": statistics.median(over),
            "cost": got["control_cost"],
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--busy", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="one process each, 0.2 s a round kind")
    args = ap.parse_args()
    if args.smoke:
        args.processes, args.seconds = 1, 0.2
    if args.child:
        print(json.dumps(one_process(args.seconds)))
        return 0
    argv = [sys.executable, __file__, "--child", f"--seconds={args.seconds}"]
    runs = {"quiet": [], "busy": []}
    for condition, busy in (("quiet", 0), ("busy", args.busy)):
        with busy_loops(busy):
            for _ in range(args.processes):
                done = subprocess.run(argv, capture_output=True, text=True, check=True)
                runs[condition].append(json.loads(done.stdout))
    kinds = list(runs["quiet"][0])
    estimators = [k for k in runs["quiet"][0][kinds[0]] if k != "cost"]
    print(
        f"{args.processes} processes quiet and {args.processes} beside {args.busy} busy loop(s), "
        f"{args.seconds} s a round kind; coefficient of variation of the processes' medians, "
        "all of them (busy mean / quiet mean)"
    )
    print("| round | " + " | ".join(estimators) + " | controls' cost |")
    print("|---" * (len(estimators) + 2) + "|")
    for kind in kinds:
        cells = []
        for est in estimators:
            quiet = [r[kind][est] for r in runs["quiet"]]
            busy = [r[kind][est] for r in runs["busy"]]
            both = quiet + busy
            cv = statistics.pstdev(both) / statistics.fmean(both)
            cells.append(f"{cv:.1%} ({statistics.fmean(busy) / statistics.fmean(quiet):.2f}x)")
        cost = statistics.median(r[kind]["cost"] for r in runs["quiet"] + runs["busy"])
        print(f"| {kind} | " + " | ".join(cells) + f" | {cost:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
