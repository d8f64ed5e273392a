"""After the last benchmark: the records judged, saved as the baseline, reported.

One pipeline (``finish``), called by the session's role object (roles/session.py), so that the
order of these steps, and what a failure in one of them does to the session, is in one place.
The role hands it what it knows as values (``Ended``); the pipeline never calls the role back.
"""

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import backends, sharding
from .backends import watchdog
from .exit_codes import Exit, gates_failed, of_run
from .gate import calibrate, save, shards, undecided, verdict_file
from .gate.judge import CountUndecided, MeasureAgain, judge
from .gate.verdicts import GateResult, MemoryResult, nothing_in_common
from .measure.records import Record
from .store import atomic, baseline, history


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
    #: the records' own ``pytest_concurrency`` section, when another process measured them (the
    #: head side of a counted run against the base): judged and saved with it, not this process's
    meta: dict | None = None
    #: what ``base`` is when the user did not save it (``GateResult.against``): the base side
    against: str = ""
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
        return bool(self.errors) or gates_failed(self.gate, self.memory)

    def status(self, given: int) -> int:
        """What the session exits with, pytest's own status ``given``: exit_codes.of_run."""
        return of_run(
            given,
            failed=self.failed,
            nothing_judged=bool(self.nothing_judged),
            rerecord=bool(self.gate is not None and self.gate.rerecord),
            undecided=self.undecided_exit and bool(self.gate is not None and self.gate.undecided),
        )


def finish(
    settings, base: history.Baseline | None, calibration: dict | None, ended: Ended
) -> SessionOutcome:
    """The session's end, in order: its records -> judged (against the baseline, or for leaks
    alone) -> saved as the baseline's latest session -> the reports."""
    outcome = SessionOutcome(
        ended.records, node_ids=ended.node_ids, undecided_exit=settings.undecided == undecided.EXIT
    )
    if ended.other_shards:
        outcome.messages.append(shards.left_out_line(ended.other_shards, settings.shard))
    if not _nothing_to_judge(outcome, settings, base, ended):
        meta = _meta(settings, calibration, ended)
        _judge(outcome, settings, base, meta, ended)
        if settings.save_baseline and meta is not None and ended.records:
            _save(outcome, settings, meta, ended)
        if settings.history is not None and ended.records:
            _keep_run(outcome, settings, ended)
    _report(outcome, settings, ended.written)
    return outcome


def _nothing_to_judge(outcome: SessionOutcome, settings, base, ended: Ended) -> bool:
    """No record where a gate or a save was asked for: the gate judged nothing (said), unless
    this is an empty shard, whose part of the baseline is missing (its tests are gone)."""
    if ended.records or not (settings.save_baseline or base is not None):
        return False
    shard = ended.shard
    if shard is None or not shard.empty:
        outcome.nothing_judged = ended.nothing_judged
        if settings.save_baseline:
            outcome.nothing_judged += f"; {settings.save_baseline} was left as it was"
        return True
    outcome.messages.append(shard.empty_line())
    return base is None


def _meta(settings, calibration: dict | None, ended: Ended) -> dict | None:
    """The ``pytest_concurrency`` section the records are judged and saved with (None: neither
    a baseline nor a save was asked for)."""
    if ended.meta is not None:
        return dict(ended.meta)
    if not (settings.save_baseline or settings.baseline):
        return None
    calibration = (
        calibrate.session(calibration, calibrate.measure())
        if settings.instrument.machine_bound
        else None
    )
    meta = baseline.current_meta(
        {r.backend: r.backend_version for r in ended.records},
        calibration,
        settings.instrument,
        ended.code,
    )
    if ended.shard is not None:
        meta["shard"] = {**ended.shard.section(), "identity": shards.identity(meta["cpu_model"])}
    return meta


def _judge(outcome: SessionOutcome, settings, base, meta: dict | None, ended: Ended) -> None:
    reference = None if settings.gate_native else backends.is_native
    judged = judge(
        base,
        ended.records,
        meta,
        settings.gate,
        reference,
        ended.measure_again,
        ended.count_undecided,
        against=ended.against,
    )
    outcome.records, outcome.gate, outcome.memory = judged.records, judged.gate, judged.memory
    outcome.messages.extend(judged.messages)
    if judged.gate is not None and ended.records:  # a gate that compared nothing must not pass
        outcome.nothing_judged = nothing_in_common(
            judged.gate, ended.against or str(settings.baseline)
        )


