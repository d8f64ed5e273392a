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

Sessions are kept newest first (index 0 is the baseline's latest); a message names one by when it
was saved (``named``), as a user who counts saves from the first would otherwise look at another.
"""

import datetime as _dt
import math
from collections.abc import Mapping, Sequence

from ..store import history
from . import stats

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
    on each side by the span's own width. Some benchmarks settle into a speed per process (yarl's,
    unchanged code: 12 and 25 µs a call in two sessions, each with tight rounds), and a gate that
    left the odd speed out as an outlier failed three A/As in three. A few sessions have not seen
    every speed a process settles into: FastAPI's three saves spanned 36% (two at one speed, one
    at another) and a quiet A/A's process read 7.7% past the slower one, 46.5% past the others;
    widened by the threshold alone (7%), that failed. A session left out as disturbed counts
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
    width = high / low - 1
    if width <= threshold or not low / (1 + width) <= current <= high * (1 + width):
        return None
    return (
        f"within what the baseline's own {len(medians)} sessions of this code spanned "
        f"({low / center - 1:+.0%} to {high / center - 1:+.0%} around its median), widened by "
        f"that width ({width:.0%}) either side: time cannot tell a change this size here; "
        "counting instructions can (--concurrency-measure=instructions)"
    )


def saved_at(datetime: str) -> str:
    """A document's ``datetime`` as a user reads it ("2026-11-29 08:12:05 UTC"); as given when it
    is not ISO 8601, "" when there is none."""
    try:
        when = _dt.datetime.fromisoformat(datetime)
    except ValueError:
        return datetime
    if when.tzinfo is not None:  # pytest-benchmark's own documents hold naive UTC
        when = when.astimezone(_dt.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def named(sessions: Sequence[history.BaselineSession], i: int) -> str:
    """Session ``i`` (0 = latest) of a benchmark as a user finds it: by its place in the order of
    saving, the earliest kept first, and when it was saved ("the 2nd of 3 saves, at 2026-11-29
    08:12:05 UTC"): sessions saved within a second of each other differ in their place alone."""
    when = saved_at(sessions[i].saved)
    return f"the {_ordinal(len(sessions) - i)} of {len(sessions)} saves" + (
        f", at {when}" if when else ""
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def left_out(bad: Mapping[int, str], sessions: Sequence[history.BaselineSession]) -> str:
    """The note naming the sessions ``disturbed`` left out."""
    return (
        "left out as disturbed: "
        + "; ".join(f"{named(sessions, i)} ({why})" for i, why in sorted(bad.items()))
        + f": judged on the other {len(sessions) - len(bad)} session(s)"
    )


def widened_by(medians: Mapping[int, float], sessions: Sequence[history.BaselineSession]) -> str:
    """The sessions (index -> median) farthest from the others: what widened a drift threshold."""
    logs = {i: math.log(m) for i, m in medians.items() if m > 0}
    if not logs:
        return ""
    center = stats.median(list(logs.values()))
    far = max(abs(x - center) for x in logs.values())
    return ", ".join(
        f"{named(sessions, i)} ({math.exp(x - center) - 1:+.0%})"
        for i, x in sorted(logs.items())
        if far > 0 and abs(x - center) >= far / 2
    )


def identity(code: Mapping | None, libraries: Mapping | None) -> str:
    """A session's code identity as text: commit (dirty), libraries; "" when unrecorded."""
    code = code or {}
    parts = []
    if code.get("commit"):
        parts.append(str(code["commit"])[:10] + (" (dirty)" if code.get("dirty") else ""))
    if libraries:
        parts.append(", ".join(f"{k} {v}" for k, v in sorted(libraries.items())))
    return "; ".join(parts)


def different_code(identities: Sequence[tuple], saved: Sequence[str] = ()) -> str | None:
    """The note when the baseline's sessions recorded different code identities
    (``history.Baseline.identities``, latest first), each group of sessions alike named by its
    places in the order of saving and when they were saved (``history.Baseline.saved``), the
    earliest first."""
    ids = [identity(code, libs) for code, libs in identities]
    if len({i for i in ids if i}) <= 1:
        return None
    when = [saved_at(s) for s in saved] + [""] * (len(ids) - len(saved))
    groups: list[list] = []  # [first, last, identity] of consecutive sessions alike, oldest first
    for n in reversed(range(len(ids))):
        if groups and groups[-1][2] == ids[n]:
            groups[-1][1] = n
        else:
            groups.append([n, n, ids[n]])
    said = []
    for first, last, ident in groups:
        a, b = len(ids) - first, len(ids) - last  # their places in the order of saving
        times = " to ".join(dict.fromkeys(t for t in (when[first], when[last]) if t))
        said.append(
            (f"saves {a}-{b}" if a != b else f"save {a}")
            + f" of {len(ids)}"
            + (f" ({times})" if times else "")
            + f": {ident or 'unrecorded'}"
        )
    return "baseline sessions measured different code: " + " / ".join(said)
