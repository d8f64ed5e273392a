"""The memory gate: each record's memory figures against the baseline's, and leaks with or without one.

Memory is judged per metric, from the table ``METRICS``: what it is called in a verdict, its
unit, and the absolute floor below which a change never counts (a few bytes must not flap a
build). Every metric is judged by the one rule in ``_judge``:

* against the baseline (the median of its sessions that recorded the metric): regressed when
  it grew by more than the memory threshold *and* by more than the floor; improved, the same
  downwards; else unchanged. No baseline value (not in the baseline, or a baseline written
  before memory was recorded): new.
* a leak (``LEAK``: memory retained per task per round above its floor) fails on its own,
  with or without a baseline: a round that keeps what its tasks held grows without end.

The figures come from ``measure/memory.py`` (retained, peak) and the workloads' ``memory``
hooks (per live task); they repeat between runs far better than times, so there are no
statistics here, only sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from . import history, stats
from ..measure.records import Record, from_json, key_label, params_id
from .verdicts import IMPROVED, LEAKED, NEW, REGRESSED, UNCHANGED, MemoryResult, MemoryVerdict

#: Default memory threshold: 20 A/A comparisons of the smoke suite here (scripts/memory_evidence.py)
#: moved memory per task by at most 1.3%; only threads' peak heap moved more (up to 14%, by at
#: most 8.8 KiB, which the peak's 64 KiB floor absorbs).
DEFAULT_THRESHOLD = 0.10


@dataclass(frozen=True)
class Metric:
    key: str  # the record's extra_info key
    what: str  # how a verdict names it after the amount: "per task"
    to_bytes: int  # bytes in the stored unit
    floor: float  # smallest absolute change (stored unit) that can count
    per_task: bool = False  # a figure per task: its floor is also TOTAL_FLOOR_B over the round's tasks

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
#: Retained memory is ~0 when nothing leaks, so it is judged by its size alone (no baseline
#: needed): 512 bytes per task per round is above what library caches and lazily pruned
#: tables were seen to keep here (eventlet keeps cancelled sleep timers until it prunes them,
#: ~180 B per task per round on CPython 3.11 and 360 B on 3.10; gevent's hub ~70 B per IO
#: task) and below any task's frame (trio's, the smallest seen, ~700 B).
LEAK = Metric("retained_b_per_task_round", "per task per round", 1, 512.0)


def judge(baseline_doc: Mapping | None, current: Iterable[Record], threshold: float | None = None) -> MemoryResult:
    """Memory verdicts for ``current``: leaks always, changes when there is a baseline."""
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    base = _baseline_values(baseline_doc) if baseline_doc is not None else None
    known = {r.key for r in from_json(baseline_doc)} if baseline_doc is not None else set()
    verdicts, notes = [], []
    for rec in current:
        value = _value(rec.extra, LEAK)
        if value is not None and value > LEAK.floor:
            verdicts.append(MemoryVerdict(rec.key, LEAK.key, LEAKED, current=value,
                                          note="memory its tasks held stays after the round"))
        if base is None or rec.key not in known:  # a benchmark new to the baseline: the time gate says so
            continue
        for metric in METRICS:
            now = _value(rec.extra, metric)
            if now is not None:
                verdicts.append(_judge(metric, rec, base.get((rec.key, metric.key)), now, threshold))
    missing = sorted({find(v.metric).what for v in verdicts if v.status == NEW})
    if missing:
        notes.append(f"the baseline has no memory figures {' or '.join(missing)} for some benchmarks (written "
                     f"by an older version): those verdicts are new; refresh it (--concurrency-save-baseline) "
                     f"to gate them")
    order = {LEAKED: 0, REGRESSED: 1, IMPROVED: 2, NEW: 3, UNCHANGED: 4}
    verdicts.sort(key=lambda v: (order[v.status], v.key, v.metric))
    return MemoryResult(verdicts, threshold, notes)


def has_figures(records: Iterable[Record]) -> bool:
    """Whether any record has a memory figure (a plain benchmark test has none)."""
    return any(_value(r.extra, m) is not None for r in records for m in (*METRICS, LEAK))


def _judge(metric: Metric, rec: Record, values: list | None, now: float, threshold: float) -> MemoryVerdict:
    """The one rule for every metric against its baseline figures (see the module docstring)."""
    if not values:
        return MemoryVerdict(rec.key, metric.key, NEW, current=now, note="the baseline has no such figure")
    then = stats.median(values)
    change = now / then - 1 if then > 0 else None
    status = UNCHANGED
    if abs(now - then) > metric.floor_for(rec.extra) and change is not None and abs(change) > threshold:
        status = REGRESSED if change > 0 else IMPROVED
    return MemoryVerdict(rec.key, metric.key, status, baseline=then, current=now, change=change,
                         threshold=threshold)


def summary(result: MemoryResult) -> str:
    """``memory: 1 leak, 2 regressed, 40 unchanged (threshold 10%)``."""
    counts = [f"{len(result.by_status(s))} {s}" for s in (LEAKED, REGRESSED, IMPROVED, NEW, UNCHANGED)
              if result.by_status(s)]
    return (f"memory {'FAILED' if result.failed else 'passed'}: {', '.join(counts) or 'no leak'} "
            f"(threshold {result.threshold:.0%}; leak above {LEAK.floor:.0f} B {LEAK.what})")


def _value(extra: Mapping, metric: Metric) -> float | None:
    value = extra.get(metric.key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _baseline_values(doc: Mapping) -> dict:
    """(record key, metric key) -> the metric in each session of the baseline that has it."""
    out: dict = {}
    entries = [(r.key, r.extra) for r in from_json(doc)]
    for session in (doc.get(history.SECTION) or {}).get("history") or ():
        entries += [((b["workload"], params_id(b["params"]), b["backend"]), b.get("memory") or {})
                    for b in session.get("benchmarks") or ()]
    for key, extra in entries:
        for metric in (*METRICS, LEAK):
            value = _value(extra, metric)
            if value is not None:
                out.setdefault((key, metric.key), []).append(value)
    return out


def find(key: str) -> Metric:
    return next(m for m in (*METRICS, LEAK) if m.key == key)


def amount(metric_key: str, value: float | None) -> str:
    """A figure of the metric as bytes, KiB or MiB: ``5.6 KiB``."""
    if value is None:
        return "?"
    size = value * find(metric_key).to_bytes
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(size) >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.3g} B"


def line(v: MemoryVerdict) -> str:
    """``spawn[count=3000] on gevent: 5.6 -> 7.9 KiB per task (+41%)``; leaks:
    ``cancel[...] on greenlet: retains 1.9 KiB per task per round (leak)``."""
    m = find(v.metric)
    if v.status == LEAKED:
        return f"{key_label(v.key)}: retains {amount(v.metric, v.current)} {m.what} (leak)"
    if v.baseline is None:
        return f"{key_label(v.key)}: {amount(v.metric, v.current)} {m.what} (new: {v.note})"
    then = amount(v.metric, v.baseline).rsplit(" ", 1)[0]
    change = f" ({v.change:+.0%})" if v.change is not None else ""
    return f"{key_label(v.key)}: {then} -> {amount(v.metric, v.current)} {m.what}{change}"
