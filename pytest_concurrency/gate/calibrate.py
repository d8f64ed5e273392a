"""Machine speed, measured in the same run, so a baseline from another machine can be used.

A fixed pure-Python CPU-bound loop (the interpreter work every model's scheduler does:
calls, allocation, attribute lookups, small-int arithmetic, list appends) timed several
times. The figure is the fastest repeat's ns per iteration: a neighbour's load only ever
adds time, and we want the machine's speed, not the load of the moment (the benchmark
samples carry that, and the gate's statistics judge it). On a 2-core machine with both cores
hogged, the median of repeats moved up to 2x while the fastest stayed within 2%.
"""

import platform
import time

ITERATIONS = 60_000  # one repeat: ~15 ms on a 2020s core
REPEATS = 15  # the fastest of these counts: ~0.25 s in all
METHOD = (
    "fastest of {repeats} timings of a {iterations}-iteration pure-Python loop (calibrate.py v1)"
)
VERSION = 1  # bump when the loop changes: figures of different versions do not compare


class _Node:
    __slots__ = ("value", "next")

    def __init__(self, value, nxt):
        self.value = value
        self.next = nxt


def _loop(iterations: int) -> int:
    # a little of everything a scheduler does: call, allocate, follow links, branch
    head = None
    total = 0
    items = []
    for i in range(iterations):
        head = _Node(i, head if i % 64 else None)
        total += head.value & 7
        items.append(total)
        if len(items) > 32:
            items.clear()
    return total


def measure(iterations: int = ITERATIONS, repeats: int = REPEATS) -> dict:
    """Time the loop; return the figure and how it was measured (stored in baselines)."""
    _loop(iterations // 10)  # warm up the interpreter's caches
    timings = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        _loop(iterations)
        timings.append(time.perf_counter_ns() - start)
    timings.sort()
    fastest, mid = timings[0], timings[len(timings) // 2]
    return {
        "version": VERSION,
        "ns_per_iteration": fastest / iterations,
        "median_ns_per_iteration": mid / iterations,  # how loaded the machine was meanwhile
        "iterations": iterations,
        "repeats": repeats,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "method": METHOD.format(repeats=repeats, iterations=iterations),
    }


def fastest(*measurements: dict | None) -> dict | None:
    """The least disturbed of several measurements (a session calibrates at start and end:
    a burst of load that covers one 0.25 s measurement rarely covers both)."""
    usable = [m for m in measurements if m]
    return min(usable, key=lambda m: m["ns_per_iteration"]) if usable else None


def session(start: dict | None, end: dict | None) -> dict | None:
    """A session's calibration: the faster of its start and end (see ``fastest``), with the
    ``swing`` between them (0.3 = one was 30% slower): how unsteady the machine was meanwhile."""
    best = fastest(start, end)
    if best is not None and start and end:
        slow, fast = sorted((start["ns_per_iteration"], end["ns_per_iteration"]), reverse=True)
        best = {**best, "swing": slow / fast - 1}
    return best


def typical(measurements) -> dict | None:
    """The median of several sessions' measurements (those of this loop version): the
    speed a baseline of many sessions stands for."""
    usable = sorted(
        (m for m in measurements if m and m.get("version") == VERSION),
        key=lambda m: m["ns_per_iteration"],
    )
    return usable[(len(usable) - 1) // 2] if usable else None


def ratio(current: dict | None, baseline: dict | None) -> float | None:
    """Current machine's time per iteration over the baseline's (> 1: this machine is slower).

    ``None`` when either side lacks a usable figure or the loops differ (another version).
    """
    if current is None or baseline is None:
        return None
    try:
        if current.get("version") != baseline.get("version"):
            return None
        cur, base = float(current["ns_per_iteration"]), float(baseline["ns_per_iteration"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return cur / base if cur > 0 and base > 0 else None
