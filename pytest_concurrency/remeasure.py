"""A suspect's second session of rounds, taken inside its test while its fixtures are alive.

A regression against a stored time baseline must reproduce before it fails the build
(``gate.compare.faster_sessions``). So each benchmark is judged as soon as its rounds end, still
inside its test's call (``MeasuringSession.pytest_runtest_call``), and a suspect (a regression, or
a change the machine's state left undecided) is measured again right there: its event loop, server,
temporary directory and monkeypatches are the ones its first rounds had. Taken at the session's end
instead, after teardown, the calls raised into the user's session (``Event loop is closed``,
coroutines never awaited: with ``filterwarnings = error``, a failed build on unchanged code).

The session's end judges every record again with the whole session's figures; a suspect it finds
that was not re-measured here keeps its first verdict (the conservative one), in one line.
"""

from __future__ import annotations

import dataclasses
import gc
import warnings

from . import backends, cases, plain_tests
from .backends import watchdog
from .gate import baseline, history, stats
from .gate import compare as gate
from .measure import control, driver, records
from .measure.records import Record

#: ``--concurrency-remeasure=every``: every benchmark gets a second session of rounds in its test.
EVERY = "every"
#: A second session of a user's test takes at most as long as its first one's rounds, or this.
MIN_BUDGET_S = 1.0
#: What a second session's record has of its own: the machine as it was then (no controls: none
#: of the first session's either, they were other rounds')
OWN = ("foreign_cpu", *control.KEYS)


class SecondSessions:
    """One session's second sessions: decided and taken test by test, handed to its end."""

    def __init__(self, settings, base: history.Baseline, calibration: dict | None, judge_by):
        """``judge_by(base, meta, settings)``: the session end's gate (session_end.judge_by), so
        that a second session is wanted by the verdict the end would give."""
        # read at start-up, not in the first judged test's call: scipy (25 s there under load,
        # past a suite's faulthandler_timeout), package metadata and git
        stats.load()
        self._meta = baseline.current_meta({}, calibration, settings.instrument)
        self.settings = settings
        self._baseline = base
        self._judge_by = judge_by
        self.taken: dict[tuple, Record] = {}  # key -> the record of its second session
        self.not_taken: dict[tuple, str] = {}  # key -> why a wanted second session failed

    def after_rounds(self, role, item, bench, calls: driver.PlainCalls | None) -> None:
        """After a test's rounds, before its teardown: measure it again if its first verdict is
        suspect (every benchmark with ``--concurrency-remeasure=every``). ``calls``: a user's
        test's function as it handed it to pytest-benchmark, if it was kept."""
        found = records.from_session([bench.stats])
        if not found or found[0].key in self.taken or found[0].key in self.not_taken:
            return  # (taken in the child its rounds ran in: ``taken_over``)
        rec = found[0]
        if self.settings.remeasure != EVERY and not self._suspect(rec):
            return
        with warnings.catch_warnings():  # what a failed call leaves is no warning of the suite's
            warnings.simplefilter("ignore")
            try:
                if "concurrency_benchmark" in item.fixturenames:  # a workload case
                    samples, extra = _case_again(role, rec, self.settings)
                elif calls is not None:  # a user's own test: its function, as handed over
                    budget = max(MIN_BUDGET_S, sum(rec.samples) * bench.stats.iterations)
                    samples, extra = calls.again(len(rec.samples), bench.stats.iterations, budget)
                    bracket = item.stash.get(plain_tests.CONTROL, None)  # beside those rounds too
                    extra.update(bracket.figures(len(samples)) if bracket is not None else {})
                else:
                    raise RuntimeError("its function and arguments were not kept for another call")
            except BaseException as exc:  # its first verdict stands: the conservative one
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self.not_taken[rec.key] = f"{type(exc).__name__}: {exc}"
            if rec.key in self.not_taken:
                gc.collect()  # a coroutine never awaited, an unclosed socket: freed here
                return
        own = {k: extra.get(k) for k in OWN}
        self.taken[rec.key] = dataclasses.replace(rec, samples=samples, extra={**rec.extra, **own})

    def handed_over(self, item, bench, calls: driver.PlainCalls | None) -> dict | None:
        """In the child an isolated test ran in (plain_tests.call_apart): its second session, if
        it was suspect, taken there with its fixtures alive; what the session's process needs of
        it (its rounds and their own figures, or why it could not be taken)."""
        found = records.from_session([bench.stats])
        if not found:
            return None
        key = found[0].key
        self.after_rounds(None, item, bench, calls)
        if key in self.taken:
            rec = self.taken[key]
            return {"samples": rec.samples, "own": {k: rec.extra.get(k) for k in OWN}}
        return {"why": self.not_taken[key]} if key in self.not_taken else None

    def taken_over(self, bench, sent: dict) -> None:
        """In the session's process: the second session its child took (``handed_over``)."""
        found = records.from_session([bench.stats])
        if not found:
            return
        rec = found[0]
        if "why" in sent:
            self.not_taken[rec.key] = sent["why"]
        else:
            extra = {**rec.extra, **sent["own"]}
            self.taken[rec.key] = dataclasses.replace(rec, samples=sent["samples"], extra=extra)

    def for_suspects(self, keys: list, recs: list[Record], messages: list) -> dict:
        """The second sessions of the session end's suspects ``keys``; a line for each suspect
        that has none (its first verdict stands)."""
        labels = {r.key: r.label for r in recs}
        for key in keys:
            if key not in self.taken:
                why = self.not_taken.get(key, "its rounds did not look suspect when its test ran")
                messages.append(
                    f"{labels.get(key, key)} was not measured a second time ({why}); "
                    "its first verdict stands"
                )
        return {key: self.taken[key] for key in keys if key in self.taken}

    def _suspect(self, rec: Record) -> bool:
        meta = {**self._meta, "backends": {rec.backend: rec.backend_version}}
        # its own entries alone: the same verdict, not 10,000 others judged again (docs/security.md)
        judge = self._judge_by(self._baseline.only({rec.key}), meta, self.settings)
        return rec.key in gate.suspects(judge([rec]))


def _case_again(role, rec: Record, settings) -> tuple[list, dict]:
    """A workload case's rounds again, where its first ones were measured; raises if they cannot be."""
    case = cases.Case(rec.extra.get("workload_ref", rec.workload), rec.params)
    plan = dataclasses.replace(cases.plan(case, rec.backend, settings), rounds=len(rec.samples))
    place = cases.where(rec.backend, settings)
    if place == cases.NATIVE:
        from .native import child

        return child.measure(plan)
    if place == cases.ISOLATED:
        from .runner import isolate

        reply = isolate.run_rounds(role.workers(), plan, with_memory=False)
        if not reply.get("ok"):
            raise RuntimeError(reply.get("error"))
        return reply["samples"], reply.get("extra") or {}
    guard = watchdog.deadline(plan.timeout, plan.label)
    return driver.run_rounds(backends.load(rec.backend), plan, guard=guard, with_memory=False)
