"""Shards joined: their baselines into one baseline, their verdict files into one run's verdicts.

Refused, in one line each with its own exit status: files that do not belong together
(another plugin version or measuring code, another Python build or architecture; for time,
another machine at all: times from N machines do not compare), and files that do not cover the
suite once (the same shard twice, shards of different splits, a shard missing, a benchmark in
two files, or shards that collected different suites).
"""

from collections.abc import Mapping, Sequence

from .. import measure
from ..exit_codes import JUDGED, Exit, gates_failed, of_run
from ..store import history
from . import compare as gate_compare
from . import shards, undecided
from .verdict_file import Verdicts
from .verdicts import GateResult, KernelResult, MemoryResult, nothing_in_common

#: What must be equal for counts to be joined, and for time (everything about the machine too).
COUNTS_MUST_MATCH = ("plugin", "code", "python_build", "machine")
TIME_MUST_MATCH = (*COUNTS_MUST_MATCH, "node", "cpu_model", "cpu_count")
_NAMES = {
    "plugin": "pytest-concurrency version",
    "code": "measuring code",
    "python_build": "Python build",
    "machine": "architecture",
    "node": "machine",
    "cpu_model": "CPU",
    "cpu_count": "CPU count",
}


class MergeError(Exception):
    """Shard files that cannot be merged: ``args[0]`` the line, ``code`` the exit status."""

    def __init__(self, line: str, code: int):
        super().__init__(line)
        self.code = code


# -- what both merges check -------------------------------------------------------------------


def _same_run(files: Sequence[tuple[str, str, Mapping]]) -> None:
    """``files``: (path, measure, identity). Refuse a mix of what measured them."""
    first_path, kind, first = files[0]
    for path, measured, ident in files[1:]:
        if measured != kind:
            raise MergeError(
                f"{path} measured {measured} and {first_path} {kind}: merge shards of one run",
                Exit.MERGE_MISMATCH,
            )
        keys = TIME_MUST_MATCH if measure.instrument(kind).machine_bound else COUNTS_MUST_MATCH
        for key in keys:
            if ident.get(key) != first.get(key):
                why = (
                    " (times from different machines do not compare: run the shards on one "
                    "machine, or count them: --concurrency-measure=instructions)"
                    if key in TIME_MUST_MATCH[len(COUNTS_MUST_MATCH) :]
                    else ""
                )
                raise MergeError(
                    f"{path} was measured with {_NAMES[key]} {ident.get(key)!r} and {first_path} "
                    f"with {first.get(key)!r}: shards merge only from one setup{why}; run every "
                    "shard with the same one",
                    Exit.MERGE_MISMATCH,
                )


def _covered(files: Sequence[tuple[str, Mapping | None]]) -> int:
    """``files``: (path, shard section). The number of shards, once each shard is there once."""
    if len(files) == 1 and files[0][1] is None:
        return 1
    found: dict[int, str] = {}
    first_path, first = None, None
    for path, section in files:
        shard = shards.from_section(section, path) if section is not None else None
        if shard is None:
            raise MergeError(
                f"{path} is not a shard's file (its run had no --concurrency-shard): merge the "
                "files of one run's shards",
                Exit.MERGE_COVERAGE,
            )
        assert section is not None
        if first is None:
            first_path, first = path, section
        elif shard.count != first["count"]:
            raise MergeError(
                f"{path} is shard {shard} and {first_path} shard {first['index']}/{first['count']}: "
                "shards of different splits overlap; merge the files of one split",
                Exit.MERGE_COVERAGE,
            )
        elif list(section["holds"]) != list(first["holds"]):
            raise MergeError(
                f"{path} and {first_path} collected different suites (benchmark tests per shard "
                f"{section['holds']} and {first['holds']}): run every shard on the same code "
                "with the same arguments",
                Exit.MERGE_COVERAGE,
            )
        if shard.index in found:
            raise MergeError(
                f"{path} and {found[shard.index]} are both shard {shard}: overlapping shards; "
                "pass each shard's file once",
                Exit.MERGE_COVERAGE,
            )
        found[shard.index] = path
    assert first is not None
    missing = [
        f"{i}/{first['count']} ({n} benchmark tests)"
        for i, n in enumerate(first["holds"], 1)
        if n and i not in found
    ]
    if missing:
        raise MergeError(
            f"shard{'s' * (len(missing) > 1)} {', '.join(missing)} missing: pass every shard's "
            "file (a shard that holds no benchmark test may be left out)",
            Exit.MERGE_COVERAGE,
        )
    return int(first["count"])


def _no_overlap(keys_by_file: Sequence[tuple[str, list[tuple]]]) -> None:
    seen: dict[tuple, str] = {}
    for path, keys in keys_by_file:
        for key in keys:
            if key in seen:
                from ..measure.records import key_label

                raise MergeError(
                    f"{key_label(key)} is in both {seen[key]} and {path}: overlapping shards; "
                    "pass each shard's file once",
                    Exit.MERGE_COVERAGE,
                )
            seen[key] = path


# -- baselines --------------------------------------------------------------------------------


