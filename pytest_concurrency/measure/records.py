"""One benchmark's result as the gate and the reports see it, read from either source.

Sources: the live pytest-benchmark session (``benchmark_adapter.benchmarks``) and
pytest-benchmark JSON files (``--benchmark-json``, ``--benchmark-save`` and our baselines).

Our measurements live in the benchmark's ``extra_info`` as flat keys (readable in any
pytest-benchmark JSON viewer):

==========================  ===========================================================
``backend``                 canonical backend spec, e.g. ``gevent``, ``multiprocessing[fork]``
``backend_version``         version of the library behind it (Python's for stdlib models)
``workload``                workload name (``ring``...) or, for a user's test, its name
``params``                  dict of the workload's parameters (JSON scalars)
``ops``                     operations per round (hops, events, tasks, switches)
``unit``                    what one op is: ``hop``, ``event``, ``task``, ``switch``, ``call``
``measure``                 the instrument: ``time`` (samples in seconds) or ``instructions``
                            (samples are CPU instructions per round, counted by callgrind)
``ns_per_op``               median round time / ops, in ns (time)
``ops_per_s``               ops / median round time (time)
``instructions_per_op``     median round count / ops (instructions)
``profile``                 instructions: the costliest functions of the last round,
                            ``[[function, library, instructions], ...]`` (see measure/profile.py)
``profile_objects``         instructions: every shared object's total in the last round,
                            ``[[library, instructions], ...]``
``cpu_user_s``/``cpu_sys_s``  CPU seconds per round, this process and its task processes
``ctx_voluntary``/``ctx_involuntary``  context switches per round, likewise
``peak_rss_kib``            the process's peak RSS after the benchmark (ru_maxrss)
``<figure>_per_op``         time measure, workload cases (and users' plain tests, per ``run``
                            call): the median over the rounds of a kernel
                            figure per op (measure/kernel.py): ``syscalls``, ``csw``,
                            ``migrations``, ``minflt``, ``majflt``, ``user_s``, ``sys_s``;
                            absent when not measured
``kernel_rounds``           each of those figures per round (not per op): ``{figure: [...]}``
``kernel_round_ops``        ops in each of those rounds, where that is not ``ops``: a suite's own
                            ``benchmark`` test is read per group of rounds (calls), not per call
``kernel_source``           where each figure came from: ``perf_event_open``, ``getrusage`` or
                            ``not measured``; ``kernel_note`` says why perf was not used
``foreign_cpu``             CPU cores other processes kept busy during the rounds, on
                            average (the gate distrusts changes a rise of it explains)
``task_kind``               what one task is: ``light``, ``thread`` or ``process``
``kib_per_task``            memory per live task (spawn; cancel: per blocked task), the larger of
``rss_kib_per_task``/``heap_kib_per_task``  RSS growth and tracemalloc-traced growth (heap
                            alone under valgrind)
``retained_b_per_task_round``  every workload (a user's test with --concurrency-memory: per
``c_heap_b_per_task_round``  round), both measures: what a round keeps in the Python heap and in
``threads_per_round``       the C heap per task it spawned, and how many more threads and
``greenlets_per_round``     greenlets stay alive: the median growth over ``memory_rounds``
``resident_b_per_round``    untimed rounds (measure/memory.py); and resident memory outside both
``rss_kib_per_round``       heaps per round (judged where no heap leaked); RSS is shown, never judged
``peak_traced_kib``         every workload, both measures: the traced heap's largest growth
                            within one round
``memory_rounds``/``tasks_per_round``  how the figures above were read (no tasks: per round)
``leak_params``/``leak_tasks_per_round``  a default-scale seed case: the lighter case whose
                            rounds read its leak figures, and their tasks (the figures are per
                            task of those; the peak is the case's own: measure/memory.py)
``memory_not_measured``     {figure: why} for a probe the process lacked (no mallinfo2)
``ideal_s``/``overhead_s``  IO workload: the ideal wall time and the median's excess over it
``layouts``                 instructions, a user's plain test: its rounds in each other layout it was
                            counted in (measure/layouts.py), ``[[...], ...]``; its median is then
                            the median of the layouts' medians, its own rounds' among them
``control_factor``          time: each round's process CPU share over the mean CPU seconds of the
                            controls timed within 50 ms of it (measure/control.py): a round's
                            wall time by it is its CPU time in controls
``control_s``/``control_busy``  time: the median control's CPU seconds, the median round's CPU
                            share (process CPU seconds over wall seconds)
``control_waits``           time: this thread's voluntary context switches per round (it waited)
``control_version``/``control_cost``  the control's version, and the controls' wall time over
                            the rounds' (what they cost the session)
``workload_ref``            a user's ``module:OBJECT`` workload, so the gate can re-run it
``threshold``               the test's own threshold from the ``concurrency`` marker
``isolated``/``worker_wall_s``  measured in a worker process, and its wall time
``concurrency_schema``      ``SCHEMA``; marks a benchmark as ours
==========================  ===========================================================

The raw samples are pytest-benchmark's own ``stats.data`` (one per round: we always measure
with ``iterations=1``; seconds, or instructions when ``measure`` says so).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from .. import benchmark_adapter as adapter

SCHEMA = 1


def params_id(params: Mapping[str, Any]) -> str:
    """Stable text for a params dict: the matching key in baselines and report headers."""
    return ",".join(f"{k}={params[k]}" for k in sorted(params)) if params else ""


def label(workload: str, params: Mapping[str, Any], backend: str) -> str:
    """How messages name one benchmark: ``ring[capacity=0,m=1000,n=20] on gevent``."""
    return key_label((workload, params_id(params), backend))


def key_label(key: tuple[str, str, str]) -> str:
    """``label`` for a ``Record.key``."""
    workload, pid, backend = key
    name = f"{workload}[{pid}]" if pid else workload
    return f"{name} on {backend}" if backend else name  # a suite's test that names no model


@dataclass
class Record:
    workload: str
    params: dict
    backend: str
    samples: list  # per round, in the unit of its measure
    ops: int = 1
    unit: str = "call"
    backend_version: str = ""
    name: str = ""
    group: str | None = None
    extra: dict = field(default_factory=dict)  # the whole extra_info

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workload, params_id(self.params), self.backend)

    @property
    def label(self) -> str:
        return label(self.workload, self.params, self.backend)

    @property
    def measure(self) -> str:
        """The instrument that measured it (``measure.instrument``); older records were timed."""
        return str(self.extra.get("measure") or "time")

    @property
    def layouts(self) -> list[list[float]]:
        """Its rounds in each layout it was counted in (measure/layouts.py), its own samples first."""
        if not self.samples:
            return []
        return [
            self.samples,
            *([float(x) for x in rounds] for rounds in self.extra.get("layouts") or ()),
        ]

    @property
    def median(self) -> float:
        """The median round; counted in several layouts, the median of the layouts' medians."""
        return median([median(rounds) for rounds in self.layouts]) if self.samples else float("nan")

    @property
    def kernel_round_ops(self) -> int:
        """Ops in each round its kernel figures were read over (``kernel_rounds``)."""
        return int(self.extra.get("kernel_round_ops") or self.ops or 1)

    def metric(self, name: str, default=None):
        return self.extra.get(name, default)


