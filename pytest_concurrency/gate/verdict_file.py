"""``--concurrency-verdicts=PATH``: what a session decided, as JSON a merge can join.

The smallest document from which the session's summary, markdown report and exit status can be
rendered again without its rounds::

    {"format": "pytest-concurrency verdicts", "version": 1,
     "exit_status": 1, "tests_failed": false, "errors": [...], "nothing_judged": null,
     "measure": "instructions", "threshold": null, "alpha": 0.01,
     "identity": {...},                      # what measured (shards.identity)
     "shard": {"index": 1, "count": 4, "holds": [...]} or null,
     "records": [{"name", "group", "fullname", "position", "extra_info", "medians"}, ...],
     "gate": {...} or null, "memory": {...} or null}

A record keeps the median of each layout's rounds (``medians``), not the rounds: the reports
read a record's median, which is the same from them. ``position``: the test's place in the whole
collection (before shards were taken from it), so merged records come in one run's order.
"""

import dataclasses
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..measure.records import Record, from_parts
from ..store import atomic, shape
from . import shards
from .verdicts import (
    GateResult,
    KernelResult,
    KernelVerdict,
    MemoryResult,
    MemoryVerdict,
    Verdict,
)

FORMAT = "pytest-concurrency verdicts"
VERSION = 1


class VerdictFileError(ValueError):
    """A verdict file that cannot be used; the message names the file, the problem and the fix."""


@dataclass
class Verdicts:
    """One session's verdict file, read back."""

    records: list[Record]
    gate: GateResult | None
    memory: MemoryResult | None
    exit_status: int
    tests_failed: bool
    errors: list[str] = field(default_factory=list)
    nothing_judged: str | None = None
    measure: str = "time"
    threshold: float | None = None
    alpha: float = 0.01
    identity: dict = field(default_factory=dict)
    shard: dict | None = None
    fullnames: dict = field(default_factory=dict)  # Record.key -> node id
    positions: dict = field(default_factory=dict)  # Record.key -> place in the whole collection


def document(v: Verdicts) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "exit_status": v.exit_status,
        "tests_failed": v.tests_failed,
        "errors": list(v.errors),
        "nothing_judged": v.nothing_judged,
        "measure": v.measure,
        "threshold": v.threshold,
        "alpha": v.alpha,
        "identity": dict(v.identity),
        "shard": v.shard,
        "records": [_record(r, v.fullnames.get(r.key), v.positions.get(r.key)) for r in v.records],
        "gate": _gate(v.gate) if v.gate is not None else None,
        "memory": _memory(v.memory) if v.memory is not None else None,
    }


def write(path, v: Verdicts) -> str:
    """Write atomically: a merge never reads half a file."""
    import json

    return atomic.write_text(os.fspath(path), json.dumps(document(v), indent=1) + "\n")


def _record(rec: Record, fullname: str | None, position: int | None) -> dict:
    medians = [statistics.median(rounds) for rounds in rec.layouts]
    extra = {k: val for k, val in rec.extra.items() if k != "layouts"}
    return {
        "name": rec.name,
        "group": rec.group,
        "fullname": fullname,
        "position": position,
        "extra_info": extra,
        "medians": medians,
    }


def _gate(g: GateResult) -> dict:
    out = dataclasses.asdict(g)
    out["memory"] = _memory(g.memory) if g.memory is not None else None
    return out


def _memory(m: MemoryResult) -> dict:
    out = dataclasses.asdict(m)
    out["not_measured"] = [[k, why, n] for (k, why), n in m.not_measured.items()]
    return out


# -- reading ---------------------------------------------------------------------------------


