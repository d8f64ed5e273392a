"""A baseline's sessions: several runs of the same code, kept so the gate knows how far a
benchmark's median moves from one session to the next on this machine.

The rounds of one session cannot tell: CPU frequency, a neighbour's load and the process's
memory layout move every round of a session together. Measured here (ring on five models),
one baseline session was often 2-4% off the typical session for a whole model, and every
comparison against it inherited that. A baseline that keeps the last K sessions gives

* a center one lucky or unlucky session barely moves (the gate pools the sessions' samples);
* each benchmark's between-session drift, which widens that benchmark's threshold when it is
  noisier than the threshold assumes (see ``stats.drift_allowance``).

Saving to an existing baseline adds the new session in front and keeps ``keep`` in all. The
earlier sessions live in the baseline's section as ``history``, newest first; the document's
own ``benchmarks`` stay the latest session, so pytest-benchmark's tools read it as before::

    "history": [{"datetime": "...", "commit": "1a2b3c...", "calibration": {...},
                 "code": {"commit": "1a2b3c...", "dirty": false}, "libraries": {...},
                 "benchmarks": [{"workload": "ring", "params": {...}, "backend": "gevent",
                                 "backend_version": "25.1.0", "samples": [...],
                                 "foreign_cpu": 0.01}, ...]}, ...]

A benchmark whose new session differs from its sessions beyond the threshold (the gate's
regressed or improved) starts its history again: the code changed speed, and the earlier
sessions describe other code, once a second session confirms the new speed: the first one
is flagged ``disturbed`` and left out of the gate until then (see ``compare.add_session``).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..measure import control, kernel
from ..measure.records import Document, Record, params_id

SECTION = "pytest_concurrency"
DEFAULT_KEEP = 5
#: The memory figures each session keeps (memory_gate.py judges them against their median).
MEMORY_KEYS = ("kib_per_task", "peak_traced_kib", "retained_b_per_task_round")
#: The kernel figures per op each session keeps (gate/kernel.py judges beyond their span).
KERNEL_KEYS = tuple(f"{name}_per_op" for name in kernel.FIGURES)


@dataclass
class BaselineSession:
    """One baseline session of one benchmark."""

    samples: list  # seconds per round
    foreign_cpu: float | None  # cores other processes kept busy (None: not recorded)
    backend_version: str = ""
    disturbed: str = ""  # why it was flagged disturbed when saved (see sessions.py), "" if not
    layouts: list = field(default_factory=list)  # counted: in other layouts (measure/layouts.py)
    #: timed: the controls beside its rounds (measure/control.py): ``control_factor`` and the rest
    controls: dict = field(default_factory=dict)
    memory: Mapping = field(default_factory=dict)  # its ``MEMORY_KEYS`` figures it has
    saved: str = ""  # when it was saved: its document's ``datetime`` ("" if not recorded)
    kernel: Mapping = field(default_factory=dict)  # its ``KERNEL_KEYS`` figures it has

    @classmethod
    def of(
        cls,
        samples: list,
        layouts: list,
        kept: Mapping,
        version: str,
        figures: tuple[Mapping, Mapping],
        saved,
    ):
        """From what is kept beside its rounds: a record's ``extra_info``, a ``history`` entry's;
        ``figures``: its memory and kernel figures."""
        disturbed = kept.get("disturbed") or ""
        memory, kernel_figures = figures
        return cls(
            samples,
            kept.get("foreign_cpu"),
            version,
            disturbed,
            layouts,
            _controls(kept),
            memory,
            str(saved or ""),
            kernel_figures,
        )


@dataclass(frozen=True)
class Baseline:
    """A baseline document as the gate reads it, parsed once (``baseline.load`` checked it): its
    records, each benchmark's sessions, each session's calibration and code. ``doc`` stays as
    read: a save adds its session in front of it and writes it back."""

    doc: Mapping
    records: tuple[Record, ...]  # the latest session's, in the file's order
    sessions: Mapping[tuple, list[BaselineSession]]  # each benchmark's, latest first
    twice: tuple[Record, ...]  # the latest session's second entries of a benchmark: left out
    calibrations: tuple  # each session's machine-speed calibration, latest first (None: missing)
    identities: tuple  # each session's (code, libraries): git commit and dirty flag, versions
    saved: tuple = ()  # each session's ``datetime``, latest first ("" if not recorded)

    @classmethod
    def of(cls, doc: Mapping) -> "Baseline":
        meta = doc[SECTION]
        entries = meta.get("history") or ()
        records = Document.of(doc).records
        out: dict[tuple, list[BaselineSession]] = {}
        twice = []
        for rec in records:
            if rec.key in out:
                twice.append(rec)
                continue
            session = BaselineSession.of(
                rec.samples,
                rec.layouts[1:],
                rec.extra,
                rec.backend_version,
                (_memory(rec.extra), _kernel(rec.extra)),
                doc.get("datetime"),
            )
            out[rec.key] = [session]
        for entry in entries:
            for b in entry["benchmarks"]:
                key = (b["workload"], params_id(b["params"]), b["backend"])
                samples = [float(x) for x in b["samples"]]
                layouts = [[float(x) for x in rounds] for rounds in b.get("layouts") or ()]
                session = BaselineSession.of(
                    samples,
                    layouts,
                    b,
                    b.get("backend_version", ""),
                    (b.get("memory") or {}, b.get("kernel") or {}),
                    entry.get("datetime"),
                )
                out.setdefault(key, []).append(session)
        sessions = [meta, *entries]
        return cls(
            doc,
            tuple(records),
            out,
            tuple(twice),
            tuple(s.get("calibration") for s in sessions),
            tuple((s.get("code"), s.get("libraries")) for s in sessions),
            (str(doc.get("datetime") or ""), *(str(e.get("datetime") or "") for e in entries)),
        )

    @property
    def meta(self) -> dict:
        """The ``pytest_concurrency`` section: read beside this run's, key by key."""
        return self.doc[SECTION]

    @property
    def latest(self) -> dict[tuple, Record]:
        """The latest session's records by key (of a benchmark it holds twice, the last)."""
        return {r.key: r for r in self.records}

    @property
    def count(self) -> int:
        """Sessions held: the latest plus its history."""
        return len(self.identities)


