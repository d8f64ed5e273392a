"""Time a workload case through pytest-benchmark and attach the per-model metrics.

Wall time per round is pytest-benchmark's (``pedantic``, ``iterations=1``, so the raw
samples are round times). Around the rounds we take CPU time and context switches from
``getrusage`` for this process plus whatever task processes the backend reports, and
divide by the number of rounds run (warm-up included, since they also ran). We also take
the whole machine's CPU time, so the gate knows how busy other processes kept the cores
(``foreign_cpu``): threads and processes need free cores, and a busy neighbour slows them
without any change in the code.
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


def machine_busy_s() -> float:
    """CPU seconds all processes on the machine have used since boot (``/proc/stat``)."""
    import psutil

    t = psutil.cpu_times()
    idle = t.idle + sum(getattr(t, name, 0.0) for name in ("iowait", "guest", "guest_nice"))
    return sum(t) - idle  # guest time is already counted in user time


class Window:
    """A stretch of rounds: our CPU usage over it, and other processes' load on the machine."""

    def __init__(self, backend):
        self._backend = backend
        task_process_usage(backend)  # drop anything left from before
        self._usage, self._busy, self._start = self_usage(), machine_busy_s(), time.perf_counter()

    def close(self) -> tuple[Usage, dict]:
        """(our usage, the machine's conditions as ``extra_info`` keys: see records.py)."""
        wall = time.perf_counter() - self._start
        used = self_usage() - self._usage + task_process_usage(self._backend)
        foreign = machine_busy_s() - self._busy - used.cpu_user_s - used.cpu_sys_s
        return used, {"foreign_cpu": round(max(0.0, foreign / wall) if wall > 0 else 0.0, 3)}


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
        "task_kind": backend.task_kind,
    }


def figures(samples: list[float], outcomes: list[Outcome], usage: Usage, calls: int, machine: dict) -> dict:
    """Per-op figures and per-round usage from the rounds' samples and outcomes."""
    ops = _consistent_ops(outcomes)
    median = statistics.median(samples)
    out = {
        "ops": ops,
        "ns_per_op": median / ops * 1e9,
        "ops_per_s": ops / median if median > 0 else float("inf"),
        "peak_rss_kib": peak_rss_kib(),
        **machine,
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
    window = Window(backend)
    benchmark.pedantic(one_round, rounds=rounds, warmup_rounds=warmup, iterations=1)
    used, machine = window.close()
    samples = _samples(benchmark)
    if samples:  # None under --benchmark-disable: the workload still ran and checked itself
        benchmark.extra_info.update(figures(samples, outcomes, used, len(outcomes), machine))
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
    window = Window(backend)
    samples = [timed_round() for _ in range(rounds)]
    used, machine = window.close()
    extra = figures(samples, outcomes, used, rounds, machine)  # the window saw the timed rounds only
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