def from_parts(name: str, group, extra: Mapping, samples: Iterable[float]) -> Record | None:
    """A record from a benchmark's name, group, extra_info and rounds; None without a model."""
    if "backend" not in extra or "workload" not in extra:
        return None
    return Record(
        workload=str(extra["workload"]),
        params=dict(extra.get("params") or {}),
        backend=str(extra["backend"]),
        samples=[float(x) for x in samples],
        ops=int(extra.get("ops") or 1),
        unit=str(extra.get("unit") or "call"),
        backend_version=str(extra.get("backend_version") or ""),
        name=name,
        group=group,
        extra=dict(extra),
    )


def from_session(benchmarks: Iterable[Any]) -> list[Record]:
    """Records of the benchmarks pytest-benchmark measured in this session."""
    out = []
    for bench in benchmarks:
        if not adapter.recorded(bench):
            continue
        rec = from_parts(bench.name, bench.group, bench.extra_info or {}, adapter.rounds(bench))
        if rec is not None:
            out.append(rec)
    return out


def document(benchmarks: Iterable[Any]) -> dict:
    """The rounds of the benchmarks measured in this session, as a document ``Document.of`` reads:
    what a process the plugin started hands back to the one that started it."""
    return {
        "benchmarks": [
            {
                "name": b.name,
                "fullname": b.fullname,
                "group": b.group,
                "extra_info": b.extra_info,
                "stats": {"data": adapter.rounds(b)},
            }
            for b in benchmarks
            if adapter.recorded(b)
        ]
    }


def node_ids(benchmarks: Iterable[Any]) -> dict[tuple, str]:
    """Each record's key -> the node id of the test that measured it."""
    return {r.key: b.fullname for b in benchmarks for r in from_session([b])}


@dataclass(frozen=True)
class Document:
    """A pytest-benchmark JSON document parsed once, in this one place: its records, and the
    node id of the test behind each record. Benchmarks saved without raw samples (no
    ``--benchmark-save-data``) keep an empty ``samples`` list: the gate refuses them with an
    explanation rather than guessing."""

    records: tuple[Record, ...]
    node_ids: tuple[str, ...]  # ``records[i]``'s test ("fullname"; "" when the file lacks it)

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> "Document":
        recs, ids = [], []
        for bench in doc.get("benchmarks", []):
            stats = bench.get("stats") or {}
            rec = from_parts(
                bench.get("name", ""),
                bench.get("group"),
                bench.get("extra_info") or {},
                stats.get("data") or [],
            )
            if rec is not None:
                recs.append(rec)
                ids.append(str(bench.get("fullname") or ""))
        return cls(tuple(recs), tuple(ids))

    def tests_of(self, keys) -> list[str]:
        """The node ids of the tests that measured the benchmarks ``keys``, sorted."""
        return sorted({i for r, i in zip(self.records, self.node_ids) if i and r.key in keys})
