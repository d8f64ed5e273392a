"""The memory gate: each record's memory figures against the baseline's, and leaks with or without one.

Memory is judged per metric, from the table ``METRICS``: what it is called in a verdict, its
unit, and the absolute floor below which a change never counts (a few bytes must not flap a
build). Every metric is judged by the one rule in ``_judge``:

* against the baseline (the median of its sessions that recorded the metric): regressed when
  it grew by more than the memory threshold *and* by more than the floor; improved, the same
  downwards; else unchanged. No baseline value (not in the baseline, or a baseline written
  before memory was recorded): new.
* a leak (``LEAKS``: growth per round of the Python heap, the C heap, resident memory
  outside both, live threads or greenlets above its floor) fails on its own, with or without
  a baseline: a round that keeps what its tasks held grows without end. Resident memory is
  not called a leak where a heap leaked by a quarter of it or more: a heap's growth shows there
  too, rounded up to pages and arenas, and its own line already says where. A figure the process could not measure (no
  ``mallinfo2``) is named in the summary as not measured, which then never reads "passed".

The figures come from ``measure/memory.py`` (growth per round, peak) and the workloads' ``memory``
hooks (per live task); they repeat between runs far better than times, so there are no
statistics here, only sizes.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..measure.memory import ROUND_FLOORS
from ..measure.records import Record, key_label
from ..store import history
from . import stats
from .verdicts import (
    IMPROVED,
    LEAKED,
    NEW,
    REGRESSED,
    UNCHANGED,
    MemoryResult,
    MemoryVerdict,
    share,
)

#: Default memory threshold: 20 A/A comparisons of the smoke suite here (evidence/memory_evidence.py)
#: moved memory per task by at most 1.3%; only threads' peak heap moved more (up to 14%, by at
#: most 8.8 KiB, which the peak's 64 KiB floor absorbs).
DEFAULT_THRESHOLD = 0.10


@dataclass(frozen=True)
class Metric:
    key: str  # the record's extra_info key
    what: str  # how a verdict names it after the amount: "per task"
    to_bytes: int  # bytes in the stored unit
    floor: float  # smallest absolute change (stored unit) that can count
    per_task: bool = (
        False  # a figure per task: its floor is also TOTAL_FLOOR_B over the round's tasks
    )

    def floor_for(self, extra: Mapping) -> float:
        tasks = extra.get("tasks_per_round")
        if not self.per_task or not isinstance(tasks, (int, float)) or tasks < 1:
            return self.floor
        return max(self.floor, TOTAL_FLOOR_B / tasks / self.to_bytes)


#: A per-task change must also add up to this much over a round's tasks: RSS moves by whole
#: pages, so 10 greenlets read 4.0 or 4.8 KiB each in two runs of the same code.
TOTAL_FLOOR_B = 64 * 1024

METRICS = (
    Metric("kib_per_task", "per task", 1024, 0.25, per_task=True),
    Metric("peak_traced_kib", "peak heap in a round", 1024, 64.0),
)


@dataclass(frozen=True)
class Leak:
    """Growth per round of one memory pass probe (measure/memory.py) that fails on its own, with
    or without a baseline: a round that keeps what its tasks held grows without end."""

    key: str  # the record's extra_info key
    where: str  # "in the C heap"
    floor_per_task: float  # bytes (or count) per task per round that can be noise
    floor_per_round: float  # the same for a whole round: per task, its share of it counts too
    count: str = ""  # a count of things ("thread"), not bytes: per round, never per task
    per_task: bool = True  # bytes per task the round spawned (else per round)

    def floor_for(self, extra: Mapping) -> float:
        tasks = leak_tasks(extra)
        if self.count or not isinstance(tasks, (int, float)) or tasks < 1:
            return self.floor_per_round
        if not self.per_task:  # a figure per round: its floor grows with the round's tasks
            return max(self.floor_per_round, self.floor_per_task * tasks)
        return max(self.floor_per_task, self.floor_per_round / tasks)

    def amount(self, value: float) -> str:
        if self.count:
            return f"{value:g} {self.count}{'' if value == 1 else 's'}"
        return _size(value)


def leak_tasks(extra: Mapping):
    """The tasks a round of the memory pass's leak rounds spawned: a lighter case's
    (``leak_tasks_per_round``, measure/memory.py) where its rounds read them, else the case's."""
    return extra.get("leak_tasks_per_round", extra.get("tasks_per_round"))


