"""The memory pass: what a case's rounds hold on to, run after its measured rounds.

Untimed and uncounted (no counter reading brackets it), in both measures, in the process
that ran the rounds (an isolated worker's own). It runs ``WARMUP + READINGS`` more rounds
(fewer, below) with ``tracemalloc`` on; after each it collects the garbage, trims the C heap
and reads every probe of ``memory_probes`` (Python heap, C heap, resident memory outside them,
threads, greenlets, RSS). A leak is growth per round, taken as the **median of the
round-to-round growths**: a steady leak grows the same in every round and reads whole; a
one-off (a cache filling, a free list, a table that doubles, a new malloc arena) grows one
round of ``READINGS`` and reads 0. When anything grew, ``READINGS`` more rounds are read, and
a leak must grow in both sets. The pass stops as soon as ``ENOUGH`` (three) growths of every
leak probe are at or under its floor, after three readings or four: the median of the five is
then at or under every floor too, and the five could not have read a leak. The verdicts are the
five's; the figures are the median of those read (the peak, the largest of those rounds), and
two of the pass's six rounds under ``tracemalloc`` (~3x a plain round each) are saved where
nothing leaks, one where a one-off grew in one of the first four.

A heavy case (a seed workload at the default scale) reads its leaks in the rounds of a lighter
case of the same workload instead (``workloads.leak_params``: the smoke scale's messages,
events, switches or tasks), and runs its own round traced twice only: the first reads its heap
per live task (spawn, cancel) or is a lighter round, the second its peak. A leak grows per task
or per round, and the gate's floors are per task and per round of the rounds that read it: in
fewer tasks a leak per task reads the same per task, a leak per round more. What only a large
case would keep (a leak per message, 20 times fewer messages) reads smaller. Judged in
gate/memory.py; the keys (see records.py):

``retained_b_per_task_round``  Python heap, bytes per round per task the round spawned
``c_heap_b_per_task_round``    C heap less the Python heap's own growth, the same way
``resident_b_per_round``       resident memory outside both heaps, bytes per round (a leak of
                               mapped memory is rarely per task: a pool's buffers, a stack)
``threads_per_round`` / ``greenlets_per_round``  how many more stay alive after each round
``rss_kib_per_round``          RSS, for the report only (see memory_probes)
``peak_traced_kib``            the traced heap's largest growth within a round: the case's
                               peak Python memory (repeats, unlike the process's peak RSS)
``memory_rounds``, ``tasks_per_round``  how they were read (no tasks: a user's plain test,
                               whose figures are per round)
``leak_tasks_per_round``       a lighter case's tasks, where its rounds read the leaks
``memory_not_measured``        {figure key: why} for a probe this process lacks

The workload's own ``memory`` hook (spawn, cancel: KiB per live task) runs after this.
"""

import array
import gc
import statistics
import tracemalloc

from . import memory_probes

WARMUP = 1  # rounds that fill caches and free lists first (their growth is not counted)
READINGS = 5  # growths: the median of five stands a one-off in two of them
#: Growths after which a pass where nothing grew by a floor stops (the median of ``READINGS``
#: is the third smallest: with three at or under a floor, it is too).
ENOUGH = READINGS // 2 + 1
#: The least growth per round that can be a leak, whatever a round's task count: the gate's floors
#: per round (gate/memory.py, where they are explained). Below them, a second set is not read.
ROUND_FLOORS = {
    "python": 512.0,
    "c": 4096.0,
    "outside": 256.0 * 1024,
    "threads": 0.5,
    "greenlets": 0.5,
}

#: probe -> the record key of its growth, and the scale from the probe's unit to the key's
_KEYS = {
    "python": ("retained_b_per_task_round", 1, True),
    "c": ("c_heap_b_per_task_round", 1, True),
    "outside": ("resident_b_per_round", 1, False),
    "threads": ("threads_per_round", 1, False),
    "greenlets": ("greenlets_per_round", 1, False),
    "rss": ("rss_kib_per_round", 1 / 1024, False),
}


