"""Judging a change against its base measured in the same run: per-pair ratios.

With ``--concurrency-against`` each benchmark ran on both sides in turns (runner/lockstep.py):
A B B A | A B B A | ..., each round recorded with its turn. One group of four (a quad) gives
one ratio: the head's two rounds over the base's two. What the machine did during the quad
it did to both sides (a linear drift cancels exactly: both sides' mean position is the same),
and each side has one round after its own and one after the other's (warm and cold caches).
The verdict is on those ratios alone, never on a number from another session (Bulej et al.'s
duet benchmarking, asv's ``continuous``). Paired round by round instead, without the quads,
an A/A of three models here read 4 "changes" in 9 (99% intervals that excluded 0).

The change is the Hodges-Lehmann estimate on the quads' log ratios (the median of their pairwise
means), with the Wilcoxon signed-rank interval: distribution-free for a symmetric spread of log
ratios, and about 1.5 times as efficient as the sign test's interval, which it falls back to
below ``WILCOXON_FROM`` quads (the median, exact order statistics). With the sign test alone, 30
sessions of a +5% change on gevent here read 24 regressed and 6 inconclusive.
A change regressed when the interval lies above 1, the estimate beyond the threshold, and
each half of the test's quads moved by half the threshold or more (a stretch of disturbance, which a paired
A/A here once read as +9.2%, is in one half, a change in the code in both); improved likewise
below; unchanged when the whole interval lies within the threshold; otherwise inconclusive,
saying why. A benchmark measured again in a second pair of sessions (``again``) is judged on the
quads of both, its "halves" being the two pairs, and pairs whose intervals share no value are
inconclusive unless both are beyond the threshold the same way (a process unlike its twin). One
that two pairs left inconclusive is measured in a third, and the pair whose median is farthest from
the median of the three is left out: one process unlike its twin spoils one pair, not two. The two
left must then each have moved by the whole threshold, not half.
"""

from __future__ import annotations

import collections
import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..measure.records import Record, key_label
from .verdicts import IMPROVED, INCONCLUSIVE, MISSING, REGRESSED, UNCHANGED

#: Pairs cancel the machine's drift, so a smaller change than time's 7% counts; two processes of the
#: same code can still differ (gevent: 3-9% in 3 pairs of sessions of 115 here), which the second
#: pair of sessions for what moved answers (against.py; ``judge``). With it, 3% read no false
#: regression in 132 A/A verdicts (scripts/against_evidence.py --threshold 3; docs/gates/against.md);
#: one pair at 3% read one in 60.
DEFAULT_THRESHOLD = 0.03
#: Tasks the OS schedules (threads, processes): the two sides' processes run them apart by a steady
#: 1-2% even when their code is byte for byte the same (threading here: +1.7% in every pair of 50 A/A
#: sessions, no CPU pinning, address layout fixed, before the head's stand-in finder; docs/gates/against.md).
#: At 3% that read 1 false regression and 25 inconclusive of 50; the same sessions at 5% none and 4,
#: and +8% was caught 50/50.
#: Processes were not measured paired; they are scheduled as threads are.
OS_TASKS_THRESHOLD = 0.05
CONFIDENCE = 0.99
MIN_PAIRS = 8  # the fewest quads whose sign-test interval reaches 99%: 2 * 0.5**8 < 0.01
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
    base_median: float | None = None
    head_median: float | None = None
    sessions: int = 1  # pairs of sessions whose quads it was judged on
    note: str = ""


@dataclass
class PairedResult:
    verdicts: list = field(default_factory=list)
    sides: str = ""  # what each side imported: "mylib 1.4.2 (base) against 1.5.0 (head)"

    @property
    def failed(self) -> bool:
        return any(v.status == REGRESSED for v in self.verdicts)

    def by_status(self, status: str) -> list:
        return [v for v in self.verdicts if v.status == status]


