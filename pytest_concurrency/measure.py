"""Time a workload case through pytest-benchmark and attach the per-model metrics.

Wall time per round is pytest-benchmark's (``pedantic``, ``iterations=1``, so the raw
samples are round times). Around the rounds we take CPU time and context switches from
``getrusage`` for this process plus whatever task processes the backend reports, and
divide by the number of rounds run (warm-up included, since they also ran).
"""

from __future__ import annotations

import contextlib
import resource
import statistics
import sys
import time
from dataclasses import dataclass

from .records import SCHEMA
from . import workloads
from .workloads import Outcome, WorkloadError


@dataclass
class Usage:
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    ctx_voluntary: float = 0.0
    ctx_involuntary: float = 0.0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(*(a - b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def per(self, n: int) -> dict:
        return {k: v / n for k, v in zip(self.__dataclass_fields__, self.as_tuple())}

    def as_tuple(self) -> tuple:
        return (self.cpu_user_s, self.cpu_sys_s, self.ctx_voluntary, self.ctx_involuntary)


def self_usage() -> Usage:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(r.ru_utime, r.ru_stime, r.ru_nvcsw, r.ru_nivcsw)


def task_process_usage(backend) -> Usage:
    """CPU of the backend's own task processes (multiprocessing), reset on each call.

    Forkserver and spawn children are not our direct children, so RUSAGE_CHILDREN
    would miss them; the backend collects what each child reports when it ends.
    """
    take = getattr(backend, "take_child_usage", None)
    return Usage(**take()) if take else Usage()


def peak_rss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS reports bytes


def identity(backend, workload, params: dict) -> dict:
    """The extra_info keys that say what was measured (see records.py)."""
    return {
        "concurrency_schema": SCHEMA,
        "backend": backend.name,
        "backend_version": backend.version,
        "workload": workload.name,
        "params": dict(params),
        "unit": workload.unit,
    }


def figures(samples: list[float], outcomes: list[Outcome], usage: Usage, calls: int) -> dict:
    """Per-op figures and per-round usage from the rounds' samples and outcomes."""
    ops = _consistent_ops(outcomes)
    median = statistics.median(samples)
    out = {
        "ops": ops,
        "ns_per_op": median / ops * 1e9,
        "ops_per_s": ops / median if median > 0 else float("inf"),
        "peak_rss_kib": peak_rss_kib(),
        **usage.per(max(calls, 1)),
    }
    for key in sorted({k for o in outcomes for k in o.extra}):
        out[key] = statistics.median(o.extra[key] for o in outcomes if key in o.extra)
    if "ideal_s" in out:
        out["overhead_s"] = median - out["ideal_s"]
    return out


def _consistent_ops(outcomes: list[Outcome]) -> int:
    counts = {o.ops for o in outcomes}
    if len(counts) != 1:
        raise WorkloadError(f"rounds did different amounts of work: ops {sorted(counts)}")
    return counts.pop()


def bench_in_process(benchmark, backend, workload, params: dict, rounds: int, warmup: int, guard) -> None:
    """Run ``rounds`` timed rounds here; ``guard`` bounds each round's time (see watchdog)."""
    outcomes: list[Outcome] = []

    def one_round():
        with guard():
            outcomes.append(workload.run(backend, params))

    benchmark.extra_info.update(identity(backend, workload, params))
    task_process_usage(backend)  # drop anything left from before
    before = self_usage()
    benchmark.pedantic(one_round, rounds=rounds, warmup_rounds=warmup, iterations=1)
    used = self_usage() - before + task_process_usage(backend)
    samples = _samples(benchmark)
    if samples:  # None under --benchmark-disable: the workload still ran and checked itself
        benchmark.extra_info.update(figures(samples, outcomes, used, len(outcomes)))
        with guard():
            benchmark.extra_info.update(workloads.memory(workload, backend, params))


def run_rounds(backend, workload, params: dict, rounds: int, warmup: int, *,
               progress=lambda: None, guard=contextlib.nullcontext, with_memory=True):
    """Time each round with the same clock pytest-benchmark uses; return samples + figures.

    For isolated workers and for re-measuring a suspect, where pytest-benchmark's fixture
    is not the one timing. ``progress`` is called after every round (an isolated worker's
    per-round deadline restarts on it); ``guard`` bounds each round in-process.
    """
    workloads.prepare(workload, params)

    def timed_round() -> float:
        with guard():
            start = time.perf_counter()
            outcomes.append(workload.run(backend, params))
            elapsed = time.perf_counter() - start
        progress()
        return elapsed

    outcomes: list[Outcome] = []
    for _ in range(warmup):
        timed_round()
    task_process_usage(backend)
    before = self_usage()
    samples = [timed_round() for _ in range(rounds)]
    used = self_usage() - before + task_process_usage(backend)
    extra = figures(samples, outcomes, used, len(outcomes))
    if with_memory:
        with guard():
            extra.update(workloads.memory(workload, backend, params))
        progress()
    return samples, extra


def record_external(benchmark, backend_identity: dict, samples: list[float], extra: dict) -> None:
    """Feed rounds measured elsewhere (an isolated worker) into pytest-benchmark's records."""
    benchmark.extra_info.update(backend_identity)
    benchmark.extra_info.update(extra)
    if getattr(benchmark, "disabled", False):
        return
    stats = benchmark._make_stats(1)  # pytest-benchmark's own record, as pedantic would create
    for sample in samples:
        stats.update(sample)


def _samples(benchmark) -> list[float]:
    meta = getattr(benchmark, "stats", None)
    return list(meta.stats.data) if meta is not None else []