def baselines(bases: Sequence[tuple[str, history.Baseline]]) -> dict:
    """One baseline document from the shards' baselines (each read by ``baseline.load``)."""
    metas = [(path, base.meta) for path, base in bases]
    _baselines_belong_together(metas)
    _no_overlap([(p, list(base.sessions)) for p, base in bases])
    docs = [base.doc for _, base in bases]
    return {
        **docs[0],
        "benchmarks": [b for doc in docs for b in doc["benchmarks"]],
        "datetime": max(str(doc.get("datetime") or "") for doc in docs),
        history.SECTION: _joined_meta(metas),
    }


def _baselines_belong_together(metas: Sequence[tuple[str, Mapping]]) -> None:
    """The shards' baselines cover the suite once, each says what measured it, and all measured
    one run of one code (a ``MergeError`` if not)."""
    _covered([(path, meta.get("shard")) for path, meta in metas])
    for path, meta in metas:
        if not isinstance((meta.get("shard") or {}).get("identity"), Mapping) and len(metas) > 1:
            raise MergeError(
                f"{path} does not say what measured it (saved without --concurrency-shard?): "
                "save each shard with this version",
                Exit.MERGE_MISMATCH,
            )
    if len(metas) > 1:
        _same_run([(p, m.get("measure") or "time", m["shard"]["identity"]) for p, m in metas])
    first_path, first = metas[0]
    for path, meta in metas[1:]:
        for key, name in (
            ("measuring", "measuring side"),
            ("directory", "directory (counts follow it)"),
            ("code", "code"),
            ("libraries", "concurrency libraries"),
            ("python", "Python"),
        ):
            if meta.get(key) != first.get(key):
                raise MergeError(
                    f"{path} and {first_path} differ in their {name} ({meta.get(key)!r} and "
                    f"{first.get(key)!r}): shards merge only from one run of one code",
                    Exit.MERGE_MISMATCH,
                )


def _joined_meta(metas: Sequence[tuple[str, Mapping]]) -> dict:
    """The shards' ``pytest_concurrency`` sections as one run's: the first's, without its shard,
    with every shard's backends, code, typical calibration and history."""
    first = metas[0][1]
    meta = {k: v for k, v in first.items() if k != "shard"}
    meta["backends"] = _union([m.get("backends") or {} for _, m in metas], "backends", metas)
    meta["under_test"] = _union([m.get("under_test") or {} for _, m in metas], "code", metas)
    calibrations = [c for _, m in metas if (c := m.get("calibration"))]
    if calibrations:  # time: the machine's typical speed over the shards' sessions
        meta["calibration"] = sorted(calibrations, key=lambda c: c["ns_per_iteration"])[
            (len(calibrations) - 1) // 2
        ]
    depth = max(len(m.get("history") or ()) for _, m in metas)
    histories = [m.get("history") or [] for _, m in metas]
    sessions = [[h[i] for h in histories if i < len(h)] for i in range(depth)]
    meta["history"] = [
        {**entries[0], "benchmarks": [b for e in entries for b in e["benchmarks"]]}
        for entries in sessions
    ]
    return meta


def _union(parts: list[Mapping], what: str, metas) -> dict:
    out: dict = {}
    for (path, _), part in zip(metas, parts):
        for name, version in part.items():
            if out.setdefault(name, version) != version:
                raise MergeError(
                    f"{path} measured {name} {version} and another shard {out[name]}: shards "
                    f"merge only from one run of one code ({what})",
                    Exit.MERGE_MISMATCH,
                )
    return dict(sorted(out.items()))


# -- verdict files ----------------------------------------------------------------------------


def verdicts(files: Sequence[tuple[str, Verdicts]]) -> Verdicts:
    """One run's verdicts from its shards' verdict files."""
    _verdicts_belong_together(files)
    ordered = [v for _, v in sorted(files, key=lambda f: (f[1].shard or {}).get("index", 1))]
    first = ordered[0]
    position = {k: i for v in ordered for k, i in v.positions.items()}

    def by_position(items):
        return sorted(items, key=lambda x: position.get(x.key, len(position)))

    records = by_position(r for v in ordered for r in v.records)
    gates = [v.gate for v in ordered if v.gate is not None]
    gate = _gate(gates, first, by_position) if gates else None
    memory = _memory([v.memory for v in ordered if v.memory is not None], by_position)
    if gate is not None and gate.memory is not None:
        memory = gate.memory
    merged = Verdicts(
        records=records,
        gate=gate,
        memory=memory,
        exit_status=Exit.OK,  # set below, from the shards'
        tests_failed=any(v.tests_failed for v in ordered),
        errors=[e for v in ordered for e in v.errors],
        measure=first.measure,
        threshold=first.threshold,
        alpha=first.alpha,
        identity=first.identity,
        shard=None,
        fullnames={k: n for v in ordered for k, n in v.fullnames.items()},
        positions=position,
        nothing_judged=_nothing_judged(ordered, records, gate),
    )
    merged.exit_status = _exit_status(merged, [v.exit_status for v in ordered])
    return merged