def default_threshold(rec: Record) -> float:
    """A benchmark's threshold against the base side when the user set none."""
    from .kernel import PROCESS, THREAD  # the kernel gate's kinds of task the OS schedules

    return OS_TASKS_THRESHOLD if rec.extra.get("task_kind") in (THREAD, PROCESS) else DEFAULT_THRESHOLD


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The order-statistics interval of the median at ``confidence``, or None: too few values."""
    n = len(values)
    ordered = sorted(values)
    if n > 200:  # the binomial's normal approximation; the exact sum below is slow in big integers
        z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        k = max(1, int(math.floor(n / 2 - z * math.sqrt(n) / 2)))
        return ordered[k - 1], ordered[n - k]
    # the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2
    tail, k, cumulative = (1 - confidence) / 2, 0, 0.0
    while k < n:
        p = math.comb(n, k) / 2 ** n
        if cumulative + p > tail:
            break
        cumulative += p
        k += 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k]


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


def shift_interval(ratios: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(estimate, low, high) of the typical ratio, or None: too few quads."""
    if not WILCOXON_FROM <= len(ratios) <= WILCOXON_UP_TO or not all(0 < r < math.inf for r in ratios):
        interval = median_interval(ratios, confidence)
        return None if interval is None else (statistics.median(ratios), *interval)
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    k = max(0, int(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))))
    return tuple(math.exp(x) for x in (statistics.median(walsh), walsh[k], walsh[len(walsh) - 1 - k]))


def judge_pair(key: tuple, base_rounds: list, head_rounds: list, threshold: float,
               figure: str = "time", again: Iterable[tuple] = ()) -> PairedVerdict:
    """The verdict on one benchmark from both sides' ``[turn, value]`` rounds; ``again``: the
    ``(base_rounds, head_rounds)`` of further pairs of sessions that measured it (see ``judge``)."""
    numbered = [(i, g) for i, g in enumerate([quad_ratios(base_rounds, head_rounds),
                                              *(quad_ratios(b, h) for b, h in again)], 1) if g]
    measured, left_out = len(numbered), ""
    if measured > 2:  # measured again because two pairs disagreed: the pair least like the others is left out
        medians = [statistics.median(g) for _, g in numbered]
        mid = statistics.median(medians)
        out = max(range(measured), key=lambda i: abs(medians[i] - mid))
        left_out = f"pair of sessions {numbered[out][0]} left out ({medians[out] - 1:+.1%}, the least like the others)"
        numbered.pop(out)
    groups = [g for _, g in numbered]
    ratios = [r for g in groups for r in g]
    verdict = PairedVerdict(key, INCONCLUSIVE, figure=figure, pairs=len(ratios), threshold=threshold,
                            base_median=statistics.median(r[1] for r in base_rounds) if base_rounds else None,
                            head_median=statistics.median(r[1] for r in head_rounds) if head_rounds else None,
                            sessions=measured)
    # with a pair left out, each pair left must have moved by the whole threshold (not half): the
    # pair set aside may have been the one that was right (an A/A under load here read +4.2%
    # regressed, from two pairs of three at +1.5% or more)
    verdict = _judged(verdict, numbered, ratios, threshold, each=threshold if left_out else threshold / 2)
    if left_out:
        verdict.note = f"{verdict.note}; {left_out}" if verdict.note else left_out
    return verdict