def leak_pass(
    one_round, guard, tasks_of=lambda result: None, lighter=None, case_first=False
) -> dict:
    """The figures above from ``WARMUP + READINGS`` calls of ``one_round()`` under ``guard()``
    (``WARMUP + ENOUGH`` or one more once ``ENOUGH`` growths of every leak probe are at or under
    its floor, ``READINGS`` more when one grew in the five);
    ``tasks_of(result)`` is how many tasks a round spawned (None: figures per round).

    ``lighter``: a round of a lighter case of the same workload (``workloads.leak_params``),
    whose rounds read the leaks in place of ``one_round``'s. ``one_round`` then runs once for
    its peak heap and its tasks (``tasks_per_round``), traced after one ``lighter`` round, or
    after one of its own (``case_first``: where its first traced round reads a figure of its
    own, the heap per live task); the leak figures are per task of ``lighter``'s rounds
    (``leak_tasks_per_round``)."""
    probes, missing = memory_probes.available()
    # What the process held before the pass is frozen out of the collector's way: each reading
    # collects the garbage (``settle``), and a full collection of a session's heap (pytest, its
    # plugins, every model imported: 60k objects and more) took ~55 ms, where the rounds' own
    # objects take well under 1 ms. Their garbage is collected as before; the greenlet probe
    # counts the rounds' greenlets (the frozen ones are left out, the same in every reading).
    # Before it, only the young generations are collected (the measured rounds' garbage): a full
    # collection cost those ~55 ms once a pass too, half the pass at smoke scale. Older garbage
    # is frozen as it is, the same in every reading, and left to the next full collection.
    gc.collect(1)
    gc.freeze()
    tracemalloc.start()
    try:
        if lighter is None:
            out = _read_leaks(one_round, guard, tasks_of, probes)
        else:
            # The case's peak from its second traced round, not the first: a first round under
            # tracemalloc read a peak 1-12% under the later rounds' (rings, chains, spawn); after
            # one traced round, of the lighter case too, it reads as they do (to 0.5%).
            _peak_of(one_round if case_first else lighter, guard)
            memory_probes.settle()
            peak, result = _peak_of(one_round, guard)
            tasks = tasks_of(result) or 0
            del result
            memory_probes.settle()
            out = _read_leaks(lighter, guard, tasks_of, probes)
            out.update(
                peak_traced_kib=peak / 1024,
                tasks_per_round=tasks or None,
                leak_tasks_per_round=out["tasks_per_round"],
            )
    finally:
        tracemalloc.stop()
        gc.unfreeze()
    if missing:
        out["memory_not_measured"] = {_KEYS[name][0]: why for name, why in missing.items()}
    return out


def _peak_of(one_round, guard) -> tuple[int, object]:
    """(the traced heap's largest growth within a call of ``one_round()``, its result)."""
    start = memory_probes.python_heap()
    tracemalloc.reset_peak()
    with guard():
        result = one_round()
    return tracemalloc.get_traced_memory()[1] - start, result


def _read_leaks(one_round, guard, tasks_of, probes: dict) -> dict:
    """The pass's rounds of ``one_round`` (traced already) and the figures they read."""
    rounds = WARMUP + 2 * READINGS
    # Preallocated arrays of machine integers: the pass's own bookkeeping must not grow the
    # traced heap each round (a list of int objects grew it by 64 bytes per round).
    readings = {name: array.array("q", bytes(8 * rounds)) for name in probes}
    peaks = array.array("q", bytes(8 * rounds))
    tasks, done = 0, 0
    while done < rounds:
        peaks[done], result = _peak_of(one_round, guard)
        tasks = max(tasks, tasks_of(result) or 0)
        del result
        memory_probes.settle()
        for name, read in probes.items():
            readings[name][done] = read()
        done += 1
        if WARMUP + ENOUGH <= done < WARMUP + READINGS and _settled(readings, done):
            break
        if done == WARMUP + READINGS and not _grew(_growths(readings, done)):
            break
    growth = _growths(readings, done)
    out = {}
    for name, value in growth.items():
        key, scale, per_task = _KEYS[name]
        out[key] = value * scale / (tasks if per_task and tasks else 1)
    out.update(
        peak_traced_kib=max(peaks[WARMUP:done]) / 1024,
        memory_rounds=done - WARMUP,
        tasks_per_round=tasks or None,
    )
    return out


def _growths(readings: dict, done: int) -> dict:
    """Growth per round by probe, from the first ``done`` readings. With a second set of
    ``READINGS`` (taken when the first grew), a leak probe's growth is the smaller of the two
    sets' medians: a leak grows in both, a stretch of retention in one (a multiprocessing ring
    on a loaded machine once kept 612 B per task per round in five rounds running)."""
    sets = [slice(0, min(done, WARMUP + READINGS))] + (
        [slice(READINGS, done)] if done > WARMUP + READINGS else []
    )
    out = {}
    for name, values in _series(readings, done).items():
        medians = [_median_growth(values[part]) for part in sets]
        out[name] = medians[0] if name == "rss" else min(medians)
    return out


def _series(readings: dict, done: int) -> dict:
    """The first ``done`` readings by probe, the C heap's less the Python heap's (Python's large
    objects are malloc'd too)."""
    out = {name: values[:done] for name, values in readings.items()}
    if "c" in out:
        out["c"] = [c - p for c, p in zip(out["c"], out["python"])]
    return out


def _settled(readings: dict, done: int) -> bool:
    """Whether ``ENOUGH`` growths of every leak probe after the warm-up are at or under its
    floor: the median of ``READINGS`` is then too, whatever the others read."""
    return all(
        sum(b - a <= ROUND_FLOORS[name] for a, b in zip(values[WARMUP - 1 :], values[WARMUP:]))
        >= ENOUGH
        for name, values in _series(readings, done).items()
        if name in ROUND_FLOORS
    )


def _grew(growth: dict) -> bool:
    """Whether a leak probe grew in the first set by what can be a leak: then a second set must show it too."""
    return any(value > ROUND_FLOORS[name] for name, value in growth.items() if name in ROUND_FLOORS)


def _median_growth(after) -> float:
    """The median of the growths between readings after the warm-up (``after``: one per round)."""
    return float(statistics.median(b - a for a, b in zip(after[WARMUP - 1 :], after[WARMUP:])))