#: Floors from what nothing-leaking rounds were seen to keep here (evidence/memory_evidence.py):
#: the Python heap ~0, but eventlet keeps cancelled sleep timers until it prunes them (~180 B
#: per task per round on CPython 3.11, 360 B on 3.10) and gevent's hub ~70 B per IO task; 512 B
#: is below any task's frame (trio's, the smallest seen, ~700 B). The C heap (mallinfo2) moved
#: by up to 4 KiB in single rounds of gevent's loop with nothing kept; a task's C leak of 64 B
#: or more counts once its round's total is above that. Resident memory outside the heaps moved
#: by up to 62 KiB a round in users' tests that keep nothing (evidence/plain_memory_evidence.py,
#: 100 short-lived threads a round included), and by up to 228 KiB a round on greenlet's spawn of
#: 3,000 tasks (evidence/memory_evidence.py, default scale): its floor is 256 KiB a round, or
#: 256 B per task the round spawned when that is more (a leaked stack is 4 KiB or more).
#: Counts grow by whole things: a median growth of one thread or greenlet per round is a task
#: that never ends.
HEAP_LEAKS = ("retained_b_per_task_round", "c_heap_b_per_task_round")
OUTSIDE = "resident_b_per_round"
LEAKS = (
    Leak(HEAP_LEAKS[0], "in the Python heap", 512.0, ROUND_FLOORS["python"]),
    Leak(HEAP_LEAKS[1], "in the C heap", 64.0, ROUND_FLOORS["c"]),
    Leak(OUTSIDE, "resident, outside every heap", 256.0, ROUND_FLOORS["outside"], per_task=False),
    Leak("threads_per_round", "threads alive", 0.5, ROUND_FLOORS["threads"], count="thread"),
    Leak(
        "greenlets_per_round", "greenlets alive", 0.5, ROUND_FLOORS["greenlets"], count="greenlet"
    ),
)


def judge(
    baseline: history.Baseline | None, current: Iterable[Record], threshold: float | None = None
) -> MemoryResult:
    """Memory verdicts for ``current``: leaks always, changes when there is a baseline."""
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    base = _baseline_values(baseline) if baseline is not None else None
    known = baseline.latest if baseline is not None else {}
    result = MemoryResult([], threshold, [])
    for rec in current:
        if not _has_pass(rec):
            result.unmeasured += (
                rec.extra.get("unit") == "call"
            )  # a user's own test that did not ask
            continue
        for why in (rec.extra.get("memory_not_measured") or {}).items():
            result.not_measured[why] = result.not_measured.get(why, 0) + 1
        result.verdicts += _leaks(rec)
        # a benchmark new to the baseline: the time gate says so
        if base is not None and rec.key in known:
            result.verdicts += _changes(rec, base, threshold)
    what = {m.key: m.what for m in METRICS}  # only a metric, never a leak, can be new
    missing = sorted({what[v.metric] for v in result.verdicts if v.status == NEW})
    if missing:
        result.notes.append(
            f"the baseline has no memory figures {' or '.join(missing)} for some benchmarks "
            f"(written by an older version): those verdicts are new; refresh it "
            f"(--concurrency-save-baseline) to gate them"
        )
    order = {LEAKED: 0, REGRESSED: 1, IMPROVED: 2, NEW: 3, UNCHANGED: 4}
    result.verdicts.sort(key=lambda v: (order[v.status], v.key, v.metric))
    return result


def _leaks(rec: Record) -> list[MemoryVerdict]:
    """What ``rec`` leaked, a verdict a figure (the resident growth left out where a heap's
    explains it)."""
    leaked = [leak for leak in LEAKS if _leaked(rec.extra, leak)]
    if _explained_by_the_heaps(rec.extra, leaked):
        leaked = [leak for leak in leaked if leak.key != OUTSIDE]
    return [
        MemoryVerdict(
            rec.key, leak.key, LEAKED, current=_value(rec.extra, leak), note=_per(rec.extra, leak)
        )
        for leak in leaked
    ]


def _changes(rec: Record, base: Mapping, threshold: float) -> list[MemoryVerdict]:
    """Each memory figure of ``rec`` against the baseline's."""
    verdicts = []
    for metric in METRICS:
        now = _value(rec.extra, metric)
        if now is not None:
            verdicts.append(_judge(metric, rec, base.get((rec.key, metric.key)), now, threshold))
    return verdicts


def has_figures(records: Iterable[Record]) -> bool:
    """Whether any record had the memory pass (a user's plain test has none unless asked)."""
    return any(_has_pass(r) for r in records)


def _has_pass(rec: Record) -> bool:
    return "memory_not_measured" in rec.extra or any(
        _value(rec.extra, m) is not None for m in (*METRICS, *LEAKS)
    )


def _explained_by_the_heaps(extra: Mapping, leaked: list) -> bool:
    """Whether a heap that leaked grew by a quarter or more of the resident growth outside the
    heaps: then that is the heap's growth, rounded up to pages and arenas, and its own line says
    where. A small heap leak beside a large mapped one explains nothing (a map object of ~100 B
    beside its 1 MiB of pages, on CPython 3.10, read 532 B a round in the Python heap)."""
    tasks = leak_tasks(extra)
    per_round = tasks if isinstance(tasks, (int, float)) and tasks >= 1 else 1
    heaps = sum(_value(extra, leak) or 0.0 for leak in leaked if leak.key in HEAP_LEAKS)
    return heaps > 0 and heaps * per_round >= (_value(extra, find(OUTSIDE)) or 0.0) / 4


def _leaked(extra: Mapping, leak: Leak) -> bool:
    value = _value(extra, leak)
    return value is not None and value > leak.floor_for(extra)