def _judged(verdict: PairedVerdict, numbered: list, ratios: list, threshold: float, each: float) -> PairedVerdict:
    groups = [g for _, g in numbered]
    if not ratios:
        verdict.note = ("no rounds ran in turns with the base side's (measured outside pytest-benchmark's "
                        "rounds, or the other side did not reach this test)")
        return verdict
    verdict.change = statistics.median(ratios) - 1
    if verdict.change == 0 and min(ratios) == max(ratios):  # a count that repeats exactly, both sides
        verdict.status, verdict.ci = UNCHANGED, (0.0, 0.0)
        return verdict
    interval = shift_interval(ratios)
    if interval is None:
        verdict.note = (f"{len(ratios)} quads of rounds are too few for a {CONFIDENCE:.0%} interval (at least "
                        f"{MIN_PAIRS}): give more rounds (--concurrency-rounds, --benchmark-min-rounds)")
        return verdict
    verdict.change, low, high = (x - 1 for x in interval)
    verdict.ci = (low, high)
    if len(groups) > 1 and _disagree(groups, threshold, verdict):
        return verdict
    # A change in the code is in every part of the measurement: in both halves of one pair of
    # sessions, and in each pair of sessions when there are more (two processes of the same code
    # can differ by a few percent for their whole life: that is in one pair only).
    if len(groups) > 1:
        parts = [(f"pair of sessions {i}", statistics.median(g) - 1) for i, g in numbered]
    else:
        parts = [("first half", statistics.median(ratios[:len(ratios) // 2]) - 1),
                 ("second half", statistics.median(ratios[len(ratios) // 2:]) - 1)]
    steady = "; ".join(f"{name} {h:+.1%}" for name, h in parts)
    moved = [h for _, h in parts]
    both = min(moved) > each if verdict.change > 0 else max(moved) < -each
    if (low > 0 and verdict.change > threshold) or (high < 0 and verdict.change < -threshold):
        verdict.status = (REGRESSED if verdict.change > 0 else IMPROVED) if both else INCONCLUSIVE
        if not both:
            verdict.note = (f"not {'beyond the threshold ' if each >= threshold else ''}in every pair of sessions "
                            f"({steady}): one process unlike the other?"
                            if len(groups) > 1 else f"not in both halves of the test ({steady}): a stretch of "
                            f"disturbance?")
    elif -threshold <= low and high <= threshold:
        verdict.status = UNCHANGED
    elif abs(verdict.change) > threshold:
        verdict.note = "beyond the threshold, but the interval reaches back to no change: more rounds would tell"
    else:
        verdict.note = "within the threshold, but the interval reaches beyond it: more rounds would tell"
    return verdict


def _disagree(groups: list, threshold: float, verdict: PairedVerdict) -> bool:
    """Whether the pairs of sessions contradict each other (their intervals share no value): then
    the pooled interval would hide it, and the verdict (set here) is only as sure as each one is."""
    intervals = [shift_interval(g) for g in groups]
    if any(i is None for i in intervals) or max(i[1] for i in intervals) <= min(i[2] for i in intervals):
        return False
    each = ", ".join(f"{i[0] - 1:+.1%}" for i in intervals)
    if all(i[1] - 1 > 0 and i[0] - 1 > threshold for i in intervals):
        verdict.status, verdict.note = REGRESSED, f"by a different amount in each pair of sessions ({each})"
    elif all(i[2] - 1 < 0 and i[0] - 1 < -threshold for i in intervals):
        verdict.status, verdict.note = IMPROVED, f"by a different amount in each pair of sessions ({each})"
    else:
        verdict.status = INCONCLUSIVE
        verdict.note = f"the pairs of sessions disagree ({each}): one process unlike the other?"
    return True


def suspects(result: PairedResult) -> list[tuple]:
    """The benchmarks whose time moved or may have: measured again in a second pair of sessions."""
    return sorted({v.key for v in result.verdicts if v.figure == "time" and v.change is not None
                   and v.status in (REGRESSED, IMPROVED, INCONCLUSIVE)})


def unsettled(result: PairedResult) -> list[tuple]:
    """The benchmarks two pairs of sessions left inconclusive: measured in a third, the pair least
    like the others is then left out (``judge_pair``)."""
    return sorted({v.key for v in result.verdicts if v.figure == "time" and v.change is not None
                   and v.status == INCONCLUSIVE and v.sessions == 2})


def judge(base: Iterable[Record], head: Iterable[Record], threshold_for,
          again: Iterable[tuple[Iterable[Record], Iterable[Record]]] = ()) -> PairedResult:
    """Verdicts for every head record, against the base record of the same benchmark; ``again``:
    the base's and head's records of each further pair of sessions, whose benchmarks are judged
    on the quads of every pair that measured them."""
    by_key = {r.key: r for r in base}
    further = [({r.key: r for r in b}, {r.key: r for r in h}) for b, h in again]
    verdicts = []
    for rec in head:
        then = by_key.get(rec.key)
        if then is None:
            verdicts.append(PairedVerdict(rec.key, MISSING, note="the base side did not run it (failed, skipped, "
                                                                 "or not in its code)"))
            continue
        more = [(b[rec.key], h[rec.key]) for b, h in further if rec.key in b and rec.key in h]
        verdicts.append(judge_pair(rec.key, then.extra.get("paired_rounds") or [],
                                   rec.extra.get("paired_rounds") or [], threshold_for(rec),
                                   again=[(b.extra.get("paired_rounds") or [], h.extra.get("paired_rounds") or [])
                                          for b, h in more]))
        verdicts += _kernel(then, rec, more)
    order = {REGRESSED: 0, IMPROVED: 1, INCONCLUSIVE: 2, MISSING: 3, UNCHANGED: 4}
    verdicts.sort(key=lambda v: (order[v.status], v.key))
    return PairedResult(verdicts)


def _kernel(base: Record, head: Record, more: list = ()) -> list:
    """The kernel figures the gate judges (gate/kernel.py), paired as time is: per round, by turn."""
    from . import kernel as kernel_gate

    out = []
    for figure in kernel_gate.FIGURES:
        rounds = [_by_turn(rec, figure.name) for rec in (base, head)]
        again = [(_by_turn(b, figure.name), _by_turn(h, figure.name)) for b, h in more]
        if figure.gated and all(rounds):
            v = judge_pair(head.key, rounds[0], rounds[1], figure.threshold_for(head), figure.name,
                           again=[g for g in again if all(g)])
            per_op = [statistics.median(x[1] for x in r) / (rec.ops or 1) for r, rec in zip(rounds, (base, head))]
            moved = abs(per_op[1] - per_op[0])
            if v.status in (REGRESSED, IMPROVED) and (moved <= figure.floor or moved * (head.ops or 1) <= figure.round_floor):
                v.status, v.note = UNCHANGED, "below the figure's floor (gate/kernel.py)"
            v.base_median, v.head_median = per_op
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
    text = f"{what}: {pct(v.change)} ({interval}{v.pairs} quads ABBA{pairs}, threshold {v.threshold:.0%}): {v.status}"
    return text + (f"; {v.note}" if v.note else "")


def pct(x: float) -> str:
    return "from none" if math.isinf(x) else f"{x:+.1%}"


def figure_name(name: str) -> str:
    from . import kernel as kernel_gate

    return kernel_gate.find(name).what


def summary(result: PairedResult) -> str:
    """``against the base FAILED: time 1 regressed, 1 unchanged; kernel 8 unchanged``."""
    parts = []
    for what, verdicts in (("time", [v for v in result.verdicts if v.figure == "time"]),
                           ("kernel", [v for v in result.verdicts if v.figure != "time"])):
        counts = collections.Counter(v.status for v in verdicts)
        if counts:
            order = (REGRESSED, IMPROVED, INCONCLUSIVE, MISSING, UNCHANGED)
            parts.append(f"{what} " + ", ".join(f"{counts[s]} {s}" for s in order if counts[s]))
    return f"against the base {'FAILED' if result.failed else 'passed'}: {'; '.join(parts) or 'nothing to judge'}"


def sides_line(base: Mapping, head: Mapping) -> str:
    """``mylib 1.4.2 from .../site/mylib (base) against 1.5.0 from ./mylib (head)``, per package."""
    parts = []
    for name in sorted(base):
        b, h = base[name], head.get(name, {})
        parts.append(f"{name} {b.get('version') or '?'} from {b.get('file') or 'not imported'} (base) against "
                     f"{h.get('version') or '?'} from {h.get('file') or 'not imported'} (head)")
    return "; ".join(parts) or "the base side installed no importable package"
