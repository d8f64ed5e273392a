"""The run log: every run kept, one file a run, in a folder (``--concurrency-history=DIR``).

Not a baseline's kept sessions (store/history.py: the last few, for the gate's drift): the run
log keeps every run, never rewrites a file and is read only by people (report/site.py draws
it). Each file is one run, written atomically under a name no other run takes (its time, its
commit and a random part), so the files of several CI jobs and shards join by copying them
into one folder::

    {"format": "pytest-concurrency run", "version": 1,
     "date": "2026-11-29T08:00:00Z", "commit": "1a2b...", "dirty": false, "branch": "main",
     "measure": "time", "python": {...}, "libraries": {...}, "backends": {...},
     "machine": {...},                     # what measured (gate/shards.identity)
     "shard": {...} or null, "source": "session",   # or "baseline FILE", "verdicts FILE"
     "benchmarks": [{"id": "ring[m=10,n=20] on gevent", "workload", "params", "backend",
                     "name", "test", "unit", "ops", "rounds",
                     "median", "low", "high",   # per op, in the measure's unit; low/high: the
                                                # median's 95% interval from the rounds
                     "layouts": [...],          # counts: each layout's median per op
                     "kernel": {"syscalls": ...},  # per op, where measured
                     "memory": {"kib_per_task": ...}}, ...],
     "verdicts": [{"id", "figure": "time" or "instructions" or "memory:kib_per_task" or
                   "kernel:syscalls", "status", "change", "words"}, ...]}
"""

import datetime as _dt
import math
import os
import re
import secrets
import statistics
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..gate import shards, verdict_file
from ..gate import verdicts as V
from ..measure import kernel, stopping
from ..measure import names as measure_names
from ..measure.records import Record, key_label
from ..store import atomic, baseline
from ..store.history import MEMORY_KEYS
from . import tables

FORMAT = "pytest-concurrency run"
VERSION = 1
SUFFIX = ".run.json"


class RunLogError(ValueError):
    """A run file or folder that cannot be used; the message names it, the problem and the fix."""


@dataclass(frozen=True)
class Code:
    """Which code a run measured: its commit, whether the tree was dirty, its branch."""

    commit: str | None
    dirty: bool | None
    branch: str | None

    @classmethod
    def here(cls, cwd=None) -> "Code":
        """The git repository's around ``cwd``: its branch, or in a detached checkout (a CI job's)
        the branch CI names (``GITHUB_HEAD_REF``/``GITHUB_REF_NAME``, ``CI_COMMIT_REF_NAME``)."""
        ident = baseline.code_identity(cwd)
        branch = _git(cwd, "symbolic-ref", "--short", "-q", "HEAD") if ident else None
        for name in ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME"):
            branch = branch or os.environ.get(name) or None
        return cls(ident.get("commit"), ident.get("dirty"), branch)


