"""Judging a change against its base measured in the same run: per-pair ratios.

With ``--concurrency-against`` each benchmark ran on both sides in turns (runner/lockstep.py):
A B B A | A B B A | ..., each round recorded with its turn. One group of four (a quad) gives
one ratio: the head's two rounds over the base's two. What the machine did during the quad
it did to both sides (a linear drift cancels exactly: both sides' mean position is the same),
and each side has one round after its own and one after the other's (warm and cold caches).
The verdict is on those ratios alone, never on a number from another session (Bulej et al.'s
duet benchmarking, asv's ``continuous``). Paired round by round instead, without the quads,
an A/A of three models here read 4 "changes" in 9 (99% intervals that excluded 0).

Within one pair of sessions, the change is the Hodges-Lehmann estimate on the quads' log ratios
(the median of their pairwise means), with the Wilcoxon signed-rank interval: distribution-free
for a symmetric spread of log ratios, and about 1.5 times as efficient as the sign test's
interval, which it falls back to below ``WILCOXON_FROM`` quads (the median, exact order statistics).

But two processes of the same code differ by a percent or two for their whole life (where their
memory lands, what each did before the test), and a pair of sessions is two processes: however
many quads it has, its estimate is off by that much. Time is so judged with the pair of sessions
as the unit: the mean of the pairs' log estimates, its spread what is expected (each pair's own
standard error, and ``BETWEEN_SESSIONS`` for the two processes; worth ``PRIOR_PAIRS`` pairs) pooled
with what the pairs show, with Student's t; a pair far unlike the others is set aside (``_unlike``),
but a change that shows only with a pair against it set aside is decided at the last pair of
sessions, not before: stopping early on it read aiohttp against its previous release +3.9%
"regressed" (pairs +3.4%, +1.4%, -6.7% set aside, +4.9%, +5.8%), where its count read +0.0% and
the same session again -0.8%.
A change regressed when its 99% interval lies above 1 and the estimate beyond the threshold, in two
pairs of sessions or more; improved likewise below; unchanged when its 90% interval lies within the
threshold (equivalent, at 5% on each side); otherwise inconclusive, and measured in one more pair of
sessions, up to ``MAX_SESSIONS`` (against.py). A pair of sessions run beside a busy core is not
judged on time (``LOADED``), and none is measured after it. Kernel figures are counts, not times:
they are judged on their quads together, and a change must be in both halves of them.
"""

import collections
import math
import os
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..measure.records import Record, key_label
from ..measure.stopping import median_interval
from .verdicts import IMPROVED, INCONCLUSIVE, MISSING, REGRESSED, UNCHANGED, share

#: Pairs cancel the machine's drift, so a smaller change than time's 7% counts: with the pair of
#: sessions as the unit, 3% read no wrong verdict in 50 A/As of gevent here and caught a +5% change
#: in 49 of 50 (docs/gates/against.md).
DEFAULT_THRESHOLD = 0.03
#: Tasks the OS schedules (threads, processes): the two sides' processes run them apart by a steady
#: percent even when their code is byte for byte the same (threading here: +0.8% in the mean of 50
#: A/As' first pairs of sessions); at 3%, a bootstrap of those pairs read 0.3% false regressions,
#: at 5% none, and +8% was caught 50 of 50. Processes were not measured paired; they are scheduled
#: as threads are.
OS_TASKS_THRESHOLD = 0.05
#: How far two processes of the same code are apart beyond their quads' own error, as a standard
#: deviation of log time: in 50 A/A runs here (evidence/against_evidence.py), the first pairs of
#: sessions' estimates spread 2.4% on gevent and 1.5% on threading, of which their own error was
#: 2.1% and 1.25%: 1.2% and 0.8% beyond it.
BETWEEN_SESSIONS = 0.01
PRIOR_PAIRS = 4  # what BETWEEN_SESSIONS and each pair's own error are worth, in pairs of sessions
UNLIKE = (
    3.0  # spreads from the pairs' median beyond which a pair of sessions is set aside (``_unlike``)
)
MIN_SESSIONS_FOR_CHANGE = 2  # one process unlike its twin spoils one pair of sessions, not two
#: Threads of other processes running, on average, as the sides' turns ended, from which a pair of
#: sessions is not judged on time (``usage.OthersRunning``). Pairing cancels a load that weighs on
#: both sides alike, not a busy core: beside one busy loop on 2 cores (read 1.00-1.23 here; with
#: nothing else running 0.00-0.18), the pairs of sessions of an A/A read one side 10-25% slower
#: than the other, whichever side by chance (threading +22%, +4%, -16%, +25%, +21% in one run),
#: and 3 A/A runs in 10 failed.
LOADED = 0.5
MAX_SESSIONS = (
    8  # pairs of sessions a benchmark is measured in, at most, before it stays inconclusive
)
CONFIDENCE = 0.99
MIN_PAIRS = 8  # the fewest quads whose sign-test interval reaches 99%: 2 * 0.5**8 < 0.01
#: A benchmark's rounds on each side, at least: two a quad, enough quads for the interval, and two
#: quads to spare (the sides' calibration calls need not line up with a quad).
MIN_ROUNDS = 2 * MIN_PAIRS + 4
WILCOXON_FROM = 16  # quads from which the signed-rank interval's normal approximation holds
#: ...and up to which its n(n+1)/2 pairwise means are cheap: a microsecond test gets thousands of
#: rounds in pytest-benchmark's second, where the sign test's interval is narrow enough anyway.
WILCOXON_UP_TO = 1000  # ~0.25 s here