def read(path) -> Verdicts:
    """A verdict file, checked; ``VerdictFileError`` in one line for anything else."""
    from ..store.baseline import BaselineError
    from ..store.baseline import read as read_json

    path = os.fspath(path)
    fix = "pass a file written by --concurrency-verdicts"
    try:
        doc = read_json(path, "verdict file", fix)
    except BaselineError as exc:
        raise VerdictFileError(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise VerdictFileError(f"verdict file {path!r} is not a verdict file; {fix}")
    if doc.get("version") != VERSION:
        raise VerdictFileError(
            f"verdict file {path!r} is of format version {doc.get('version')!r}, this "
            f"pytest-concurrency-bench reads {VERSION}: merge with the version that wrote it"
        )
    try:
        shards.from_section(doc.get("shard"), f"verdict file {path!r}")
        v = _verdicts(doc)
        from .compare import GateSettings

        GateSettings(threshold=v.threshold, alpha=v.alpha)  # what a merge judges with
        return v
    except shards.ShardError as exc:
        raise VerdictFileError(f"{exc}; {fix}") from None
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise VerdictFileError(
            f"verdict file {path!r} is damaged ({type(exc).__name__}: {exc}); {fix}"
        ) from None


def _verdicts(doc: Mapping) -> Verdicts:
    recs, fullnames, positions = [], {}, {}
    for entry in doc["records"]:
        rec = _from_record(entry)
        recs.append(rec)
        if entry.get("fullname") is not None:
            fullnames[rec.key] = str(entry["fullname"])
        if entry.get("position") is not None:
            positions[rec.key] = int(entry["position"])
    threshold = doc.get("threshold")
    return Verdicts(
        records=recs,
        gate=_read_gate(doc["gate"]) if doc.get("gate") is not None else None,
        memory=_read_memory(doc["memory"]) if doc.get("memory") is not None else None,
        exit_status=int(doc["exit_status"]),
        tests_failed=bool(doc["tests_failed"]),
        errors=[str(e) for e in doc.get("errors") or ()],
        nothing_judged=doc.get("nothing_judged"),
        measure=str(doc.get("measure") or "time"),
        threshold=None if threshold is None else float(threshold),
        alpha=float(doc.get("alpha", 0.01)),
        identity=dict(doc.get("identity") or {}),
        shard=doc.get("shard"),
        fullnames=fullnames,
        positions=positions,
    )


def _from_record(entry: Mapping) -> Record:
    wrong = shape.EXTRA(entry["extra_info"])  # what a baseline's records are held to
    if wrong:
        raise ValueError(f"records[].extra_info{wrong}")
    extra = dict(entry["extra_info"])
    medians = [float(m) for m in entry["medians"]]
    if len(medians) > 1:
        extra["layouts"] = [[m] for m in medians[1:]]
    rec = from_parts(str(entry.get("name") or ""), entry.get("group"), extra, medians[:1])
    assert rec is not None  # shape.EXTRA holds its workload and backend
    return rec


def _fields(cls, data: Mapping) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _tuple(value: Any) -> tuple | None:
    return None if value is None else tuple(value)


def _read_verdict(data: Mapping) -> Verdict:
    v = Verdict(**_fields(Verdict, data))
    v.key = tuple(v.key)
    v.ci, v.rounds = _tuple(v.ci), _tuple(v.rounds)
    v.versions_changed = {k: tuple(pair) for k, pair in dict(v.versions_changed).items()}
    return v


def _read_gate(data: Mapping) -> GateResult:
    g = GateResult(**_fields(GateResult, data))
    g.verdicts = [_read_verdict(v) for v in data.get("verdicts") or ()]
    g.memory = _read_memory(data["memory"]) if data.get("memory") is not None else None
    if data.get("kernel") is not None:
        k = KernelResult(**_fields(KernelResult, data["kernel"]))
        k.verdicts = [
            KernelVerdict(**_fields(KernelVerdict, v)) for v in data["kernel"]["verdicts"]
        ]
        for kv in k.verdicts:
            kv.key = tuple(kv.key)
        g.kernel = k
    g.notes = list(g.notes)
    return g


def _read_memory(data: Mapping) -> MemoryResult:
    m = MemoryResult(**_fields(MemoryResult, data))
    m.verdicts = [MemoryVerdict(**_fields(MemoryVerdict, v)) for v in data["verdicts"]]
    for mv in m.verdicts:
        mv.key = tuple(mv.key)
    m.not_measured = {(str(k), str(why)): int(n) for k, why, n in data.get("not_measured") or ()}
    return m


def from_session(
    records: Iterable[Record],
    fullnames: Mapping[tuple, str],
    positions: Mapping[str, int],
    **fields: Any,
) -> Verdicts:
    """A session's ``Verdicts``: ``positions`` by node id (the whole collection's order)."""
    recs = list(records)
    return Verdicts(
        records=recs,
        fullnames=dict(fullnames),
        positions={k: positions[n] for k, n in fullnames.items() if n in positions},
        **fields,
    )
