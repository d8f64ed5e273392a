"""Whether a fork right after a thread's ``join``, with ``tracemalloc`` tracing, makes a child that
never runs, and whether waiting for the thread to leave the OS (``_multiprocessing._left_the_os``,
what the multiprocessing backend now does after joining a queue's feeder thread) prevents it.

``join`` returns while the thread still frees its state; under ``tracemalloc`` (the memory pass
runs its rounds so) that free holds the tracer's lock, and a fork at that moment leaves the lock
held in the child for good. Each try: start a thread, join it, (wait for it to leave the OS,) fork;
the child allocates and exits; a child not gone within 2 s is hung: its stack is read with gdb
(once a condition), then it is killed. The two conditions take turns in blocks, beside ``--busy``
busy loops (a thread preempted inside the free is what widens the window).

``--workload``: the same question asked of the memory pass's own rounds, spawn[count=10] on
multiprocessing[fork] under tracemalloc (``heap_round``), with ``_left_the_os`` in place or
replaced by nothing; a round that does not end within 10 s is hung (the watchdog ends it).

    python evidence/fork_after_join.py --tries 6000 --busy 3
    python evidence/fork_after_join.py --python ~/.pyenv/versions/3.12.1/bin/python ...
    python evidence/fork_after_join.py --workload --tries 2000 --busy 3
    python evidence/fork_after_join.py --smoke          # 100 tries a condition, no busy loop

The result goes to ``evidence/fork_after_join/LABEL.json`` (``--label``; a smoke run writes nowhere).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent / "fork_after_join"
BLOCK = 250  # tries of one condition before the other's turn
HUNG_AFTER_S = 2.0


def _stack(pid: int) -> list[str]:
    if shutil.which("gdb") is None:
        return ["(no gdb here)"]
    run = subprocess.run(
        ["gdb", "-p", str(pid), "-batch", "-ex", "bt"], capture_output=True, text=True, timeout=60
    )
    return [line for line in run.stdout.splitlines() if line.startswith("#")][:12]


def one_try(wait_for_the_os: bool) -> tuple[bool, list[str]]:
    """Whether the child of one fork after a join hung, and its stack if so."""
    from pytest_concurrency.backends._multiprocessing import _left_the_os

    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    if wait_for_the_os:
        _left_the_os(thread, 1.0)
    pid = os.fork()
    if pid == 0:
        [object() for _ in range(100)]  # the child's first allocations
        os._exit(0)
    deadline = time.monotonic() + HUNG_AFTER_S
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            stack = _stack(pid)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return True, stack
        time.sleep(0.0005)
    return False, []


def trial(tries: int) -> dict:
    """Both conditions, ``tries`` each, in turns of ``BLOCK``, under tracemalloc."""
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # 3.12+: fork with threads
    tracemalloc.start()
    result = {
        c: {"tries": 0, "hung": 0, "stack": []} for c in ("join only", "join, then left the OS")
    }
    while result["join only"]["tries"] < tries:
        for condition, waits in (("join only", False), ("join, then left the OS", True)):
            for _ in range(min(BLOCK, tries - result[condition]["tries"])):
                hung, stack = one_try(waits)
                result[condition]["tries"] += 1
                result[condition]["hung"] += hung
                if hung and not result[condition]["stack"]:
                    result[condition]["stack"] = stack
    return result


def workload_trial(rounds: int) -> dict:
    """The memory pass's rounds of spawn[count=10] on multiprocessing[fork], both conditions."""
    from pytest_concurrency import backends
    from pytest_concurrency.backends import _multiprocessing, watchdog
    from pytest_concurrency.workloads.spawn import WORKLOAD

    left_the_os = _multiprocessing._left_the_os
    backend = backends.load("multiprocessing[fork]")
    tracemalloc.start()
    one_round = WORKLOAD.heap_round(backend, {"count": 10})
    result = {
        c: {"tries": 0, "hung": 0, "stack": []} for c in ("join only", "join, then left the OS")
    }
    while result["join only"]["tries"] < rounds:
        for condition, waits in (("join only", None), ("join, then left the OS", left_the_os)):
            _multiprocessing._left_the_os = waits or (lambda thread, timeout: None)
            for _ in range(min(BLOCK // 5, rounds - result[condition]["tries"])):
                result[condition]["tries"] += 1
                try:
                    with watchdog.deadline(10.0, "spawn[count=10] on multiprocessing[fork]")():
                        one_round()
                except watchdog.WorkloadTimeout as timeout:
                    result[condition]["hung"] += 1
                    result[condition]["stack"] = (
                        result[condition]["stack"] or str(timeout).splitlines()
                    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=6000, help="forks a condition")
    parser.add_argument("--busy", type=int, default=3, help="busy loops beside (the load)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to try")
    parser.add_argument("--label", default=None, help="the result's name (default: its version)")
    parser.add_argument("--workload", action="store_true", help="the memory pass's spawn rounds")
    parser.add_argument("--smoke", action="store_true", help="100 tries a condition, not kept")
    parser.add_argument(
        "--trial", action="store_true", help=argparse.SUPPRESS
    )  # the tries' process
    args = parser.parse_args()
    if args.trial:
        print(json.dumps((workload_trial if args.workload else trial)(args.tries)))
        return
    tries, busy = (100, 0) if args.smoke else (args.tries, args.busy)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    started = time.monotonic()
    try:
        run = subprocess.run(
            [args.python, __file__, "--trial", "--tries", str(tries)]
            + ["--workload"] * args.workload,
            capture_output=True,
            text=True,
            check=True,
        )
        load = os.getloadavg()[0]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    version = subprocess.run(
        [args.python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    result = json.loads(run.stdout)
    for condition, got in result.items():
        unit = "rounds" if args.workload else "children"
        print(f"{version} {condition}: {got['hung']} of {got['tries']} {unit} hung")
        for line in got["stack"][:9]:
            print(f"    {line[:110]}")
    if args.smoke:
        return
    HERE.mkdir(exist_ok=True)
    out = HERE / f"{args.label or version}.json"
    record = {
        "command": " ".join(sys.argv),
        "python": version,
        "tried": "spawn[count=10] rounds on multiprocessing[fork]" if args.workload else "forks",
        "busy_loops": busy,
        "load_1min_at_end": round(load, 1),
        "wall_s": round(time.monotonic() - started, 1),
        **result,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
