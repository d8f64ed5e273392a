"""After the last benchmark: the records judged, saved as the baseline, reported.

One pipeline (``finish``), called by the session's role object (roles/session.py), so that the
order of these steps, and what a failure in one of them does to the session, is in one place.
The role hands it what it knows as values (``Ended``); the pipeline never calls the role back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from . import sharding
from .backends import watchdog
from .exit_codes import Exit
from .gate import atomic, baseline, calibrate, history, shards, verdict_file
from .gate import compare as gate
from .gate import memory as memory_gate
from .gate.verdicts import GateResult, MemoryResult
from .measure import records


@dataclass(frozen=True)
class Ended:
    """What the session's role knows at its end, handed to the pipeline as values."""

    nothing_judged: str  # why no benchmark was recorded (said only when none was)
    refused: str | None  # why this session must not write a baseline (interrupted, killed, ...)
    failed: list[str]  # the benchmark tests that failed or errored, in the order they ran
    other_shards: int = 0  # the baseline's benchmarks left to other shards (gate/shards.py)
    #: against a stored time baseline: the suspects' records measured again, in their tests run in
    #: a fresh process (roles/remeasure.py, ``SecondSessions.for_suspects``)
    measure_again: Callable[[list, list, dict, list], dict] | None = None
    #: the role's own list: each thing of the user's written, appended as it is written, so that
    #: a Ctrl-C landing in the pipeline can say what had been (roles/session.py: ``interrupted``)
    written: list[str] = field(default_factory=list)


@dataclass
class SessionOutcome:
    records: list
    gate: GateResult | None = None
    memory: MemoryResult | None = None  # the gate's, or leaks alone when there is no baseline
    messages: list = field(default_factory=list)  # shown after the tables
    errors: list = field(default_factory=list)  # each one fails the session
    nothing_judged: str | None = None  # why a gate that was asked for judged nothing
    interrupted: bool = False  # its one message says where

    @property
    def failed(self) -> bool:
        return (
            bool(self.errors)
            or bool(self.gate and self.gate.failed)
            or bool(self.memory and self.memory.failed)
        )

    @property
    def exit_status(self) -> int:
        """What the session exits with (when its tests passed): a failure wins (1), then a gate
        that judged nothing (8), a baseline of another measuring side (7), else 0."""
        if self.failed:
            return Exit.TESTS_FAILED
        if self.nothing_judged:  # a gate that judged nothing must not pass quietly
            return Exit.NOTHING_JUDGED
        if self.gate is not None and self.gate.rerecord:
            return Exit.RERECORD_BASELINE
        return Exit.OK


def finish(
    config, bs, settings, base: history.Baseline | None, calibration: dict | None, ended: Ended
) -> SessionOutcome:
    """The session's end, in order: its records -> judged (against the baseline, or for leaks
    alone) -> saved as the baseline's latest session -> the reports."""
    recs = records.from_session(bs.benchmarks)
    outcome = SessionOutcome(recs)
    shard = sharding.of(config)
    if ended.other_shards:
        outcome.messages.append(shards.left_out_line(ended.other_shards, settings.shard))
    if not recs and (settings.save_baseline or base is not None):
        if shard is None or not shard.empty:
            outcome.nothing_judged = ended.nothing_judged
            if settings.save_baseline:
                outcome.nothing_judged += f"; {settings.save_baseline} was left as it was"
            _report(outcome, settings, ended.written)
            return outcome
        # an empty shard: what the baseline holds of it is missing (its tests are gone)
        outcome.messages.append(shard.empty_line())
        if base is None:
            _report(outcome, settings, ended.written)
            return outcome
    meta = None
    if settings.save_baseline or settings.baseline:
        calibration = (
            calibrate.session(calibration, calibrate.measure())
            if settings.instrument.machine_bound
            else None
        )
        meta = baseline.current_meta(
            {r.backend: r.backend_version for r in recs}, calibration, settings.instrument
        )
        if shard is not None:
            meta["shard"] = {**shard.section(), "identity": shards.identity(meta["cpu_model"])}
    _judge(outcome, base, meta, settings, ended.measure_again, records.node_ids(bs.benchmarks))
    if settings.save_baseline and meta is not None and recs:
        refused = ended.refused or _failed_benchmarks(ended.failed)
        if refused:  # a failed benchmark, or killed by the user: not what the baseline should hold
            outcome.errors.append(f"no baseline written to {settings.save_baseline}: {refused}")
        else:  # this session as the baseline's latest, in front of the sessions already there
            try:
                doc = _session_document(config, bs, meta)
                outcome.messages.extend(store(settings, doc, recs, ended.written.append))
            except baseline.BaselineError as exc:
                outcome.errors.append(str(exc))
    _report(outcome, settings, ended.written)
    return outcome