def _per(extra: Mapping, leak: Leak) -> str:
    """What a leak's figure is per: a task and a round, or a round (a user's plain test); the
    lighter case whose rounds read it, if one did: ``per task per round of count=10``."""
    tasks = leak_tasks(extra)
    if leak.count:
        per = "after every round"
    elif leak.per_task and isinstance(tasks, (int, float)) and tasks >= 1:
        per = "per task per round"
    else:
        per = "per round"
    light, params = extra.get("leak_params") or {}, extra.get("params") or {}
    changed = ",".join(f"{k}={v}" for k, v in light.items() if params.get(k) != v)
    return f"{per} of {changed}" if changed else per


def _judge(
    metric: Metric, rec: Record, values: list | None, now: float, threshold: float
) -> MemoryVerdict:
    """The one rule for every metric against its baseline figures (see the module docstring)."""
    if not values:
        return MemoryVerdict(
            rec.key, metric.key, NEW, current=now, note="the baseline has no such figure"
        )
    then = stats.median(values)
    change = now / then - 1 if then > 0 else None
    status = UNCHANGED
    if (
        abs(now - then) > metric.floor_for(rec.extra)
        and change is not None
        and abs(change) > threshold
    ):
        status = REGRESSED if change > 0 else IMPROVED
    return MemoryVerdict(
        rec.key, metric.key, status, baseline=then, current=now, change=change, threshold=threshold
    )


def summary(result: MemoryResult) -> str:
    """``memory FAILED: 1 leak, 40 unchanged (threshold 10%)``; never "passed" for what was not
    measured: ``memory: no leak where measured (threshold 10%); not measured: C heap (why) in 3``."""
    counts = [
        f"{len(result.by_status(s))} {s}"
        for s in (LEAKED, REGRESSED, IMPROVED, NEW, UNCHANGED)
        if result.by_status(s)
    ]
    gaps = [
        f"{_figure_name(key)} ({why}) in {n}"
        for (key, why), n in sorted(result.not_measured.items())
    ]
    if result.unmeasured:
        gaps.append(
            f"{result.unmeasured} benchmark{'s' if result.unmeasured > 1 else ''} had no memory pass "
            f"(a user's own test: --concurrency-memory or @pytest.mark.concurrency(memory=True))"
        )
    head = (
        "memory FAILED"
        if result.failed
        else "memory: no leak where measured"
        if gaps
        else "memory passed"
    )
    tail = f"; not measured: {'; '.join(gaps)}" if gaps else ""
    body = ", ".join(counts) or ("" if gaps and not result.failed else "no leak")
    return f"{head}{': ' + body if body else ''} (threshold {share(result.threshold)}){tail}"


def _figure_name(key: str) -> str:
    leak = next((leak for leak in LEAKS if leak.key == key), None)
    return leak.where.replace("in the ", "") if leak else "every figure" if key == "all" else key


def _value(extra: Mapping, metric: Metric | Leak) -> float | None:
    value = extra.get(metric.key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _baseline_values(baseline: history.Baseline) -> dict:
    """(record key, metric key) -> the metric in each session of the baseline that has it (a
    benchmark's second entry in the latest session too)."""
    out: dict = {}
    entries = [(k, s.memory) for k, sessions in baseline.sessions.items() for s in sessions]
    for key, figures in entries + [(r.key, r.extra) for r in baseline.twice]:
        for metric in METRICS:
            value = _value(figures, metric)
            if value is not None:
                out.setdefault((key, metric.key), []).append(value)
    return out


def find(key: str) -> Metric | Leak:
    return next(m for m in (*METRICS, *LEAKS) if m.key == key)


def _size(size: float) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(size) >= 1000 * scale >> 10:  # three digits at most: 0.996 MiB, not 1.02e+03 KiB
            return f"{size / scale:.3g} {unit}"
    return f"{size:.3g} B"


def amount(metric_key: str, value: float | None) -> str:
    """A figure of the metric as bytes, KiB or MiB (``5.6 KiB``), or a count (``2 threads``)."""
    if value is None:
        return "?"
    metric = find(metric_key)
    return metric.amount(value) if isinstance(metric, Leak) else _size(value * metric.to_bytes)


def line(v: MemoryVerdict) -> str:
    """``spawn[count=3000] on gevent: 5.6 -> 7.9 KiB per task (+41%)``; leaks:
    ``test_pool on gevent: keeps 40.2 KiB per round in the C heap (leak)``,
    ``test_pool on threading: 1 thread more alive after every round (leak)``."""
    m = find(v.metric)
    if isinstance(m, Leak):  # a leak's verdict is always LEAKED, and only a leak's
        if m.count:
            return f"{key_label(v.key)}: {amount(v.metric, v.current)} more alive {v.note} (leak)"
        return f"{key_label(v.key)}: keeps {amount(v.metric, v.current)} {v.note} {m.where} (leak)"
    if v.baseline is None:
        return f"{key_label(v.key)}: {amount(v.metric, v.current)} {m.what} (new: {v.note})"
    then = amount(v.metric, v.baseline).rsplit(" ", 1)[0]
    change = f" ({v.change:+.0%})" if v.change is not None else ""
    return f"{key_label(v.key)}: {then} -> {amount(v.metric, v.current)} {m.what}{change}"
