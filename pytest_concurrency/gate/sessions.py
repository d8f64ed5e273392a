"""The quality of a baseline's sessions: which ones were disturbed, which ones widened a
threshold, whether they measured the same code.

A disturbed session (a neighbour on the host for a minute) is left out of a benchmark's
pooled samples and of its drift, so it can neither widen the threshold (one such session
widened one to +223%, and a real +70% read "unchanged") nor move the center. A session is
disturbed when it was flagged so when saved (see ``compare.add_session``), when its median is
an outlier among the sessions' medians (beyond ``OUTLIER_MADS`` scaled median absolute
deviations, and beyond the threshold), or when its rounds spread ``SPREAD_FACTOR`` times as
wide as the other sessions' typically do. The rules need a majority of good sessions to act:
they never leave a benchmark without sessions.

Sessions are numbered newest first: session 1 is the baseline's latest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from . import history, stats

OUTLIER_MADS = 3.0  # scaled MADs (1.4826 x MAD estimates one standard deviation)
SPREAD_FACTOR = 3.0
_MIN_ROUNDS_FOR_SPREAD = 5  # fewer rounds say nothing about a session's spread


def spread(samples: Sequence[float]) -> float:
    """Interquartile range / median: how wide a session's rounds are, robust to a few."""
    s = sorted(samples)
    m = stats.median(s)
    return (s[(3 * len(s)) // 4] - s[len(s) // 4]) / m if m > 0 else math.inf


def disturbed(sessions: Sequence[history.BaselineSession], threshold: float) -> dict[int, str]:
    """Index (0 = latest) -> why that session is disturbed; empty unless some remain good."""
    out = {i: f"flagged when saved: {s.disturbed}" for i, s in enumerate(sessions) if s.disturbed}
    medians = {
        i: stats.median(s.samples) for i, s in enumerate(sessions) if i not in out and s.samples
    }
    logs = {i: math.log(m) for i, m in medians.items() if m > 0}
    if len(logs) >= stats.MIN_SESSIONS_FOR_DRIFT:
        center = stats.median(list(logs.values()))
        mad = stats.median([abs(x - center) for x in logs.values()])
        limit = max(OUTLIER_MADS * 1.4826 * mad, math.log1p(threshold))
        out.update(
            {
                i: f"its median is {math.exp(x - center) - 1:+.0%} off the other sessions'"
                for i, x in logs.items()
                if abs(x - center) > limit
            }
        )
    out.update(_wide(sessions, threshold, out))
    return out if len(out) < len(sessions) else {}


def _wide(
    sessions: Sequence[history.BaselineSession], threshold: float, skip: Mapping[int, str]
) -> dict[int, str]:
    """The sessions (not in ``skip``) whose rounds spread far wider than the others': something
    else ran beside them for a while."""
    spreads = {
        i: spread(s.samples)
        for i, s in enumerate(sessions)
        if i not in skip and len(s.samples) >= _MIN_ROUNDS_FOR_SPREAD
    }
    wide = {}
    for i, own in spreads.items():
        others = stats.median([v for j, v in spreads.items() if j != i] or [math.inf])
        if own > max(SPREAD_FACTOR * others, threshold):
            times = f"{own / others:.0f}x " if others > 0 else "far beyond "
            wide[i] = f"its rounds spread {own:.0%}, {times}the other sessions' {others:.0%}"
    return wide


def within_their_span(
    sessions: Sequence[history.BaselineSession], center: float, current: float, threshold: float
) -> str | None:
    """Why a change is no evidence of a code change, if it is none: the baseline's own sessions
    of the same code differ beyond the threshold, and ``current`` lies within their span widened
    by the threshold. Some benchmarks settle into a speed per process (yarl's, unchanged code:
    12 and 25 µs a call in two sessions, each with tight rounds), and a gate that left the odd
    speed out as an outlier failed three A/As in three. A session left out as disturbed counts
    here too, unless its own rounds show that something ran beside it (``_wide``): a neighbour
    spreads a session's rounds, a process's speed does not. ``center``: the baseline's median,
    as the verdict reports changes from it."""
    beside = _wide(sessions, threshold, {})
    medians = [
        stats.median(s.samples) for i, s in enumerate(sessions) if s.samples and i not in beside
    ]
    if len(medians) < 2 or min(medians) <= 0 or center <= 0:
        return None
    low, high = min(medians), max(medians)
    if high / low - 1 <= threshold or not low / (1 + threshold) <= current <= high * (
        1 + threshold
    ):
        return None
    return (
        f"within what the baseline's own {len(medians)} sessions of this code spanned "
        f"({low / center - 1:+.0%} to {high / center - 1:+.0%} around its median): time cannot "
        f"tell a change this size here; counting instructions can (--concurrency-measure=instructions)"
    )


def left_out(bad: Mapping[int, str], total: int) -> str:
    """The note naming the sessions ``disturbed`` left out."""
    return (
        "left out disturbed baseline "
        + "; ".join(f"session {i + 1} ({why})" for i, why in sorted(bad.items()))
        + f": judged on the other {total - len(bad)} session(s)"
    )


def widened_by(medians: Mapping[int, float]) -> str:
    """The sessions (index -> median) farthest from the others: what widened a drift threshold."""
    logs = {i: math.log(m) for i, m in medians.items() if m > 0}
    if not logs:
        return ""
    center = stats.median(list(logs.values()))
    far = max(abs(x - center) for x in logs.values())
    named = [
        f"{i + 1} ({math.exp(x - center) - 1:+.0%})"
        for i, x in sorted(logs.items())
        if far > 0 and abs(x - center) >= far / 2
    ]
    return ("session " if len(named) == 1 else "sessions ") + ", ".join(named)


def identity(code: Mapping | None, libraries: Mapping | None) -> str:
    """A session's code identity as text: commit (dirty), libraries; "" when unrecorded."""
    code = code or {}
    parts = []
    if code.get("commit"):
        parts.append(str(code["commit"])[:10] + (" (dirty)" if code.get("dirty") else ""))
    if libraries:
        parts.append(", ".join(f"{k} {v}" for k, v in sorted(libraries.items())))
    return "; ".join(parts)


def different_code(identities: Sequence[tuple]) -> str | None:
    """The note when the baseline's sessions recorded different code identities
    (``history.Baseline.identities``)."""
    ids = [identity(code, libs) for code, libs in identities]
    if len({i for i in ids if i}) <= 1:
        return None
    groups: list[list] = []  # [first, last, identity] of consecutive sessions alike
    for n, ident in enumerate(ids, 1):
        if groups and groups[-1][2] == ident:
            groups[-1][1] = n
        else:
            groups.append([n, n, ident])
    said = [
        f"session{'s' if a != b else ''} {a}{'-' + str(b) if a != b else ''}: {ident or 'unrecorded'}"
        for a, b, ident in groups
    ]
    return "baseline sessions measured different code: " + " / ".join(said)