def _save(outcome: SessionOutcome, settings, meta: dict, ended: Ended) -> None:
    """The records saved as the latest session of ``--concurrency-save-baseline``, in front of
    those already there: not a failed benchmark's, nor a run the user killed."""
    if ended.refused:
        outcome.errors.append(f"no baseline written to {settings.save_baseline}: {ended.refused}")
        return
    if ended.document is None:
        return
    # history is added to the copy, not to this run's meta
    doc = {**ended.document, "pytest_concurrency": dict(meta)}
    try:
        said = save.store(
            settings.save_baseline,
            doc,
            ended.records,
            settings.gate,
            settings.baseline_sessions,
            ended.written.append,
            say_where=not ended.saved_for_the_run,
        )
        outcome.messages.extend(said)
    except baseline.BaselineError as exc:
        outcome.errors.append(str(exc))


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
    path, why = _guarded(
        settings.history,
        lambda: runlog.write(settings.history, doc),
        f"the run was added to the history {settings.history}",
        ended.written,
    )
    if why:
        outcome.errors.append(f"the run was not added to the history {settings.history}: {why}")
    else:
        outcome.messages.append(f"run added to the history: {path}")


def _report(outcome: SessionOutcome, settings, written: list[str]) -> None:
    if settings.report_md:
        from .report import markdown

        text = markdown.render(outcome.records, outcome.gate, outcome.memory)
        error = write_report(settings.report_md, text, written)
        if error:  # a full disk: the session's one line, not a traceback
            outcome.errors.append(error)
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


def write_report(path, text: str, written: list[str]) -> str | None:
    """The markdown report ``text`` written to ``path`` (``--concurrency-report-md``), by every
    session's end and by a run against the base; why not, in one line, or None."""
    from .report import markdown

    _, why = _guarded(
        path,
        lambda: markdown.write(path, text),
        f"the markdown report was written to {path}",
        written,
    )
    return f"the markdown report {path} was not written: {why}" if why else None


def _guarded(path, write: Callable[[], Any], done: str, written: list[str]) -> tuple[Any, str]:
    """``write()`` a file of the user's at ``path``, a Ctrl-C held until it is whole, ``done``
    added to ``written`` once it is; what ``write`` returned, and why it failed ("" if not)."""
    try:
        with watchdog.ctrl_c_after():
            result = write()
            written.append(done)
    except OSError as exc:
        if isinstance(exc, atomic.UnsafeLink):
            return None, str(exc)
        return None, atomic.why_not_written(exc, path)
    return result, ""


def show(tr, outcome: SessionOutcome) -> None:
    from .report import terminal

    if outcome.records or outcome.gate:
        every = tr.config.getoption("verbose", 0) > 0  # -v: how close each unchanged one came
        terminal.write(tr, outcome.records, outcome.gate, outcome.memory, every)
    for line, alarm in said(outcome):
        tr.write_line(line, red=alarm, bold=alarm)


def said(outcome: SessionOutcome) -> list[tuple[str, bool]]:
    """The lines said after the tables, each with whether it is an alarm (an error, a gate that
    judged nothing)."""
    from .report import escape

    lines = [(f"pytest-concurrency: {escape.terminal(line)}", False) for line in outcome.messages]
    lines += [
        (f"pytest-concurrency: ERROR: {escape.terminal(line)}", True) for line in outcome.errors
    ]
    if outcome.nothing_judged:
        lines.append(
            (
                f"pytest-concurrency: NOTHING JUDGED (exit {Exit.NOTHING_JUDGED}): "
                f"{outcome.nothing_judged}",
                True,
            )
        )
    return lines


def write_verdicts(
    settings,
    outcome: SessionOutcome,
    written: list[str],
    exit_status: int,
    tests_failed: bool,
    positions=None,
    shard: sharding.Selector | None = None,
) -> int:
    """``--concurrency-verdicts``: the records, verdicts and exit status, once the status is
    known (a merge of shards renders them again: ``python -m pytest_concurrency merge``); the
    status, or 1 when they could not be written (said on stderr)."""
    v = verdict_file.from_session(
        outcome.records,
        outcome.node_ids,
        positions or {},
        gate=outcome.gate,
        memory=outcome.memory,
        exit_status=exit_status,
        tests_failed=tests_failed,
        errors=list(outcome.errors),
        nothing_judged=outcome.nothing_judged,
        measure=settings.instrument.kind,
        threshold=settings.threshold,
        alpha=settings.gate.alpha,
        identity=shards.identity(),
        shard=shard.section() if shard is not None else None,
    )
    path = settings.verdicts
    _, why = _guarded(
        path, lambda: verdict_file.write(path, v), f"the verdicts were written to {path}", written
    )
    if not why:
        return exit_status
    print(
        f"pytest-concurrency: ERROR: the verdicts {path} were not written: {why}", file=sys.stderr
    )
    return Exit.TESTS_FAILED