def _git(cwd, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


# -- one run's figures ------------------------------------------------------------------------


def figures(rec: Record, test: str | None = None) -> dict:
    """One benchmark's entry: median and interval per op, per layout for counts, its kernel
    and memory figures."""
    ops = rec.ops or 1
    out: dict = {
        "id": rec.label,
        "workload": rec.workload,
        "params": dict(rec.params),
        "backend": rec.backend,
        "name": rec.name,
        "test": test,
        "unit": rec.unit,
        "ops": ops,
        "rounds": len(rec.samples),
    }
    median = tables.round_median(rec)
    out.update(median=median / ops if math.isfinite(median) else None, low=None, high=None)
    if len(rec.samples) > 1:  # a verdict file keeps one median a layout: no interval
        # the median's 95% interval from order statistics; too few rounds for one: their range
        low, high = stopping.median_interval(rec.samples, 0.95) or (
            min(rec.samples),
            max(rec.samples),
        )
        out.update(low=low / ops, high=high / ops)
    if len(rec.layouts) > 1:
        out["layouts"] = [statistics.median(r) / ops for r in rec.layouts]
    figs = {
        name: rec.extra[f"{name}_per_op"]
        for name in kernel.FIGURES
        if isinstance(rec.extra.get(f"{name}_per_op"), (int, float))
    }
    if figs:
        out["kernel"] = figs
    memory = {k: rec.extra[k] for k in MEMORY_KEYS if isinstance(rec.extra.get(k), (int, float))}
    if memory:
        out["memory"] = memory
    return out


def verdict_entries(gate: V.GateResult | None, memory: V.MemoryResult | None) -> list[dict]:
    """Every verdict of the run, the gate's words with it."""
    out = []
    if gate is not None:
        for v in gate.verdicts:
            out.append(
                {
                    "id": key_label(v.key),
                    "figure": v.measure,
                    "status": v.status,
                    "change": v.change,
                    "words": tables.verdict_line(v),
                }
            )
        if gate.kernel is not None:
            for k in gate.kernel.verdicts:
                out.append(_figure_verdict(k.key, f"kernel:{k.figure}", k.status, k.change, k.note))
    memory = memory if memory is not None else (gate.memory if gate is not None else None)
    if memory is not None:
        for m in memory.verdicts:
            out.append(_figure_verdict(m.key, f"memory:{m.metric}", m.status, m.change, m.note))
    return out


def _figure_verdict(key, figure: str, status: str, change, note: str) -> dict:
    words = f"{key_label(key)}: {figure} {status}"
    if change is not None:
        words += f", {tables.fmt_change(change)}"
    if note:
        words += f" ({note})"
    return {
        "id": key_label(key),
        "figure": figure,
        "status": status,
        "change": change,
        "words": words,
    }


def run_document(
    recs: Iterable[Record],
    *,
    code: Code,
    measure: str,
    date: _dt.datetime | None = None,
    node_ids: Mapping[tuple, str] | None = None,
    gate: V.GateResult | None = None,
    memory: V.MemoryResult | None = None,
    machine: Mapping | None = None,
    shard: Mapping | None = None,
    source: str = "session",
    libraries: Mapping | None = None,
) -> dict:
    """One run's file, as ``write`` writes it."""
    recs = list(recs)
    node_ids = node_ids or {}
    when = (date or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    return {
        "format": FORMAT,
        "version": VERSION,
        "date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": code.commit,
        "dirty": code.dirty,
        "branch": code.branch,
        "measure": measure,
        "python": baseline.python_info() if source == "session" else {},
        "libraries": dict(libraries if libraries is not None else baseline.library_versions()),
        "backends": {r.backend: r.backend_version for r in recs if r.backend},
        "machine": dict(machine if machine is not None else shards.identity()),
        "shard": dict(shard) if shard else None,
        "source": source,
        "benchmarks": [figures(r, node_ids.get(r.key)) for r in recs],
        "verdicts": verdict_entries(gate, memory),
    }


# -- the folder -------------------------------------------------------------------------------


def file_name(doc: Mapping) -> str:
    """Unique among every run's: its time, its commit's first 12 digits, 8 random hex digits."""
    when = re.sub(r"[^0-9T]", "", str(doc.get("date") or ""))[:15] or "undated"
    commit = re.sub(r"[^0-9a-f]", "", str(doc.get("commit") or ""))[:12] or "nocommit"
    return f"{when}-{commit}-{secrets.token_hex(4)}{SUFFIX}"


def write(directory, doc: Mapping) -> str:
    """Add ``doc`` to the folder as a new file (atomically; an existing file is never replaced)."""
    import json

    directory = os.fspath(directory)
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n"
    while True:
        path = os.path.join(directory, file_name(doc))
        if not os.path.lexists(path):  # 32 random bits: a second draw is for form's sake
            return atomic.write_text(path, text)


def read(path) -> dict:
    """One run file, checked; ``RunLogError`` in one line for anything else."""
    path = os.fspath(path)
    fix = "remove it from the folder, or write it again with --concurrency-history"
    try:
        doc = baseline.read(path, "run file", fix)
    except baseline.BaselineError as exc:
        raise RunLogError(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RunLogError(f"{path}: not a run file of pytest-concurrency's run log; {fix}")
    if doc.get("version") != VERSION:
        raise RunLogError(
            f"{path}: run file of format version {doc.get('version')!r}, this "
            f"pytest-concurrency-bench reads {VERSION}: draw it with the version that wrote it"
        )
    wrong = _wrong(doc)
    if wrong:
        raise RunLogError(f"{path}: {wrong}; {fix}")
    return doc


#: What each value the site reads must be, or be absent (None where it may be null).
_TEXT, _NUMBER, _MAP = (str,), (int, float), (dict,)
_RUN = {"commit": _TEXT, "branch": _TEXT}
_BENCHMARK = {
    "workload": _TEXT,
    "backend": _TEXT,
    "name": _TEXT,
    "test": _TEXT,
    "unit": _TEXT,
    "params": _MAP,
    "kernel": _MAP,
    "memory": _MAP,
    "median": _NUMBER,
    "low": _NUMBER,
    "high": _NUMBER,
}
_VERDICT = {"figure": _TEXT, "words": _TEXT, "change": _NUMBER}


def _wrong(doc: Mapping) -> str | None:
    """What of ``doc`` the site could not read (a value of the wrong type), or None."""
    if doc.get("measure") not in measure_names():
        return f"its measure {doc.get('measure')!r} is not one of {', '.join(measure_names())}"
    if not isinstance(doc.get("date"), str):
        return "its 'date' is not text"
    if not isinstance(doc.get("benchmarks"), list) or not isinstance(doc.get("verdicts"), list):
        return "its 'benchmarks' or 'verdicts' is not a list"
    wrong = _types(doc, _RUN)
    if wrong:
        return f"its {wrong}"
    for b in doc["benchmarks"]:
        if not isinstance(b, dict) or not isinstance(b.get("id"), str):
            return "a benchmark without an 'id'"
        wrong = (
            _types(b, _BENCHMARK)
            or _numbers(b.get("kernel") or {}, "kernel")
            or _numbers(b.get("memory") or {}, "memory")
        )
        if wrong:
            return f"benchmark {b['id']!r}: its {wrong}"
    for v in doc["verdicts"]:
        if not isinstance(v, dict) or not all(isinstance(v.get(k), str) for k in ("id", "status")):
            return "a verdict without an 'id' or a 'status'"
        wrong = _types(v, _VERDICT)
        if wrong:
            return f"verdict on {v['id']!r}: its {wrong}"
    return None


def _types(entry: Mapping, expected: Mapping[str, tuple]) -> str | None:
    for key, kinds in expected.items():
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            return f"{key!r} is {type(value).__name__}, not {kinds[0].__name__}"
    return None


def _numbers(figures: Mapping, what: str) -> str | None:
    for key, value in figures.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{what} figure {key!r} is not a number"
    return None


def read_folder(directory) -> list[dict]:
    """Every run file in ``directory`` (``*.run.json``; other files are left alone), each
    with its file name as ``_file``."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise RunLogError(
            f"{directory}: no such folder; pass the folder given to --concurrency-history"
        )
    runs = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(SUFFIX) and not name.startswith("."):  # "." : a write in progress
            doc = read(os.path.join(directory, name))
            doc["_file"] = name
            runs.append(doc)
    return runs


# -- importing what was kept before -----------------------------------------------------------


def from_baseline(path) -> list[dict]:
    """A baseline's sessions (its latest and those it kept), one run each; no verdicts."""
    base = baseline.load(path)  # checked as a session reads it
    meta, doc = base.meta, base.doc
    measure = str(meta.get("measure") or "time")
    ops = {r.key: (r.ops, r.unit, r.name) for r in base.records}
    source = f"baseline {os.path.basename(os.fspath(path))}"
    machine = {"cpu_model": meta.get("cpu_model"), "cpu_count": meta.get("cpu_count")}
    latest = {
        **meta,
        "commit": (doc.get("commit_info") or {}).get("id"),
        "datetime": doc.get("datetime"),
    }
    sessions: list[tuple[Mapping, Iterable[Record]]] = [(latest, base.records)]
    for entry in meta.get("history") or ():
        recs = []
        for b in entry["benchmarks"]:
            rec = Record(b["workload"], dict(b["params"]), b["backend"], list(b["samples"]))
            rec.ops, rec.unit, rec.name = ops.get(rec.key, (1, "call", ""))
            rec.backend_version = b.get("backend_version", "")
            rec.extra = {"layouts": b.get("layouts") or [], **(b.get("memory") or {})}
            recs.append(rec)
        sessions.append((entry, recs))
    return [
        run_document(
            recs,
            code=_code(session.get("code"), session.get("commit")),
            measure=measure,
            date=_date(session.get("datetime")),
            machine=machine,
            source=source,
            libraries=session.get("libraries") or {},
        )
        for session, recs in sessions
    ]


def from_verdict_file(path, code: Code, date: _dt.datetime | None = None) -> dict:
    """A verdict file as one run: its medians (no rounds: no interval) and its verdicts. It
    names no commit: ``code`` says which (``history import --commit``); its date is the file's
    unless given."""
    v = verdict_file.read(path)
    if date is None:
        date = _dt.datetime.fromtimestamp(os.path.getmtime(path), _dt.timezone.utc)
    return run_document(
        v.records,
        code=code,
        measure=v.measure,
        date=date,
        node_ids=v.fullnames,
        gate=v.gate,
        memory=v.memory,
        machine=v.identity,
        shard=v.shard,
        source=f"verdicts {os.path.basename(os.fspath(path))}",
        libraries={},
    )


def _code(code, commit) -> Code:
    code = code if isinstance(code, dict) else {}
    return Code(code.get("commit") or commit or None, code.get("dirty"), None)


def _date(text) -> _dt.datetime | None:
    try:
        when = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)
