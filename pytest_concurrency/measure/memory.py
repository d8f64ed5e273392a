"""The memory pass: what a workload's rounds hold on to, run after its measured rounds.

Untimed and uncounted (no counter reading brackets it), in both measures, in the process
that ran the rounds (an isolated worker's own, so its peak is per worker). It runs
``WARMUP + READINGS`` more rounds with ``tracemalloc`` on, and after each one collects the
garbage and reads the traced bytes:

``retained_b_per_task_round``
    What a round leaves behind, per task it spawned: the smallest of the round-over-round
    growths after the warm-up, divided by the round's tasks (``Outcome.tasks``). A steady
    leak grows every round by the same amount and shows whole; a one-off cache, a free
    list filled once or a table that doubles now and then grows some rounds, not all, and
    does not count. Traced bytes repeat from
    run to run (no allocator reuse, no other process in them), which is why they are used
    rather than RSS, with one exception: tasks that are threads or processes also keep
    memory outside Python's heap (stacks, whole processes), so for them RSS plus the
    children's USS is read too (not under valgrind, whose memory would be in it), and the
    larger growth counts.
``peak_traced_kib``
    The largest growth of the traced heap during one round, above where it started: the
    model's peak Python memory for this case (a repeatable figure, unlike the process's
    ``peak_rss_kib``, which the time measure also records).
``memory_rounds``, ``tasks_per_round``
    How many growths the retained figure is the smallest of; the tasks a round spawned.

The workload's own ``memory`` hook (spawn, cancel: KiB per live task) runs after this.
"""

from __future__ import annotations

import array
import gc
import tracemalloc

from ..workloads import _live_memory

WARMUP = 1  # rounds that fill caches and free lists first (their growth is not counted)
READINGS = 4  # growths: a leak grows the heap in every one of them
_OUTSIDE_HEAP = ("thread", "process")  # task kinds whose memory RSS must also show


def retained_and_peak(workload, backend, params: dict, guard, with_rss: bool) -> dict:
    """The figures above (keys as in records.py) from ``WARMUP + READINGS`` untimed rounds."""
    rounds = WARMUP + READINGS
    rss = with_rss and backend.task_kind in _OUTSIDE_HEAP
    # Preallocated arrays of machine integers: the pass's own bookkeeping must not grow the
    # traced heap each round (a list of int objects grew it by 64 bytes per round).
    heap_after, rss_after, peaks = (array.array("q", bytes(8 * rounds)) for _ in range(3))
    per_task = 1
    tracemalloc.start()
    try:
        for i in range(rounds):
            start = _live_memory.traced_bytes()
            tracemalloc.reset_peak()
            with guard():
                outcome = workload.run(backend, params)
            peaks[i] = tracemalloc.get_traced_memory()[1] - start
            per_task = max(per_task, outcome.tasks or outcome.ops)
            del outcome
            gc.collect()
            heap_after[i] = _live_memory.traced_bytes()
            if rss:
                rss_after[i] = _live_memory.resident_bytes()
    finally:
        tracemalloc.stop()
    retained = _steady_growth(heap_after)
    if rss:
        retained = max(retained, _steady_growth(rss_after))
    return {
        "retained_b_per_task_round": retained / per_task,
        "peak_traced_kib": max(peaks[WARMUP:]) / 1024,
        "memory_rounds": READINGS,
        "tasks_per_round": per_task,
    }


def _steady_growth(after) -> float:
    """The growth every round after the warm-up had at least (``after``: readings after each round)."""
    return min(b - a for a, b in zip(after[WARMUP - 1:], after[WARMUP:]))