@dataclass
class PairedVerdict:
    key: tuple
    status: str
    figure: str = "time"  # or a kernel figure (gate/kernel.py's FIGURES), per op
    change: float | None = None  # the typical head/base ratio - 1 (Hodges-Lehmann, or the median)
    ci: tuple | None = None  # its 99% interval, - 1
    pairs: int = 0  # quads
    threshold: float = DEFAULT_THRESHOLD
    sessions: int = 1  # pairs of sessions whose quads it was judged on
    note: str = ""
    #: time's last pair of sessions ran beside other processes' load (``LOADED``): another pair
    #: would most likely too, so none is measured
    loaded: bool = False


@dataclass
class PairedResult:
    verdicts: list = field(default_factory=list)
    sides: str = ""  # what each side imported: "mylib 1.4.2 (base) against 1.5.0 (head)"
    undecided: list = field(
        default_factory=list
    )  # what neither time nor counts decided (undecided.py)

    @property
    def failed(self) -> bool:
        return any(v.status == REGRESSED for v in self.verdicts)

    def by_status(self, status: str) -> list:
        return [v for v in self.verdicts if v.status == status]


def thresholds(settings) -> Callable[[Record], float]:
    """Each benchmark's threshold against the base side (``settings``: a ``GateSettings``): as
    the stored gate's, but with this gate's defaults."""
    return lambda rec: settings.threshold_for(rec, default=default_threshold(rec))


def default_threshold(rec: Record) -> float:
    """A benchmark's threshold against the base side when the user set none."""
    from .kernel import PROCESS, THREAD  # the kernel gate's kinds of task the OS schedules

    return (
        OS_TASKS_THRESHOLD if rec.extra.get("task_kind") in (THREAD, PROCESS) else DEFAULT_THRESHOLD
    )


