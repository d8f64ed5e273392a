"""After the last benchmark: the records judged, saved as the baseline, reported.

One pipeline (``finish``), called by the session's role object (roles/session.py), so that the
order of these steps, and what a failure in one of them does to the session, is in one place.
The role hands it what it knows as values (``Ended``); the pipeline never calls the role back.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from . import backends, sharding
from .backends import watchdog
from .exit_codes import Exit
from .gate import atomic, baseline, calibrate, history, save, shards, undecided, verdict_file
from .gate.judge import CountUndecided, MeasureAgain, judge
from .gate.verdicts import GateResult, MemoryResult, nothing_in_common
from .measure.records import Record


@dataclass(frozen=True)
class Ended:
    """What the session's role knows at its end, handed to the pipeline as values."""

    records: list[Record]  # the benchmarks measured (records.from_session)
    node_ids: dict  # each record's key -> the node id of its test
    #: pytest-benchmark's own JSON of the session, raw rounds included: made when a save is asked
    #: and nothing refuses it (``refused``)
    document: dict | None
    nothing_judged: str  # why no benchmark was recorded (said only when none was)
    #: why this session must not write a baseline (interrupted, killed, a benchmark test failed)
    refused: str | None
    shard: sharding.Selector | None = None  # this process's, when the run is a shard
    other_shards: int = 0  # the baseline's benchmarks left to other shards (gate/shards.py)
    #: against a stored time baseline: the suspects' records measured again, in their tests run in
    #: a fresh process (roles/remeasure.py, ``SecondSessions.for_suspects``)
    measure_again: MeasureAgain | None = None
    #: against a stored time baseline: what time left undecided counted on both sides
    #: (roles/arbiter.py, ``Arbiter.for_stored``)
    count_undecided: CountUndecided | None = None
    #: the role's own list: each thing of the user's written, appended as it is written, so that
    #: a Ctrl-C landing in the pipeline can say what had been (roles/session.py: ``interrupted``)
    written: list[str] = field(default_factory=list)
    #: the file saved is the run's own (a side of a counted run against the base, whose counts the
    #: run judges): the user asked for no baseline there, so where it was written is not said
    saved_for_the_run: bool = False
    #: the code under test (``{"commit", "dirty"}``) from pytest-benchmark's commit hook; None:
    #: read from git here (``baseline.code_identity``)
    code: dict | None = None


@dataclass
class SessionOutcome:
    records: list
    gate: GateResult | None = None
    memory: MemoryResult | None = None  # the gate's, or leaks alone when there is no baseline
    messages: list = field(default_factory=list)  # shown after the tables
    errors: list = field(default_factory=list)  # each one fails the session
    nothing_judged: str | None = None  # why a gate that was asked for judged nothing
    interrupted: bool = False  # its one message says where
    node_ids: dict = field(default_factory=dict)  # each record's key -> its test's node id
    #: --concurrency-undecided=exit: what neither time nor counts decided ends the run with its
    #: own status
    undecided_exit: bool = False

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
        that judged nothing (8), a baseline of another measuring side (7), then what neither time
        nor counts decided (9, with --concurrency-undecided=exit), else 0."""
        if self.failed:
            return Exit.TESTS_FAILED
        if self.nothing_judged:  # a gate that judged nothing must not pass quietly
            return Exit.NOTHING_JUDGED
        if self.gate is not None and self.gate.rerecord:
            return Exit.RERECORD_BASELINE
        if self.undecided_exit and self.gate is not None and self.gate.undecided:
            return Exit.UNDECIDED
        return Exit.OK


def finish(
    settings, base: history.Baseline | None, calibration: dict | None, ended: Ended
) -> SessionOutcome:
    """The session's end, in order: its records -> judged (against the baseline, or for leaks
    alone) -> saved as the baseline's latest session -> the reports."""
    recs = ended.records
    outcome = SessionOutcome(
        recs, node_ids=ended.node_ids, undecided_exit=settings.undecided == undecided.EXIT
    )
    shard = ended.shard
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
            {r.backend: r.backend_version for r in recs},
            calibration,
            settings.instrument,
            ended.code,
        )
        if shard is not None:
            meta["shard"] = {**shard.section(), "identity": shards.identity(meta["cpu_model"])}
    reference = None if settings.gate_native else backends.is_native
    judged = judge(
        base, recs, meta, settings.gate, reference, ended.measure_again, ended.count_undecided
    )
    outcome.records, outcome.gate, outcome.memory = judged.records, judged.gate, judged.memory
    outcome.messages.extend(judged.messages)
    if judged.gate is not None and recs:  # a gate that compared nothing must not pass quietly
        outcome.nothing_judged = nothing_in_common(judged.gate, str(settings.baseline))
    if settings.save_baseline and meta is not None and recs:
        if ended.refused:  # a failed benchmark, or killed by the user: not what a baseline holds
            outcome.errors.append(
                f"no baseline written to {settings.save_baseline}: {ended.refused}"
            )
        elif ended.document is not None:  # the latest session, in front of those already there
            # history is added to the copy, not to this run's meta
            doc = {**ended.document, "pytest_concurrency": dict(meta)}
            try:
                said = save.store(
                    settings.save_baseline,
                    doc,
                    recs,
                    settings.gate,
                    settings.baseline_sessions,
                    ended.written.append,
                    say_where=not ended.saved_for_the_run,
                )
                outcome.messages.extend(said)
            except baseline.BaselineError as exc:
                outcome.errors.append(str(exc))
    if settings.history is not None and recs:
        _keep_run(outcome, settings, ended)
    _report(outcome, settings, ended.written)
    return outcome


def _keep_run(outcome: SessionOutcome, settings, ended: Ended) -> None:
    """``--concurrency-history``: this run added to the run log (report/runlog.py), as a new
    file; a run that must not save a baseline (a benchmark test failed, interrupted) adds none."""
    from .report import runlog

    if ended.refused:
        outcome.messages.append(f"no run added to the history {settings.history}: {ended.refused}")
        return
    doc = runlog.run_document(
        outcome.records,
        code=runlog.Code.here(),
        measure=settings.instrument.kind,
        node_ids=ended.node_ids,
        gate=outcome.gate,
        memory=outcome.memory,
        shard=ended.shard.section() if ended.shard is not None else None,
    )
    try:
        with watchdog.ctrl_c_after():
            path = runlog.write(settings.history, doc)
            ended.written.append(f"the run was added to the history {settings.history}")
    except OSError as exc:
        why = (
            str(exc)
            if isinstance(exc, atomic.UnsafeLink)
            else atomic.why_not_written(exc, settings.history)
        )
        outcome.errors.append(f"the run was not added to the history {settings.history}: {why}")
    else:
        outcome.messages.append(f"run added to the history: {path}")


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
    session, settings, outcome: SessionOutcome, positions, written: list[str]
) -> None:
    """``--concurrency-verdicts``: this session's records, verdicts and exit status, once its exit
    status is known (a merge of shards renders them again: ``python -m pytest_concurrency merge``)."""
    if outcome.interrupted:
        return
    shard = sharding.of(session.config)
    v = verdict_file.from_session(
        outcome.records,
        outcome.node_ids,
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