def _failed_benchmarks(failed: list[str]) -> str | None:
    """Why a session whose benchmark tests failed saves no baseline: without their rounds it would
    drop their entries (or keep a session that measured something else)."""
    if not failed:
        return None
    named = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    return (
        f"{len(failed)} benchmark test{'s' * (len(failed) != 1)} failed ({named}), and a "
        "baseline without their rounds would lose them; the file is left as it was: fix them, or "
        "deselect them (-k, --deselect) to save the others"
    )


def _judge(outcome: SessionOutcome, base, meta, settings, again, node_ids: dict) -> None:
    """Leaks fail without a baseline; with one, the gate's verdicts (a suspect's second session,
    its test run again in a fresh process, judged with it)."""
    recs = outcome.records
    if memory_gate.has_figures(recs):  # the gate below replaces it, unless it refuses
        outcome.memory = memory_gate.judge(None, recs, settings.memory_threshold)
    if base is None:
        return
    result = _compared(base, recs, meta, settings)
    reruns = again(gate.suspects(result), recs, node_ids, outcome.messages) if again else {}
    if reruns:
        recs = outcome.records = gate.faster_sessions(recs, reruns)
        result = gate.reproduce(result, _compared(base, recs, meta, settings), reruns)
    outcome.gate = result
    if result.memory is not None:  # else refused: the leaks found above still stand
        outcome.memory = result.memory


def _report(outcome: SessionOutcome, settings, written: list[str]) -> None:
    if settings.report_md:
        from .report import markdown

        text = markdown.render(outcome.records, outcome.gate, outcome.memory)
        try:
            with watchdog.ctrl_c_after():
                markdown.write(settings.report_md, text)
                written.append(f"the markdown report was written to {settings.report_md}")
        except OSError as exc:  # a full disk: the session's one line, not a traceback
            why = (
                str(exc)
                if isinstance(exc, atomic.UnsafeLink)
                else atomic.why_not_written(exc, settings.report_md)
            )
            outcome.errors.append(
                f"the markdown report {settings.report_md} was not written: {why}"
            )
        else:
            outcome.messages.append(f"markdown report written to {settings.report_md}")
    if settings.plot_dir:
        from .report import plot

        try:
            paths = plot.write(settings.plot_dir, outcome.records)
        except plot.PlotError as exc:
            outcome.errors.append(str(exc))
        else:
            written.append(f"{len(paths)} charts were written to {settings.plot_dir}")
            outcome.messages.append(f"{len(paths)} charts written to {settings.plot_dir}")


def _compared(base: history.Baseline, recs: list, meta: dict, settings) -> GateResult:
    """The gate over a run's records; native reference rows set aside unless gated (see gate.set_aside)."""
    from . import backends

    result = gate.compare(base, recs, meta, settings.gate)
    if settings.gate_native:
        return result
    return gate.set_aside(result, backends.is_native, settings.gate, settings.instrument)


def store(settings, doc: dict, recs: list, wrote) -> list[str]:
    """Write one session's document ``doc`` (its records ``recs``) to ``--concurrency-save-baseline``
    in front of the sessions already there; what the save did (messages). ``wrote(line)`` is told
    once the file is written: a Ctrl-C after that says so. A ``BaselineError``: nothing written."""
    said: list[str] = []
    doc, recs = _judgeable(settings, doc, recs, said)
    with baseline.locked(settings.save_baseline, lambda: _waiting(settings.save_baseline)):
        # the file as it is now, not as at start-up: another session may have saved to it since
        previous = baseline.load_previous(settings.save_baseline)
        if previous is not None:
            reason = history.incompatible(previous, doc[history.SECTION])
            if reason:
                said.append(f"{settings.save_baseline}: earlier sessions dropped: {reason}")
                previous = None
        doc, kept = gate.add_session(doc, previous, recs, settings.gate, settings.baseline_sessions)
        said.extend(kept)
        with watchdog.ctrl_c_after():  # saved, and known to be, or neither
            baseline.save(settings.save_baseline, doc)
            wrote(f"the baseline was saved to {settings.save_baseline}")
    said.append(
        f"baseline with {len(recs)} benchmarks written to {settings.save_baseline} "
        f"({history.count(doc)} session(s), at most {settings.baseline_sessions} kept)"
    )
    return said


