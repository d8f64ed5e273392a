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
    does not count. Traced bytes repeat from run to run (no allocator reuse, no other
    process in them), on every model: a task a model fails to let go of keeps Python
    objects (its frame, its greenlet, coroutine, ``Thread`` or ``Process`` handle) even
    where its stack or process lives outside the heap. RSS was tried for threads and
    processes and cried wolf: chain on threading grew RSS by 1-9 KiB per task in every
    round with nothing kept (glibc's per-thread malloc arenas fragmenting).
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


def retained_and_peak(workload, backend, params: dict, guard) -> dict:
    """The figures above (keys as in records.py) from ``WARMUP + READINGS`` untimed rounds."""
    rounds = WARMUP + READINGS
    # Preallocated arrays of machine integers: the pass's own bookkeeping must not grow the
    # traced heap each round (a list of int objects grew it by 64 bytes per round).
    heap_after, peaks = (array.array("q", bytes(8 * rounds)) for _ in range(2))
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
    finally:
        tracemalloc.stop()
    return {
        "retained_b_per_task_round": _steady_growth(heap_after) / per_task,
        "peak_traced_kib": max(peaks[WARMUP:]) / 1024,
        "memory_rounds": READINGS,
        "tasks_per_round": per_task,
    }


def _steady_growth(after) -> float:
    """The growth every round after the warm-up had at least (``after``: readings after each round)."""
    return min(b - a for a, b in zip(after[WARMUP - 1:], after[WARMUP:]))
