"""The judge step at a session's end, one call from the pipeline (session_end.finish): the
session's records against the baseline, or for leaks alone without one; a suspect measured again
(its test run in a fresh process) judged on the faster of its two sessions, a count that moved
judged on a second session started otherwise (gate/recounted.py); what time still left
undecided counted, and settled on the counts; what counts alone could not decide, said as
undecided too (gate/undecided.py)."""

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .. import measure
from ..measure.records import Record
from ..store import history
from . import compare, interference, recounted, undecided
from . import memory as memory_gate
from .verdicts import UNCHANGED, GateResult, MemoryResult

#: the suspects' keys and the session's records -> each suspect's record measured again, and a
#: line for each one that was not
MeasureAgain = Callable[[list, list[Record]], tuple[Mapping[tuple, Record], list[str]]]
#: the keys time left undecided -> what counting their tests on both sides said (roles/arbiter.py)
CountUndecided = Callable[[list], undecided.Counts]


@dataclass(frozen=True)
class Judged:
    records: list[Record]  # the session's, a suspect's as the faster of its two sessions
    gate: GateResult | None  # None: no baseline
    memory: MemoryResult | None  # the gate's, or leaks alone when it has none
    messages: list[str]  # the second session's, shown after the tables


def _second(
    first: GateResult, records: list[Record], reruns: Mapping, counted: bool, judged: Callable
) -> tuple[list[Record], GateResult]:
    """The records and verdicts once the suspects were measured again: a count that moved must
    move in a second start-up too; a slowdown must show in a second process too (judged on the
    faster of the two)."""
    if counted:
        records = recounted.replaced(records, reruns)
        return records, recounted.reproduce(first, judged(records), reruns)
    records = compare.faster_sessions(records, reruns)
    return records, compare.reproduce(first, judged(records), reruns)


def judge(
    base: history.Baseline | None,
    records: list[Record],
    meta: Mapping | None,
    settings: compare.GateSettings,
    reference: Callable[[str], bool] | None = None,
    again: MeasureAgain | None = None,
    count: CountUndecided | None = None,
    against: str = "",
) -> Judged:
    """Leaks fail without a baseline; with one, the gate's verdicts. ``reference(backend)``: a row
    shown beside the others, not gated; ``again``: a suspect's second session; ``count``: what
    time left undecided counted (nothing runs when time decided everything); ``against``: what
    ``base`` is when the user did not save it (compare.compare)."""
    leaks = (
        memory_gate.judge(None, records, settings.memory_threshold)
        if memory_gate.has_figures(records)
        else None
    )
    if base is None or meta is None:
        return Judged(records, None, leaks, [])
    judged = functools.partial(
        compare.compare,
        base,
        current_meta=meta,
        settings=settings,
        reference=reference,
        against=against,
    )
    result = first = judged(records)
    counted = measure.instrument(meta.get("measure")).exact
    suspected = recounted.suspects(first) if counted else compare.suspects(first)
    reruns, said = again(suspected, records) if again else ({}, [])
    if reruns:
        records, result = _second(first, records, reruns, counted, judged)
        result.summary = compare.summary(result, settings, measure.instrument(meta.get("measure")))
    decided = result.refused is None and result.rerecord is None
    if count is not None and decided:
        # an "unchanged" with less than one free core says no more than a change would
        starved = interference.blind(records, meta.get("cpu_count") or 1)
        for v in result.verdicts:
            why = starved.get(v.key) if v.status == UNCHANGED else None
            if why and not v.interference:
                v.interference = why
        keys = undecided.of_stored(first, result)
        if keys:
            result.undecided = undecided.settle(result.verdicts, keys, count(keys))
            # its "passed"/"FAILED" line, on the statuses the counts settled
            instrument = measure.instrument(meta.get("measure"))
            result.summary = compare.summary(result, settings, instrument)
    elif decided and counted:  # counted: nothing settles it
        result.undecided = undecided.of_counts(result.verdicts)
    # a refused comparison judges no memory: the leaks found above still stand
    memory = result.memory if result.memory is not None else leaks
    return Judged(records, result, memory, said)