def incompatible(previous: Baseline, meta: Mapping) -> str | None:
    """Why ``previous`` sessions cannot sit behind a session with ``meta``, if they cannot."""
    b, c = previous.meta.get("python") or {}, meta.get("python") or {}
    measured = previous.meta.get("measure") or "time", meta.get("measure") or "time"
    if measured[0] != measured[1]:
        return f"it holds sessions that measured {measured[0]} and this run measures {measured[1]}"
    shards = _shard(previous.meta), _shard(meta)
    if shards[0] != shards[1]:
        return f"it holds sessions of {shards[0]} and this run is {shards[1]}"
    if not same_python(previous.meta, meta):
        return (
            f"it holds sessions of {b.get('implementation')} {b.get('version')} and this run is "
            f"{c.get('implementation')} {c.get('version')} (keep one baseline file per Python)"
        )
    return None


def same_python(meta: Mapping, other: Mapping) -> bool:
    """Whether two sessions ran one Python (implementation and minor version): the only sessions
    whose figures the gate compares, or a baseline keeps side by side, unless told otherwise."""
    a, b = meta.get("python") or {}, other.get("python") or {}
    return (a.get("implementation"), a.get("minor")) == (b.get("implementation"), b.get("minor"))


def _shard(meta: Mapping) -> str:
    shard = meta.get("shard")
    if isinstance(shard, Mapping):
        return f"shard {shard.get('index')}/{shard.get('count')}"
    return "the whole suite"


def merge(
    doc: dict,
    previous: Baseline | None,
    keep: int,
    restart: Iterable[tuple] = (),
    kernel_restart: Iterable[tuple] = (),
) -> dict:
    """``doc`` (this session's baseline document) with ``previous``'s sessions behind it.

    At most ``keep`` sessions in all; benchmarks in ``restart`` keep only this session, and those
    in ``kernel_restart`` only this session's kernel figures (their earlier ones measured other
    code: gate/kernel.py judges beyond their span).
    """
    earlier = []
    if previous is not None and keep > 1:
        earlier = [_entry(previous)] + list(previous.meta.get("history") or ())
    drop, drop_kernel = set(restart), set(kernel_restart)
    kept = []
    for entry in earlier[: max(keep - 1, 0)]:
        benchmarks = [
            {k: v for k, v in b.items() if k != "kernel" or key not in drop_kernel}
            for b in entry["benchmarks"]
            if (key := (b["workload"], params_id(b["params"]), b["backend"])) not in drop
        ]
        if benchmarks:
            kept.append({**entry, "benchmarks": benchmarks})
    doc[SECTION]["history"] = kept
    return doc


def count(doc: Mapping) -> int:
    """Sessions in a baseline document: the latest plus its history."""
    return 1 + len(doc[SECTION].get("history") or ())


def _entry(previous: Baseline) -> dict:
    """A whole baseline's latest session, in the compact form of ``history``."""
    doc, meta = previous.doc, previous.meta
    return {
        "datetime": doc.get("datetime", ""),
        "commit": (doc.get("commit_info") or {}).get("id"),
        "calibration": meta.get("calibration"),
        "code": meta.get("code"),
        "libraries": meta.get("libraries"),
        "benchmarks": [_benchmark(rec) for rec in previous.records],
    }


def _benchmark(rec: Record) -> dict:
    kernel_figures = _kernel(rec.extra)
    return {
        "workload": rec.workload,
        "params": dict(rec.params),
        "backend": rec.backend,
        "backend_version": rec.backend_version,
        "samples": list(rec.samples),
        "foreign_cpu": rec.extra.get("foreign_cpu"),
        **({"disturbed": rec.extra["disturbed"]} if rec.extra.get("disturbed") else {}),
        **({"layouts": rec.layouts[1:]} if len(rec.layouts) > 1 else {}),
        "memory": _memory(rec.extra),
        **({"kernel": kernel_figures} if kernel_figures else {}),
        **_controls(rec.extra),
    }


def _memory(extra: Mapping) -> dict:
    return {k: extra[k] for k in MEMORY_KEYS if k in extra}


def _kernel(extra: Mapping) -> dict:
    return {k: extra[k] for k in KERNEL_KEYS if extra.get(k) is not None}


def _controls(extra: Mapping) -> dict:
    """What a session keeps of the controls beside its rounds: what the gate reads, not the cost."""
    return {k: extra[k] for k in control.JUDGED if extra.get(k) is not None}