def quad_ratios(base_rounds: list, head_rounds: list) -> list[float]:
    """One ratio per complete quad: the head's rounds (turns 1, 2) over the base's (turns 0, 3).

    Rounds are ``[turn, value, ...]``; a quad whose base rounds sum to 0 reads 1 when the head's
    do too, else infinity (a figure from none: a count that appeared).
    """
    a = {int(r[0]): r[1] for r in base_rounds if r[0] >= 0}
    b = {int(r[0]): r[1] for r in head_rounds if r[0] >= 0}
    out = []
    for first in sorted({4 * (t // 4) for t in a}):
        if all(t in a for t in (first, first + 3)) and all(t in b for t in (first + 1, first + 2)):
            base, head = a[first] + a[first + 3], b[first + 1] + b[first + 2]
            out.append(head / base if base > 0 else 1.0 if head == 0 else math.inf)
    return out


def shift_interval(
    ratios: list[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float] | None:
    """(estimate, low, high) of the typical ratio, or None: too few quads."""
    if not WILCOXON_FROM <= len(ratios) <= WILCOXON_UP_TO or not all(
        0 < r < math.inf for r in ratios
    ):
        interval = median_interval(ratios, confidence)
        return None if interval is None else (statistics.median(ratios), *interval)
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    k = max(0, int(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))))
    estimate, low, high = (
        math.exp(x) for x in (statistics.median(walsh), walsh[k], walsh[len(walsh) - 1 - k])
    )
    return estimate, low, high


def judge_pair(
    key: tuple,
    base_rounds: list,
    head_rounds: list,
    threshold: float,
    figure: str = "time",
    again: Iterable[tuple] = (),
) -> PairedVerdict:
    """The verdict on one benchmark from both sides' ``[turn, value]`` rounds; ``again``: the
    ``(base_rounds, head_rounds)`` of further pairs of sessions that measured it (see ``judge``)."""
    measured = [
        (quad_ratios(b, h), _others(b + h)) for b, h in [(base_rounds, head_rounds), *again]
    ]
    groups = [g for g, _ in measured if g]
    loads = [load for g, load in measured if g]  # each pair of sessions' load beside the sides
    verdict = PairedVerdict(
        key,
        INCONCLUSIVE,
        figure=figure,
        pairs=sum(map(len, groups)),
        threshold=threshold,
        sessions=len(groups),
    )
    if not groups:
        verdict.note = (
            "no rounds ran in turns with the base side's (measured outside pytest-benchmark's "
            "rounds, or the other side did not reach this test)"
        )
        return verdict
    ratios = [r for g in groups for r in g]
    if min(ratios) == max(ratios) == 1:  # a count that repeats exactly, both sides
        verdict.status, verdict.change, verdict.ci = UNCHANGED, 0.0, (0.0, 0.0)
        return verdict
    if figure == "time":
        return _beside_load(verdict, groups, loads, threshold)
    return _within_one(verdict, ratios, threshold)


def _others(rounds: list) -> float | None:
    """The mean of ``usage.OthersRunning``'s readings over paired rounds that read it (None: none did)."""
    read = [r[4] for r in rounds if len(r) > 4 and r[0] >= 0 and r[4] is not None and r[4] >= 0]
    return statistics.fmean(read) if read else None


def _beside_load(
    verdict: PairedVerdict, groups: list, loads: list, threshold: float
) -> PairedVerdict:
    """Time on the pairs of sessions that ran with no busy core beside them (``LOADED``)."""
    busy = [i for i, load in enumerate(loads) if load is not None and load >= LOADED]
    verdict.loaded = bool(busy) and busy[-1] == len(groups) - 1
    if len(busy) == len(groups):
        verdict.sessions = 0
        verdict.note = (
            f"{_load(max(loads[i] for i in busy))} while the sides took their turns: beside a "
            "busy core one process runs 10-25% apart from its twin, so time cannot judge here; "
            "count instead (--concurrency-measure=instructions)"
        )
        return verdict
    kept = [g for i, g in enumerate(groups) if i not in busy]
    verdict.pairs, verdict.sessions = sum(map(len, kept)), len(kept)
    verdict = _across_sessions(verdict, kept, threshold)
    if busy:
        aside = ", ".join(f"pair {i + 1} ({_load(loads[i])})" for i in busy)
        verdict.note = "; ".join(filter(None, [verdict.note, f"not judged on time: {aside}"]))
    return verdict


def _load(others: float) -> str:
    """Other processes' load in the unit it is read in (``usage.OthersRunning``): threads running
    or waiting to run, on average, beside this machine's cores; never "cores busy", which a
    count of 12.9 on 2 cores is not."""
    return (
        f"other processes' load {others:.1f} (their threads running or waiting to run, on "
        f"average) on {os.cpu_count() or 1} cores"
    )


@dataclass(frozen=True)
class _Pooled:
    """The pairs of sessions' log ratios, what is expected of them pooled with what they show."""

    logs: list  # each pair's log ratio
    unlike: set  # the pairs set aside (``_unlike``)
    mean: float  # of the pairs kept
    n: int  # the pairs kept
    observed: float  # their variance
    expected: float  # one pair's variance, as expected
    half: float  # the mean's standard error
    q99: float  # Student's t at 99% and 90%, on the degrees of freedom of both
    q90: float

    def interval(self, q: float) -> tuple[float, float]:
        return math.exp(self.mean - q * self.half) - 1, math.exp(self.mean + q * self.half) - 1


def _across_sessions(verdict: PairedVerdict, groups: list, threshold: float) -> PairedVerdict:
    """Time, with each pair of sessions as the unit (see the module's doc)."""
    z99 = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    per_pair = [p for p in (_one_pair(g, z99) for g in groups) if p is not None]
    if not per_pair:
        verdict.note = _too_few(max(map(len, groups)))
        return verdict
    pooled = _pooled(per_pair)
    verdict.change = change = math.exp(pooled.mean) - 1
    verdict.ci = pooled.interval(pooled.q99)
    _decide(verdict, pooled, change, threshold)
    visible = (
        math.exp(pooled.q99 * pooled.half) - 1
    )  # the smallest change these pairs would call one
    if verdict.status == INCONCLUSIVE and visible > threshold:
        n = pooled.n
        verdict.note += (
            f"; the smallest change {n} pair{'s' * (n != 1)} of sessions could show on this machine "
            f"today: {pct(visible)} (threshold {share(threshold)}); counting instructions sees much "
            f"less (--concurrency-measure=instructions)"
        )
    return verdict


def _pooled(per_pair: list) -> _Pooled:
    """What is expected, worth PRIOR_PAIRS pairs, pooled with what the pairs show (a scaled
    inverse chi-square prior), with Student's t on the degrees of freedom of both."""
    from scipy.stats import t  # lazy, as in gate/stats.py: ~0.3 s to import

    logs = [p[0] for p in per_pair]
    own = [p[1] for p in per_pair]  # each pair's standard error
    expected = BETWEEN_SESSIONS**2 + statistics.fmean(e * e for e in own)  # one pair's variance
    unlike = _unlike(logs, math.sqrt(expected))
    kept = [x for i, x in enumerate(logs) if i not in unlike]
    n = len(kept)
    observed = statistics.variance(kept) if n > 1 else 0.0
    df = PRIOR_PAIRS + n - 1
    sd = math.sqrt((PRIOR_PAIRS * expected + (n - 1) * observed) / df)
    q99, q90 = (float(t.ppf(0.5 + c / 2, df)) for c in (CONFIDENCE, 0.90))
    return _Pooled(
        logs, unlike, statistics.fmean(kept), n, observed, expected, sd / math.sqrt(n), q99, q90
    )


def _decide(verdict: PairedVerdict, pooled: _Pooled, change: float, threshold: float) -> None:
    """The verdict's status on the pairs' interval, and its note."""
    low, high = pooled.interval(pooled.q99)
    steady = ", ".join(pct(math.exp(x) - 1) for x in pooled.logs)
    aside = (
        "; set aside, unlike the others: "
        + ", ".join(
            f"pair {i + 1} ({pct(math.exp(pooled.logs[i]) - 1)})" for i in sorted(pooled.unlike)
        )
        if pooled.unlike
        else ""
    )
    low90, high90 = pooled.interval(pooled.q90)
    if (low > 0 and change > threshold) or (high < 0 and change < -threshold):
        # a change beyond the threshold: decided once the pairs allow it
        logs = pooled.logs
        against = [i for i in pooled.unlike if (logs[i] - pooled.mean) * change < 0]
        if against and len(logs) < MAX_SESSIONS:
            verdict.note = (
                f"a change only with pair {against[0] + 1} set aside, which reads the other way "
                f"({steady}): decided after {MAX_SESSIONS} pairs, not before"
            )
        elif pooled.n >= MIN_SESSIONS_FOR_CHANGE:
            verdict.status = REGRESSED if change > 0 else IMPROVED
            verdict.note = f"pairs of sessions {steady}{aside}" if len(logs) > 1 else ""
        else:
            verdict.note = "a change must show in a second pair of sessions (two processes of the same code differ)"
    elif -threshold <= low90 and high90 <= threshold:
        verdict.status = UNCHANGED  # equivalent within the threshold, at 95% each side
        verdict.note = aside[2:]
    elif pooled.observed > 2 * pooled.expected:
        verdict.note = f"the pairs of sessions differ ({steady}): more pairs would tell{aside}"
    elif abs(change) > threshold:
        verdict.note = f"beyond the threshold, but the interval reaches back to no change: more pairs would tell{aside}"
    else:
        verdict.note = f"within the threshold, but the interval reaches beyond it: more pairs would tell{aside}"


def _one_pair(ratios: list, z99: float) -> tuple[float, float] | None:
    """A pair of sessions' log ratio and its standard error: from the interval of its quads, or,
    with too few quads for one (a test's own ``pedantic(rounds=15)``), from their median and
    spread, so that a short test is judged over more pairs rather than not at all."""
    interval = shift_interval(ratios)
    if interval is not None:
        return math.log(interval[0]), (math.log(interval[2]) - math.log(interval[1])) / (2 * z99)
    logs = [math.log(r) for r in ratios if 0 < r < math.inf]
    if len(logs) < 2:
        return None
    return statistics.median(logs), statistics.stdev(logs) * 1.2533 / math.sqrt(len(logs))


def _unlike(logs: list, expected_sd: float) -> set:
    """The pairs of sessions set aside: now and then one process runs its whole life 7-12% apart
    from its twin (gevent here, in either side), a spread no other pair shows. From four pairs on,
    a pair farther from the pairs' median than ``UNLIKE`` times their spread (the larger of the
    median absolute deviation's and the expected) is set aside, at most one pair in four, the
    farthest first."""
    if len(logs) < 4:
        return set()
    mid = statistics.median(logs)
    spread = max(1.4826 * statistics.median(abs(x - mid) for x in logs), expected_sd)
    far = sorted(
        (i for i, x in enumerate(logs) if abs(x - mid) > UNLIKE * spread),
        key=lambda i: -abs(logs[i] - mid),
    )
    return set(far[: len(logs) // 4])


def _within_one(verdict: PairedVerdict, ratios: list, threshold: float) -> PairedVerdict:
    """A kernel figure, on its quads: the two processes' difference is time's, not a count's. A
    change must be in both halves of the quads (a stretch of disturbance, which a paired A/A here
    once read as +9.2% of time, is in one half, a change in the code in both)."""
    interval = shift_interval(ratios)
    if interval is None:
        verdict.note = _too_few(len(ratios))
        return verdict
    verdict.change, low, high = (x - 1 for x in interval)
    verdict.ci = (low, high)
    halves = [
        statistics.median(ratios[: len(ratios) // 2]) - 1,
        statistics.median(ratios[len(ratios) // 2 :]) - 1,
    ]
    if (low > 0 and verdict.change > threshold) or (high < 0 and verdict.change < -threshold):
        both = min(halves) > threshold / 2 if verdict.change > 0 else max(halves) < -threshold / 2
        verdict.status = (REGRESSED if verdict.change > 0 else IMPROVED) if both else INCONCLUSIVE
        if not both:
            verdict.note = (
                f"not in both halves of the test (first half {pct(halves[0])}; second half "
                f"{pct(halves[1])}): a stretch of disturbance?"
            )
    elif -threshold <= low and high <= threshold:
        verdict.status = UNCHANGED
    elif abs(verdict.change) > threshold:
        verdict.note = "beyond the threshold, but the interval reaches back to no change: more rounds would tell"
    else:
        verdict.note = (
            "within the threshold, but the interval reaches beyond it: more rounds would tell"
        )
    return verdict


def _too_few(quads: int) -> str:
    return (
        f"{quads} quads of rounds are too few for a {CONFIDENCE:.0%} interval (at least {MIN_PAIRS}): give "
        "more rounds (--concurrency-rounds, --benchmark-min-rounds)"
    )


def undecided(result: PairedResult) -> list[tuple]:
    """The benchmarks whose time is not decided yet: measured in one more pair of sessions."""
    return sorted(
        {
            v.key
            for v in result.verdicts
            if v.figure == "time"
            and v.change is not None
            and v.status == INCONCLUSIVE
            and not v.loaded
        }
    )


def judge(
    base: Iterable[Record],
    head: Iterable[Record],
    threshold_for,
    again: Iterable[tuple[Iterable[Record], Iterable[Record]]] = (),
) -> PairedResult:
    """Verdicts for every head record, against the base record of the same benchmark; ``again``:
    the base's and head's records of each further pair of sessions, whose benchmarks are judged
    on the quads of every pair that measured them."""
    by_key = {r.key: r for r in base}
    further = [({r.key: r for r in b}, {r.key: r for r in h}) for b, h in again]
    verdicts = []
    for rec in head:
        then = by_key.get(rec.key)
        if then is None:
            verdicts.append(
                PairedVerdict(
                    rec.key,
                    MISSING,
                    note="the base side did not run it (failed, skipped, or not in its code)",
                )
            )
            continue
        more = [(b[rec.key], h[rec.key]) for b, h in further if rec.key in b and rec.key in h]
        verdicts.append(
            judge_pair(
                rec.key,
                then.extra.get("paired_rounds") or [],
                rec.extra.get("paired_rounds") or [],
                threshold_for(rec),
                again=[
                    (b.extra.get("paired_rounds") or [], h.extra.get("paired_rounds") or [])
                    for b, h in more
                ],
            )
        )
        verdicts += _kernel(then, rec, more)
    order = {REGRESSED: 0, IMPROVED: 1, INCONCLUSIVE: 2, MISSING: 3, UNCHANGED: 4}
    verdicts.sort(key=lambda v: (order[v.status], v.key))
    return PairedResult(verdicts)


def _kernel(base: Record, head: Record, more: Sequence = ()) -> list:
    """The kernel figures the gate judges (gate/kernel.py), paired as time is: per round, by turn."""
    from . import kernel as kernel_gate

    out = []
    for figure in kernel_gate.FIGURES:
        rounds = [_by_turn(rec, figure.name) for rec in (base, head)]
        again = [(_by_turn(b, figure.name), _by_turn(h, figure.name)) for b, h in more]
        if figure.gated and all(rounds):
            threshold = figure.threshold_for(head.extra.get("task_kind"), paired=True)
            v = judge_pair(
                head.key,
                rounds[0],
                rounds[1],
                threshold,
                figure.name,
                again=[g for g in again if all(g)],
            )
            per_op = [
                statistics.median(x[1] for x in r) / rec.kernel_round_ops
                for r, rec in zip(rounds, (base, head))
            ]
            moved = abs(per_op[1] - per_op[0])
            if v.status in (REGRESSED, IMPROVED) and (
                moved <= figure.floor or moved * head.kernel_round_ops <= figure.round_floor
            ):
                v.status, v.note = UNCHANGED, "below the figure's floor (gate/kernel.py)"
            out.append(v)
    return out


def _by_turn(rec: Record, figure: str) -> list:
    """``[turn, value]`` of a kernel figure's rounds, when each round was one runner call of one
    iteration (else the figures were read per call of ``run``, not per round: not paired)."""
    turns = rec.extra.get("paired_rounds") or []
    values = (rec.extra.get("kernel_rounds") or {}).get(figure) or []
    if not turns or len(values) != len(turns) or any(len(t) > 2 and t[2] != 1 for t in turns):
        return []
    return [[t[0], v] for t, v in zip(turns, values)]


def line(v: PairedVerdict) -> str:
    """``nap[ms=20] on threading: +8.1% (99% interval +6.0% to +9.9%, 40 pairs, threshold 3%): regressed``."""
    what = key_label(v.key) + ("" if v.figure == "time" else f", {figure_name(v.figure)}")
    if v.change is None:
        return f"{what}: {v.status} ({v.note})"
    interval = f"{CONFIDENCE:.0%} interval {pct(v.ci[0])} to {pct(v.ci[1])}, " if v.ci else ""
    pairs = f" in {v.sessions} pairs of sessions" if v.sessions > 1 else ""
    text = f"{what}: {pct(v.change)} ({interval}{v.pairs} quads ABBA{pairs}, threshold {share(v.threshold)}): {v.status}"
    return text + (f"; {v.note}" if v.note else "")


def pct(x: float) -> str:
    return "from none" if math.isinf(x) else f"{x:+.1%}"


def figure_name(name: str) -> str:
    from . import kernel as kernel_gate

    return kernel_gate.find(name).what


def summary(result: PairedResult) -> str:
    """``against the base FAILED: time 1 regressed, 1 unchanged; kernel 8 unchanged``."""
    parts = []
    for what, verdicts in (
        ("time", [v for v in result.verdicts if v.figure == "time"]),
        ("kernel", [v for v in result.verdicts if v.figure != "time"]),
    ):
        counts = collections.Counter(v.status for v in verdicts)
        if counts:
            order = (REGRESSED, IMPROVED, INCONCLUSIVE, MISSING, UNCHANGED)
            parts.append(f"{what} " + ", ".join(f"{counts[s]} {s}" for s in order if counts[s]))
    return f"against the base {'FAILED' if result.failed else 'passed'}: {'; '.join(parts) or 'nothing to judge'}"


def sides_line(base: Mapping, head: Mapping) -> str:
    """``mylib 1.4.2 from .../site/mylib (base) against 1.5.0 from ./mylib (head)``, per package,
    named by its distribution (``lifx-async``, not its package ``lifx``), as a counted run names it;
    a distribution of several packages names each."""
    dists = collections.Counter(base[name].get("distribution") or name for name in base)
    parts = []
    for name in sorted(base):
        b, h = base[name], head.get(name, {})
        dist = b.get("distribution") or name
        label = dist if dists[dist] == 1 else f"{dist} ({name})"
        parts.append(
            f"{label} {b.get('version') or '?'} from {b.get('file') or 'not imported'} (base) "
            f"against {h.get('version') or '?'} from {h.get('file') or 'not imported'} (head)"
        )
    return "; ".join(parts) or "the base side installed no importable package"
