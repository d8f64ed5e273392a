"""A stored counted gate's moved counts, judged again on a second counted session started
otherwise (roles/recount.py).

A count follows the process's start-up (where the interpreter's own objects land), and a save
and its judgement never start alike: their command lines differ. A change of the code moves the
count in every start-up; a start-up's draw moves it in one. So a count that moved beyond the
threshold, either way, stands only when the second session moves it the same way; otherwise
it is inconclusive, said as undecided (gate/undecided.py), never unchanged: the first session
did see it move.
"""

import dataclasses
from collections.abc import Mapping

from ..measure.records import Record
from .verdicts import IMPROVED, INCONCLUSIVE, REGRESSED, GateResult

#: The verdicts of a count that a second start-up must confirm.
MOVED = (REGRESSED, IMPROVED)


def suspects(result: GateResult) -> list[tuple]:
    """The counts that moved beyond the threshold, either way."""
    return [v.key for v in result.verdicts if v.status in MOVED]


def replaced(records: list[Record], recounts: Mapping[tuple, Record]) -> list[Record]:
    """Each suspect's rounds, in every layout, as the second session counted them; its other
    figures (kernel, memory, profile) stay the first session's, which measured them."""
    out = []
    for rec in records:
        again = recounts.get(rec.key)
        if again is None or not again.samples:
            out.append(rec)
            continue
        extra = {**rec.extra, "layouts": list(again.extra.get("layouts") or ())}
        out.append(dataclasses.replace(rec, samples=list(again.samples), extra=extra))
    return out


def reproduce(
    first: GateResult, second: GateResult, recounts: Mapping[tuple, Record]
) -> GateResult:
    """``second`` (judged on ``replaced``): a suspect whose second session moved it the same way
    keeps that verdict; any other is inconclusive, with both changes."""
    before = {v.key: v for v in first.verdicts}
    confirmed = 0
    for v in second.verdicts:
        old = before.get(v.key)
        if v.key not in recounts or old is None or old.status not in MOVED:
            continue
        now = f"{v.change:+.2%}" if v.change is not None else "no change it could judge"
        if v.status == old.status:
            confirmed += 1
            v.note = _join(
                v.note, f"moved in a second session started otherwise too (first {old.change:+.2%})"
            )
            continue
        v.status = INCONCLUSIVE
        v.note = _join(
            v.note,
            f"its count follows how the process started: {old.change:+.2%} in this session, "
            f"{now} in a second one started otherwise; judged neither a regression nor an "
            "improvement",
        )
        second.notes.append(f"{recounts[v.key].label}: {v.note}")
    second.notes.insert(
        0,
        f"{len(recounts)} count(s) that moved counted again in a session started otherwise "
        f"(another command line and environment), {confirmed} moved there too",
    )
    return second


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
