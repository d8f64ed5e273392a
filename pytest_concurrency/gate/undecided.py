"""What time left undecided, settled by counting instructions (the counts are the arbiter).

On a loaded machine the time gates rightly refuse to judge: a change reads inconclusive, or
beyond its threshold but not confirmed by a second process, and the build went green on a real
+30%. So the tests of those benchmarks, and only those, are counted on both sides in one counted
run (roles/arbiter.py), and their verdicts are settled here on the counts: a counted regression
beyond the threshold time judges it at (before any widening: what a quiet machine's time would
fail) fails the build and says that time could not decide it; anything else stays undecided, says
what the counts saw, and is said first (``headline``): counts that did not move cannot tell an
unchanged benchmark from one that waits longer (a sleep, a timeout, the kernel, the caches).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .. import measure
from ..measure.records import key_label
from .compare import suspects
from .verdicts import IMPROVED, INCONCLUSIVE, REGRESSED, UNCHANGED, GateResult, share

#: ``--concurrency-undecided``: what a run with undecided benchmarks exits with: 0 (said loudly), or
#: its own status (exit_codes.Exit.UNDECIDED) for a workflow to mark neutral or fail
PASS, EXIT = "pass", "exit"
#: Where time moved and the counts did not, what the change, if any, is made of
NOT_IN_COUNTS = "the change, if any, is in waits, the kernel or caches, which counts cannot see"


@dataclass(frozen=True)
class Counts:
    """What the counted run said of the benchmarks time left undecided."""

    #: key -> (the instruction verdict's status, its change), for each one counted on both sides
    verdicts: Mapping[tuple, tuple[str, float | None]] = field(default_factory=dict)
    base: str = ""  # what the base side was: the against spec, or git:COMMIT of a stored baseline
    #: why nothing was counted (valgrind missing, a baseline without a commit, the run failed)
    why_not: str = ""
    #: key -> the instruction verdict's own note: its layouts' changes and where the instructions
    #: went, by function. Kept in the verdict's note: without it a counted +1.50% of zeroconf's
    #: test_create_ipv6_addresses, which does not call the slowed code, could not be explained
    notes: Mapping[tuple, str] = field(default_factory=dict)


def of_stored(first: GateResult, final: GateResult) -> list[tuple]:
    """The benchmarks a stored time baseline's gate left undecided: inconclusive, a suspect
    (beyond its threshold) that its second process did not confirm, an improvement, which no
    second process ever confirms (beside a busy loop zeroconf's send, made 10-12% slower in
    counts, read -46% "improved" over its controls), or unchanged where the machine left it less
    than one free core (its ``interference``: judge.py). ``first``: the verdicts before the
    suspects' second session, ``final``: after it."""
    suspected = set(suspects(first))
    return sorted(
        v.key
        for v in final.verdicts
        if not measure.instrument(v.measure).exact
        and (
            v.status in (INCONCLUSIVE, IMPROVED)
            or (
                v.status == UNCHANGED
                and (v.key in suspected or v.interference or blind_at_threshold(v))
            )
        )
    )


def blind_at_threshold(v) -> bool:
    """Unchanged in time against a baseline noisier than the threshold set: its own sessions drift
    more than that threshold, or its threshold was widened (by that drift, a session's spread)
    past twice it, the noise allowed for larger than the change the threshold is for; or its own
    interval reaches past the threshold, so that a change of its size is not ruled out. A reading
    within the threshold then cannot tell a change of its size from where this process landed:
    at a load of 30, FastAPI's +7.8% (counted) read -0.5% against sessions 151% apart; at a load
    of 18, multidict's +10.4% read +4.2% against a threshold widened from 7% to 41%, and at a load
    of 5-14, +4.8% "unchanged" at 7% with an interval of -16.6% to +32.3%."""
    limit = _time_threshold(v)
    if limit is None:
        return False
    drifts = v.drift is not None and v.drift > limit
    return drifts or (v.threshold is not None and v.threshold > 2 * limit) or _reaches(v, limit)


def _reaches(v, limit: float) -> bool:
    """Whether a verdict's interval reaches past ``limit`` on the slower side."""
    return v.ci is not None and v.ci[1] > limit


def _scales_disagree(v) -> bool:
    """Faster over its controls, slower in raw time: beside two busy loops at a load of 43, a
    +10% slowdown read "improved" (-29.7%) so, and was not counted (docs/gates/undecided.md)."""
    return v.status == IMPROVED and v.decided_by == "control" and (v.raw_change or 0) > 0


def of_paired(verdicts: Iterable) -> list[tuple]:
    """The benchmarks whose time against the base side stayed inconclusive (gate/paired.py)."""
    return sorted({v.key for v in verdicts if v.figure == "time" and v.status == INCONCLUSIVE})