def _judgeable(settings, doc: dict, recs: list, said: list) -> tuple[dict, list]:
    """``doc`` and ``recs`` without the benchmarks that measured 0 in every round (a test that
    counts nothing): a baseline holding one is refused when read, as no change can be judged
    against it, and the next session could then neither judge nor save."""
    nothing = [r.label for r in recs if r.samples and not any(r.samples)]
    if not nothing:
        return doc, recs
    kept = [b for b in doc["benchmarks"] if any((b.get("stats") or {}).get("data") or [1])]
    if not kept:
        raise baseline.BaselineError(
            f"no baseline written to {settings.save_baseline}: every benchmark measured 0 in every "
            "round, and no change can be judged against that"
        )
    named = ", ".join(nothing[:3]) + (f" and {len(nothing) - 3} more" if len(nothing) > 3 else "")
    said.append(
        f"{named} measured 0 in every round: left out of the baseline, as no change can be "
        "judged against it"
    )
    return {**doc, "benchmarks": kept}, [r for r in recs if any(r.samples) or not r.samples]


def _waiting(path) -> None:
    # said as it happens: a session that seems to hang at its end says why
    print(
        f"\npytest-concurrency: waiting for another session's save to {path} to end",
        file=sys.stderr,
        flush=True,
    )


def _session_document(config, bs, meta: dict) -> dict:
    """pytest-benchmark's own JSON for this run, with raw samples, plus our section."""
    doc = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=bs.benchmarks,
        include_data=True,
        machine_info=bs.get_machine_info(),
        commit_info=config.hook.pytest_benchmark_generate_commit_info(config=config),
    )
    doc["pytest_concurrency"] = dict(meta)  # history is added to the copy, not to this run's meta
    return doc


def show(tr, outcome: SessionOutcome) -> None:
    from .report import escape, terminal

    if outcome.records or outcome.gate:
        every = tr.config.getoption("verbose", 0) > 0  # -v: how close each unchanged one came
        terminal.write(tr, outcome.records, outcome.gate, outcome.memory, every)
    for line in outcome.messages:
        tr.write_line(f"pytest-concurrency: {escape.terminal(line)}")
    for line in outcome.errors:
        tr.write_line(f"pytest-concurrency: ERROR: {escape.terminal(line)}", red=True, bold=True)
    if outcome.nothing_judged:
        tr.write_line(
            f"pytest-concurrency: NOTHING JUDGED (exit {Exit.NOTHING_JUDGED}): "
            f"{outcome.nothing_judged}",
            red=True,
            bold=True,
        )


def write_verdicts(
    session, bs, settings, outcome: SessionOutcome, positions, written: list[str]
) -> None:
    """``--concurrency-verdicts``: this session's records, verdicts and exit status, once its exit
    status is known (a merge of shards renders them again: ``python -m pytest_concurrency merge``)."""
    if outcome.interrupted:
        return
    shard = sharding.of(session.config)
    v = verdict_file.from_session(
        outcome.records,
        records.node_ids(bs.benchmarks),
        positions,
        gate=outcome.gate,
        memory=outcome.memory,
        exit_status=int(session.exitstatus),
        tests_failed=session.testsfailed > 0,
        errors=list(outcome.errors),
        nothing_judged=outcome.nothing_judged,
        measure=settings.instrument.kind,
        threshold=settings.threshold,
        alpha=settings.gate.alpha,
        identity=shards.identity(),
        shard=shard.section() if shard is not None else None,
    )
    try:
        with watchdog.ctrl_c_after():
            verdict_file.write(settings.verdicts, v)
            written.append(f"the verdicts were written to {settings.verdicts}")
    except OSError as exc:
        why = (
            str(exc)
            if isinstance(exc, atomic.UnsafeLink)
            else atomic.why_not_written(exc, settings.verdicts)
        )
        print(
            f"pytest-concurrency: ERROR: the verdicts {settings.verdicts} were not written: {why}",
            file=sys.stderr,
        )
        session.exitstatus = Exit.TESTS_FAILED