def _verdicts_belong_together(files: Sequence[tuple[str, Verdicts]]) -> None:
    """The shards' verdict files cover the suite once, from one run judged one way (a
    ``MergeError`` if not)."""
    count = _covered([(p, v.shard) for p, v in files])
    if count > 1:
        _same_run([(p, v.measure, v.identity) for p, v in files])
    _no_overlap([(p, [r.key for r in v.records]) for p, v in files])
    judged = {v.gate is not None for _, v in files}
    if len(judged) > 1:
        a = next(p for p, v in files if v.gate is not None)
        b = next(p for p, v in files if v.gate is None)
        raise MergeError(
            f"{a} was judged against a baseline and {b} was not: run every shard with the same "
            "options",
            Exit.MERGE_COVERAGE,
        )


def _nothing_judged(ordered: list[Verdicts], records: list, gate: GateResult | None) -> str | None:
    """Why the merged run judged nothing (a gate that judged nothing must not pass), or None."""
    judging = any(v.nothing_judged is not None for v in ordered) or gate is not None
    if not records and judging:
        return next(
            (v.nothing_judged for v in ordered if v.nothing_judged), "no benchmark was recorded"
        )
    if gate is not None:  # the shards' benchmarks, none of them in the baseline
        return nothing_in_common(gate)
    return None


def _exit_status(merged: Verdicts, statuses: list[int]) -> int:
    """What one unsharded run would have exited with (exit_codes.of_run): what the shards say of
    their tests and the gate is judged again on the merged verdicts; a status of pytest's that
    ended a shard early stands, and a shard that exited 9 says that its undecided rule is
    ``exit`` (every shard runs with the same options)."""
    ended = [s for s in statuses if s not in JUDGED]  # interrupted, internal or usage error
    quiet = all(s == Exit.NO_TESTS_COLLECTED for s in statuses)
    return of_run(
        ended[0] if ended else Exit.NO_TESTS_COLLECTED if quiet else Exit.OK,
        failed=merged.tests_failed
        or bool(merged.errors)
        or gates_failed(merged.gate, merged.memory),
        nothing_judged=bool(merged.nothing_judged),
        rerecord=bool(merged.gate is not None and merged.gate.rerecord),
        undecided=Exit.UNDECIDED in statuses and bool(merged.gate and merged.gate.undecided),
    )


def _dedupe(items) -> list:
    return list(dict.fromkeys(items))


def _gate(gates: list[GateResult], first: Verdicts, by_position) -> GateResult:
    ratios = {g.calibration_ratio for g in gates}
    result = GateResult(
        verdicts=sorted(
            (v for g in gates for v in g.verdicts),
            key=lambda v: (gate_compare._ORDER.get(v.status, 9), v.key),
        ),
        refused=next((g.refused for g in gates if g.refused), None),
        rerecord=next((g.rerecord for g in gates if g.rerecord), None),
        calibration_ratio=ratios.pop() if len(ratios) == 1 else None,
        notes=_notes(gates, ratios),
        memory=_memory([g.memory for g in gates if g.memory is not None], by_position),
        kernel=_kernel([g.kernel for g in gates if g.kernel is not None], by_position),
    )
    result.undecided = undecided.joined(
        [g.undecided for g in gates if g.undecided], [v.key for v in result.verdicts]
    )
    result.summary = _summary(result, first)
    return result


def _notes(gates: list[GateResult], ratios: set) -> list:
    """The shards' notes, each once, and their machine speeds when they differ."""
    notes = _dedupe(n for g in gates for n in g.notes)
    if len(ratios) > 1:
        shown = ", ".join(f"{r:.3f}" for r in sorted(r for r in ratios if r is not None))
        notes.append(f"the shards' machine speed against the baseline's: {shown}")
    return notes


def _summary(result: GateResult, first: Verdicts) -> str:
    if result.refused:
        return f"comparison refused: {result.refused}"
    if result.rerecord:
        return f"re-record the baseline: {result.rerecord}"
    # the gate's own summary, of the whole suite's verdicts
    settings = gate_compare.GateSettings(threshold=first.threshold, alpha=first.alpha)
    return gate_compare.summary(result, settings, measure.instrument(first.measure))


def _memory(parts: list[MemoryResult], by_position) -> MemoryResult | None:
    if not parts:
        return None
    not_measured: dict = {}
    for m in parts:
        for key, n in m.not_measured.items():
            not_measured[key] = not_measured.get(key, 0) + n
    return MemoryResult(
        verdicts=by_position(v for m in parts for v in m.verdicts),
        threshold=parts[0].threshold,
        notes=_dedupe(n for m in parts for n in m.notes),
        not_measured=not_measured,
        unmeasured=sum(m.unmeasured for m in parts),
    )


def _kernel(parts: list[KernelResult], by_position) -> KernelResult | None:
    if not parts:
        return None
    return KernelResult(
        verdicts=by_position(v for k in parts for v in k.verdicts),
        not_measured=_dedupe(n for k in parts for n in k.not_measured),
        loose=sum(k.loose for k in parts),
    )