def settle(verdicts: Iterable, keys: Iterable[tuple], counts: Counts) -> list[str]:
    """Settle each time verdict of ``keys`` on ``counts``: a counted regression beyond the time
    verdict's own threshold becomes a regression (it fails the build), its note saying that time
    could not decide it; the rest stay as time left them, with what the counts saw. The lines to
    say first: what neither time nor counts decided (none when every one was decided)."""
    keys = set(keys)
    left = []
    for v in verdicts:
        if v.key not in keys or getattr(v, "figure", "time") != "time":
            continue
        time = f"time {v.change:+.1%} undecided" if v.change is not None else "time undecided"
        time += _why_time(v)
        counted = counts.verdicts.get(v.key)
        status, change = counted if counted is not None else (None, None)
        moved = f"{change:+.2%}" if change is not None else "unmeasured"
        against = f" against {counts.base}" if counts.base else ""
        how = f" (counted {counts.notes[v.key]})" if counts.notes.get(v.key) else ""
        limit = _time_threshold(v)
        beyond = not _within(change, limit)
        if status == REGRESSED and beyond:
            v.status = REGRESSED
            v.note = _join(
                v.note,
                f"{time}: time could not decide it; instructions {moved}{against}: regressed{how}",
            )
            continue
        if status == IMPROVED and beyond and v.status == IMPROVED:  # confirmed where it can be
            v.note = _join(v.note, f"instructions {moved}{against}: fewer, as time said{how}")
            continue
        if v.status == IMPROVED:  # a speed-up nothing confirmed: undecided, as a slowdown would be
            v.status = INCONCLUSIVE
        said = _counts_said(status, f"{moved}{against}", against, (limit, beyond), counts.why_not)
        v.note = _join(v.note, f"{time}; {said}{how}")
        left.append(f"{key_label(v.key)}: {time}; {said}")
    if not left:
        return []
    return [_headline(len(left)), *left, *([counts.why_not] if counts.why_not else [])]


def _counts_said(status, moved: str, against: str, at: tuple, why_not: str) -> str:
    """What the counts said of a benchmark that stays undecided: ``moved`` their change against
    the base, ``at`` the threshold time judges it at and whether that change lies beyond it."""
    limit, beyond = at
    if status in (REGRESSED, IMPROVED) and not beyond:
        # judged where time would have judged it on a quiet machine: zeroconf's
        # test_create_ipv6_addresses counted +1.50% with nothing changed (where its objects
        # landed at start-up), a regression at the count's own 1%, none at time's 7%
        return f"instructions {moved}, within the {share(limit)} time judges it at: {NOT_IN_COUNTS}"
    if status == UNCHANGED:
        return f"instructions unchanged ({moved}): {NOT_IN_COUNTS}"
    if status == IMPROVED:
        return f"instructions {moved}: fewer, while time could not say faster"
    if status is not None:
        return f"instructions {status}{against}"
    return (
        "not counted (below)"
        if why_not
        else "not counted: its test recorded no counts on both sides"
    )


def of_counts(verdicts: Iterable) -> list[str]:
    """What a counted judgement could not decide (nothing else counts them again): its
    inconclusive verdicts, whose layouts moved on both sides of the threshold or whose rounds
    wandered, to be said first as time's undecided are. A slowdown of the threshold's own size
    lands there as often as beyond it: yarl's ``URL.build`` with work sized to +1% of its saved
    count read +0.86% to +1.13%, by where the save's and the judgement's objects landed."""
    left = [
        f"{key_label(v.key)}: instructions {v.change:+.2%} undecided"
        + (f" ({v.note.split(';')[0]})" if v.note else "")
        for v in verdicts
        if v.status == INCONCLUSIVE and measure.instrument(v.measure).exact and v.change is not None
    ]
    return [_headline(len(left), COUNTS_ALONE), *left] if left else []


#: Who could not decide: time, then the counts that settle it (``settle``), or counts alone
TIME_THEN_COUNTS = "neither time nor counts could decide"
COUNTS_ALONE = "their counts could not decide"


def _headline(n: int, who: str = TIME_THEN_COUNTS) -> str:
    return (
        f"UNDECIDED: {n} benchmark{'s' * (n != 1)} {who}: this run passes without a verdict on "
        f"{'them' if n != 1 else 'it'} (--concurrency-undecided=exit ends it with its own status)"
    )


def joined(parts: Iterable[list[str]], keys: Iterable[tuple]) -> list[str]:
    """The lines ``settle`` said for each of a run's shards, said once for the run: one headline
    counting the benchmarks of ``keys`` (the merged verdicts') named, then theirs, then each
    shard's why-not once."""
    parts = [part for part in parts if part]
    said = [line for part in parts for line in part[1:]]
    labels = tuple(f"{key_label(k)}: " for k in keys)
    named = [line for line in said if line.startswith(labels)]
    rest = list(dict.fromkeys(line for line in said if not line.startswith(labels)))
    who = COUNTS_ALONE if parts and COUNTS_ALONE in parts[0][0] else TIME_THEN_COUNTS
    return [_headline(len(named), who), *named, *rest] if said else []


def _time_threshold(v) -> float | None:
    """The threshold time judges ``v`` at, before its baseline's drift widened it (a stored
    verdict's ``base_threshold``; a paired verdict's ``threshold`` is never widened)."""
    base = getattr(v, "base_threshold", None)
    return base if base is not None else v.threshold


def _within(change: float | None, limit: float | None) -> bool:
    return change is not None and limit is not None and abs(change) <= limit


def _why_time(v) -> str:
    """Why time left it undecided, in a few words (a stored verdict's fields, or a paired one's)."""
    if getattr(v, "interference", "") or getattr(v, "loaded", False):
        return " on a loaded machine"
    if getattr(v, "too_noisy", False):
        return " behind a threshold the baseline's drift widened"
    limit = _time_threshold(v)
    if v.status == UNCHANGED and limit is not None and blind_at_threshold(v):
        if v.drift is not None and v.drift > limit:
            return f" (its baseline's sessions drift {v.drift:.0%}, more than the threshold)"
        if v.threshold is not None and v.threshold > 2 * limit:
            return (
                f" (its threshold widened from {share(limit)} to {share(v.threshold)} by the noise)"
            )
        return f" (its interval reaches {v.ci[1]:+.1%}, past the {share(limit)} threshold)"
    if v.status == UNCHANGED:
        return " (not reproduced in a second process)"
    if _scales_disagree(v):
        return " (faster over its controls, slower in raw time)"
    if v.status == IMPROVED:
        return " (faster, in one process: a speed-up is never measured again)"
    return ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
