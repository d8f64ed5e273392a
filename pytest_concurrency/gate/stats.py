"""The statistics behind the gate: is this run slower than the baseline, and how sure are we?

A verdict needs three things to agree (see ``decide``):

* the practical size: the ratio of medians is beyond the threshold. This is what keeps a
  noisy machine from crying wolf: run-to-run drift (CPU frequency, a neighbour's load)
  moves every sample of a run together, which no within-run test can see;
* significance: Mann-Whitney U on the raw samples (two-sided, so the same ``alpha`` guards
  both "regressed" and "improved"); rank-based, so one descheduled round cannot swing it;
* consistency: the bootstrap confidence interval of the ratio of medians clears half the
  threshold (lower bound above ``1 + threshold/2`` for a regression). U answers "do the
  samples differ?", not "did the median move by about this much?": when some rounds hit a
  slow path, U is significant and the median may sit on the slow mode by a hair, while
  resampling shows it could as well sit on the old one. Merely excluding 1 would add
  nothing to U (the interval's end then sits just above 1); half the threshold asks for
  a shift of practical size that resampling cannot undo.

With few rounds significance is impossible whatever the data (the exact U test with 3 rounds
per side cannot go below p = 0.1): such cases are ``inconclusive`` with the number of
rounds needed, never a silent pass or a coin-flip failure.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .verdicts import IMPROVED, INCONCLUSIVE, REGRESSED, UNCHANGED, share

DEFAULT_ALPHA = 0.01
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20100419  # fixed: the same samples always give the same interval and verdict
#: Fewest baseline sessions from which a benchmark's between-session drift is estimated:
#: with two, the prediction interval's t factor (12.7 at 95%) makes any estimate useless.
MIN_SESSIONS_FOR_DRIFT = 3
#: From this many sessions on, the one farthest from the others is left out of the drift:
#: one disturbed baseline session (a neighbour on the host for a minute) must not widen a
#: threshold for the next five sessions; here one such session once widened one past 250%.
TRIM_FROM_SESSIONS = 4
#: Coverage of the drift's prediction interval. Looser than the U test's alpha on purpose: a
#: regression must also reproduce in a second session, so noise has to land beyond it twice.
DRIFT_COVERAGE = 0.95
#: A benchmark's own sessions (2-4 degrees of freedom) are a poor estimate of its drift alone:
#: of yarl's 87 timed benchmarks here, three sessions each, some read 1% and others 15% from
#: the same noise (median 3.8%), so a lucky-tight benchmark failed A/As at +12%. Each is shrunk
#: toward its suite's typical drift, which counts as this many degrees of freedom (moderated
#: variance, as in Smyth's limma, 2004); never below what its own sessions allow (``allowance``).
TYPICAL_WEIGHT = 4
#: Fewest benchmarks, judged alike, whose drifts make a typical one.
TYPICAL_FROM = 5


@dataclass(frozen=True)
class Rigor:
    """How sure ``decide`` must be: the U test's level, and its interval's confidence,
    resamples and seed."""

    alpha: float = DEFAULT_ALPHA
    confidence: float = DEFAULT_CONFIDENCE
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED


DEFAULT_RIGOR = Rigor()


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if not n:
        raise ValueError("median of no samples")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def mann_whitney_p(baseline: Sequence[float], current: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (exact for small samples without ties)."""
    from scipy.stats import mannwhitneyu  # lazy: scipy costs ~0.3 s to import

    if len(baseline) < 1 or len(current) < 1:
        return 1.0
    if len(set(baseline) | set(current)) == 1:
        return 1.0  # all equal: scipy would warn and return nan
    return float(mannwhitneyu(current, baseline, alternative="two-sided").pvalue)


def smallest_p(n_baseline: int, n_current: int) -> float:
    """The lowest two-sided p the exact U test can give with these sample sizes."""
    if n_baseline < 1 or n_current < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_baseline + n_current, n_current))


def rounds_needed(alpha: float) -> int:
    """Fewest rounds per side for which significance at ``alpha`` is at all possible: the floor
    for complete separation; noisy samples need more."""
    for n in range(1, 1000):
        if smallest_p(n, n) < alpha:
            return n
    return 1000


def bootstrap_ratio_ci(
    baseline: Sequence[float],
    current: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(current) / median(baseline), in memory and time
    linear in the samples (``resampled_medians``): a baseline of 200,000 rounds once took 6 GB."""
    import numpy as np

    rng = np.random.default_rng(seed)
    now = resampled_medians(current, resamples, rng)
    then = resampled_medians(baseline, resamples, rng)
    tail = (1 - confidence) / 2 * 100
    # A round of 0 s (a clock too coarse for it) can be a resample's median: over it, the ratio
    # is unbounded (inf; 1 when both are 0), and the interval's bound beside it too, not numpy's
    # divide-by-zero warning (nor a NaN from interpolating between two infinite ratios).
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(then > 0, now / then, np.where(now > 0, np.inf, 1.0))
        bounds = np.percentile(ratios, [tail, 100 - tail])
    lo, hi = np.where(np.isnan(bounds), np.inf, bounds)
    return float(lo), float(hi)


def resampled_medians(samples: Sequence[float], resamples: int, rng):
    """The medians of ``resamples`` bootstrap resamples of ``samples``, drawn from their exact
    distribution rather than by drawing n indices per resample (O(resamples x n) memory).

    A resample of n draws from the samples is x[ceil(n U_i) - 1] for n uniforms U_i (x sorted), and
    its order statistics are x at the uniforms' order statistics. The m-th of n uniforms is
    Beta(m, n - m + 1), and the next one, given it is u, is u + (1 - u) Beta(1, n - m). So a
    resample's median (the m-th of an odd n; the mean of the m-th and the next of an even n) is
    drawn exactly from two Beta variates: the same bootstrap distribution, at O(n log n + resamples).
    """
    import numpy as np

    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    m = (n + 1) // 2
    low = rng.beta(m, n - m + 1, resamples)
    at_low = x[np.clip(np.ceil(n * low).astype(np.int64) - 1, 0, n - 1)]
    if n % 2 or n < 2:
        return at_low
    high = low + (1 - low) * rng.beta(1, n - m, resamples)
    return (at_low + x[np.clip(np.ceil(n * high).astype(np.int64) - 1, 0, n - 1)]) / 2


def session_drift(
    medians: Sequence[float], fewest: int = MIN_SESSIONS_FOR_DRIFT
) -> tuple[float, int] | None:
    """How much a benchmark's median moves from session to session, and how many sessions
    that rests on: the standard deviation of the log medians (0.03 ~ 3%), after leaving out
    the farthest one from ``TRIM_FROM_SESSIONS`` on; ``None`` below ``fewest`` (1 where a
    suite's typical drift is there to be ``moderated`` by it: one session has no spread of its
    own, 0 on no degrees of freedom, and the suite's alone speaks for it)."""
    if len(medians) < max(1, fewest) or min(medians) <= 0:
        return None
    if len(medians) == 1:
        return 0.0, 1
    logs = [math.log(m) for m in medians]
    if len(logs) >= TRIM_FROM_SESSIONS:
        center = median(logs)
        logs.remove(max(logs, key=lambda x: abs(x - center)))
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)), len(logs)


def typical_drift(drifts: Sequence[tuple[float, int]]) -> float | None:
    """The drift of a typical benchmark among ``drifts`` (``session_drift``'s), or ``None`` below
    ``TYPICAL_FROM``: the median of their variances, over the median that a variance of so few
    degrees of freedom reads of the true one (Wilson-Hilferty; 0.69 for two)."""
    if len(drifts) < TYPICAL_FROM:
        return None
    dof = median([used - 1 for _, used in drifts])
    reads = (1 - 2 / (9 * dof)) ** 3
    return math.sqrt(median([d * d for d, _ in drifts]) / reads)


def moderated(drift: tuple[float, int], typical: float | None) -> tuple[float, int]:
    """A benchmark's drift (``session_drift``'s) shrunk toward ``typical``, and the degrees of
    freedom the two rest on together."""
    own, dof = drift[0], drift[1] - 1
    if typical is None:
        return own, dof
    weight = TYPICAL_WEIGHT
    return math.sqrt((weight * typical**2 + dof * own**2) / (weight + dof)), weight + dof


def allowance(drift: tuple[float, int], typical: float | None) -> tuple[float, bool]:
    """The change one more session of unchanged code stays within (``drift_allowance``), from a
    benchmark's drift (``session_drift``'s) and its suite's ``typical`` one, and whether the
    suite's was the wider. The wider of the two: shrinking the drift of a benchmark whose sessions
    agreed by luck keeps it from failing a build on its suite's noise, but shrinking a noisy one
    toward quieter neighbours failed unchanged asyncio in 2 more A/As of 50 (judged raw)."""
    own = drift_allowance(*drift) if drift[1] >= MIN_SESSIONS_FOR_DRIFT else 0.0
    if typical is None:
        return own, False
    shrunk, dof = moderated(drift, typical)
    suite = drift_allowance(shrunk, drift[1], dof)
    return max(own, suite), suite > own


def drift_allowance(
    drift: float, sessions: int, dof: int | None = None, coverage: float = DRIFT_COVERAGE
) -> float:
    """The change one more session of unchanged code stays within, at ``coverage``.

    The two-sided prediction interval for a new session's log median, from ``sessions``
    earlier ones (Student's t with ``dof`` degrees of freedom, sessions-1 unless the drift is
    ``moderated``: with few the drift itself is uncertain, and the interval says so by being
    wide).
    """
    factor = t_within(coverage, sessions - 1 if dof is None else dof)
    return math.exp(factor * drift * math.sqrt(1 + 1 / sessions)) - 1


def t_within(coverage: float, dof: int) -> float:
    """The t that Student's distribution with ``dof`` (whole) degrees of freedom lies within,
    either way, with probability ``coverage`` (scipy's ``t.ppf(1 - (1 - coverage) / 2, dof)``).

    Not scipy's: a counted session judges under valgrind, where importing scipy.stats costs
    12 s of CPU (0.3 s at full speed), so every counted judgement against a baseline of three
    sessions or more paid it. For whole degrees of freedom P(|T| <= t) is a finite sum of powers
    of cos(atan(t / sqrt(dof))) (Abramowitz and Stegun 26.7.3-4), solved here by bisection.
    """
    if not (0 < coverage < 1 and dof >= 1 and float(dof).is_integer()):
        raise ValueError(
            f"t_within({coverage!r}, {dof!r}): coverage in (0, 1), dof a whole number >= 1"
        )
    low, high = 0.0, 1.0
    while _within(high, int(dof)) < coverage:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if _within(mid, int(dof)) < coverage else (low, mid)
        if high - low <= 1e-12 * high:
            break
    return (low + high) / 2


def _within(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's T with ``dof`` whole degrees of freedom."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    if dof % 2 == 0:  # sin(theta) * (1 + 1/2 c2 + 1*3/(2*4) c2^2 + ... up to c2^((dof-2)/2))
        term = total = 1.0
        for k in range(1, dof // 2):
            term *= (2 * k - 1) / (2 * k) * c2
            total += term
        return math.sin(theta) * total
    # odd: 2/pi * (theta + sin(theta) cos(theta) (1 + 2/3 c2 + 2*4/(3*5) c2^2 + ...))
    series = 0.0
    if dof > 1:
        term = series = 1.0
        for k in range(1, (dof - 1) // 2):
            term *= (2 * k) / (2 * k + 1) * c2
            series += term
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * series)


@dataclass
class Comparison:
    status: str  # one of verdicts' REGRESSED, IMPROVED, UNCHANGED, INCONCLUSIVE
    ratio: float  # median(current) / median(baseline)
    p_value: float | None  # None for exact samples (decide_layouts)
    ci: tuple[
        float, float
    ]  # bootstrap interval of ``ratio`` (exact: its range over pairs of rounds)
    note: str = ""

    @property
    def change(self) -> float:
        return self.ratio - 1


#: Exact samples (instruction counts) whose rounds spread by more than this fraction of the
#: threshold are not judged: the count wanders (time-based scheduling, GC timing...), and a
#: change near the threshold could be that wandering. Light models spread <0.1%, threads 0.13%.
AGREEMENT = 0.5
#: Paired layouts: a layout whose change lies within this fraction of the threshold counted the
#: same code alike (two sides of identical code, in the same allocator state: within 0.01%).
SAME_COUNT = 0.1


def spread(samples: Sequence[float]) -> float:
    """(max - min) / median: how far rounds that should repeat themselves disagree."""
    m = median(samples)
    return (max(samples) - min(samples)) / m if m > 0 else math.inf


#: With this many rounds or more on a side, one round may be set aside as an outlier...
OUTLIER_MIN_ROUNDS = 4
#: ...when it lies this many times farther from the median than any other round. A user's
#: test counts its first round cold (imports, caches): 2,076,295 instructions against
#: 2,013,937 in each of the four others, a 3.1% spread that hid a real +2%.
OUTLIER_FACTOR = 3.0
#: ...and lies more than this fraction of the median from it. Rounds that agree to the
#: instruction leave any other round "three times farther" however close: a round 3 instructions
#: off 2 million was set aside, noted "+0.00% from the others". Light models' rounds spread
#: <0.1% (``AGREEMENT``): a round within 0.1% of the median is the count's ordinary wandering, and
#: leaves the rounds within a fifth of what the agreement check tolerates at a 1% threshold.
OUTLIER_MIN_FRACTION = 0.001


def set_aside(samples: Sequence[float]) -> tuple[list[float], int | None]:
    """The rounds to judge, and the index of the one outlier set aside (or None).

    The rule: with ``OUTLIER_MIN_ROUNDS`` rounds or more, the round farthest from the median
    is set aside when its distance is more than ``OUTLIER_FACTOR`` times every other round's
    and more than ``OUTLIER_MIN_FRACTION`` of the median (and not zero). One round at most: two
    rounds that disagree with the rest are the count wandering, which the agreement check below
    must see.
    """
    samples = list(samples)
    if len(samples) < OUTLIER_MIN_ROUNDS:
        return samples, None
    m = median(samples)
    distance = [abs(x - m) for x in samples]
    far = max(range(len(samples)), key=distance.__getitem__)
    others = max(d for i, d in enumerate(distance) if i != far)
    least = max(OUTLIER_FACTOR * others, OUTLIER_MIN_FRACTION * abs(m))
    if distance[far] > least and distance[far] > 0:
        return samples[:far] + samples[far + 1 :], far
    return samples, None


def center(layouts: Sequence[Sequence[float]]) -> float:
    """The median of the layouts' median rounds (one layout: its median)."""
    return median([median(rounds) for rounds in layouts])


def decide_layouts(
    baseline: Sequence[Sequence[float]],
    current: Sequence[Sequence[float]],
    threshold: float,
    paired: bool = False,
) -> Comparison:
    """Judge counts on the size of the change alone; no test pretends they are noisy. Each side
    is its rounds in each layout it was counted in (measure/layouts.py), and the change is that of
    the median of the layouts' medians: where one layout's objects landed badly, it moves nothing.

    ``paired``: layout N of one side is layout N of the other (one session a side, counted in the
    same layouts: against the base, or a one-session baseline). The change is then the median of
    the layouts' own changes (``_paired``) over the layouts both sides counted, and a layout that
    moved beyond the threshold while the median did not makes the verdict inconclusive, never
    "unchanged".

    One outlying round per layout may be set aside (``set_aside``; the note says which). When
    the remaining rounds of a layout disagree by more than ``AGREEMENT`` of the threshold, the
    count wanders: the change is judged only if every pairing of rounds lies beyond the
    threshold, else it is inconclusive, with the spread. Layouts that disagree with each other
    are named in the note, never a reason to withhold a verdict (that is what the median is for).

    ``ci`` is the range of the change over every pairing of rounds, ``p_value`` is ``None``.
    """
    if not (baseline and current and all(baseline) and all(current)):
        raise ValueError("decide_layouts() needs rounds on both sides, in every layout")
    notes: list[str] = []
    kept: dict[str, list[list[float]]] = {}
    for side, groups in (("baseline", baseline), ("current", current)):
        kept[side] = []
        for n, samples in enumerate(groups):
            rounds, index = set_aside(samples)
            kept[side].append(rounds)
            if index is not None:
                where = f" in layout {n}" if len(groups) > 1 else ""
                notes.append(
                    f"{side} round {index + 1} of {len(samples)}{where} ({samples[index]:,.0f}, "
                    f"{samples[index] / median(rounds) - 1:+.2%} from the others) set aside as an outlier"
                )
    both = min(len(kept["baseline"]), len(kept["current"]))
    if paired and both > 1:
        # a third layout is counted only where a side's first two disagree: judged on the
        # layouts both sides counted, still pair by pair (unpaired, a count that follows the
        # start-up moves one side's median as a change would)
        c = _paired(kept["baseline"][:both], kept["current"][:both], threshold)
    else:
        c = _decide(kept["baseline"], kept["current"], threshold)
    for side, groups in kept.items():
        apart = spread([median(rounds) for rounds in groups])
        if len(groups) > 1 and apart > threshold * AGREEMENT:
            notes.append(
                f"the {side}'s {len(groups)} layouts disagree by {apart:.2%} (medians "
                f"{', '.join(f'{median(r):,.0f}' for r in groups)}): judged on their median"
            )
    c.note = "; ".join(filter(None, [*notes, c.note]))
    return c


def _paired(
    baseline: list[list[float]], current: list[list[float]], threshold: float
) -> Comparison:
    """Judged on the layouts' own changes. A count can step with the layout (a gevent test
    counted about 1.3 M instructions more in some layouts than in others: 1.9%); the same code in
    the same layout counts alike, so pairing cancels the step where the code did not change, and
    where it did, a step in one side's layouts reads as one layout that disagrees with the others
    rather than as a move of one side's median."""
    changes = [median(h) / median(b) for b, h in zip(baseline, current)]
    c = _decide(baseline, current, threshold, ratio=median(changes))
    per_layout = "layout by layout " + ", ".join(f"{r - 1:+.2%}" for r in changes)
    beyond = sum(abs(r - 1) > threshold for r in changes)
    up, down = sum(r > 1 + threshold for r in changes), sum(r < 1 - threshold for r in changes)
    same = sum(abs(r - 1) <= threshold * SAME_COUNT for r in changes)
    if c.status == UNCHANGED and beyond:
        c.status = INCONCLUSIVE
        per_layout += (
            f": {beyond} of {len(changes)} layouts moved beyond {share(threshold)} and the others did "
            "not; where objects land moves this count as much as the change, so it is judged "
            "neither unchanged nor a regression"
        )
    elif c.status in (REGRESSED, IMPROVED) and up and down:
        # the same code in the same layout can still land in either of two pymalloc states (its
        # pools emptied and refilled at every free, or not: _PyObject_Free carried the step) when
        # something as small as a directory's random name differs: a layout that moved the other
        # way beyond the threshold says the step is as large as the change
        c.status = INCONCLUSIVE
        per_layout += (
            f": {up} of {len(changes)} layouts moved up beyond {share(threshold)} and {down} down; "
            "where objects land moves this count as much as the change, so it is judged neither "
            "a regression nor an improvement"
        )
    elif c.status in (REGRESSED, IMPROVED) and same:
        # counts are exact: a layout that counted the same on both sides ran code that costs the
        # same, and a change would have moved it too; the others moved with where objects land
        c.status = INCONCLUSIVE
        per_layout += (
            f": {same} of {len(changes)} layouts counted the same on both sides (within "
            f"{threshold * SAME_COUNT:.2%}) while the median moved; where objects land moves this "
            "count as much as the change, so it is judged neither a regression nor an improvement"
        )
    c.note = "; ".join(filter(None, [per_layout, c.note]))
    return c


def _decide(
    baseline: list[list[float]],
    current: list[list[float]],
    threshold: float,
    ratio: float | None = None,
) -> Comparison:
    """``ratio``: the change to judge (the sides' centres' by default)."""
    ratio = center(current) / center(baseline) if ratio is None else ratio
    every_b, every_c = [x for g in baseline for x in g], [x for g in current for x in g]
    ci = (min(every_c) / max(every_b), max(every_c) / min(every_b))
    slower, faster = ratio > 1 + threshold, ratio < 1 - threshold
    if not (slower or faster):
        return Comparison(UNCHANGED, ratio, None, ci)
    within = {
        side: max(map(spread, groups))
        for side, groups in (("baseline", baseline), ("now", current))
    }
    wander = max(within.values())
    beyond = ci[0] > 1 + threshold if slower else ci[1] < 1 - threshold
    if wander > threshold * AGREEMENT and not beyond:
        why = (
            f"the rounds disagree by up to {wander:.2%} (baseline {within['baseline']:.2%}, now "
            f"{within['now']:.2%}): this count wanders too much to judge a {share(threshold)} "
            f"change; give it a threshold above {wander / AGREEMENT:.1%}"
        )
        return Comparison(INCONCLUSIVE, ratio, None, ci, why)
    return Comparison(REGRESSED if slower else IMPROVED, ratio, None, ci)


def decide(
    baseline: Sequence[float],
    current: Sequence[float],
    threshold: float,
    rigor: Rigor = DEFAULT_RIGOR,
) -> Comparison:
    """Judge ``current`` against ``baseline`` (seconds per round; lower is better)."""
    if not baseline or not current:
        raise ValueError("decide() needs samples on both sides")
    alpha, confidence = rigor.alpha, rigor.confidence
    ratio = median(current) / median(baseline)
    p = mann_whitney_p(baseline, current)
    ci = bootstrap_ratio_ci(baseline, current, confidence, rigor.resamples, rigor.seed)
    slower, faster = ratio > 1 + threshold, ratio < 1 - threshold
    if not (slower or faster):
        return Comparison(UNCHANGED, ratio, p, ci)
    floor = smallest_p(len(baseline), len(current))
    margin = threshold / 2
    if floor >= alpha:
        why = (
            f"too few rounds to decide ({len(baseline)} baseline, {len(current)} current: "
            f"p cannot go below {floor:.3g} > alpha {alpha:g}); "
            f"run at least {rounds_needed(alpha)} rounds on each side, more on a noisy machine"
        )
    elif p >= alpha:
        why = (
            f"beyond the threshold but not significant (p={p:.3g} >= alpha {alpha:g}); "
            f"more rounds (now {len(baseline)} baseline, {len(current)} current) would settle it"
        )
    elif (slower and ci[0] <= 1 + margin) or (faster and ci[1] >= 1 - margin):
        why = (
            f"the samples differ (p={p:.3g}) but the {confidence:.0%} interval of the change "
            f"[{ci[0] - 1:+.1%}, {ci[1] - 1:+.1%}] reaches within half the threshold of no change: "
            f"the median is unstable (a bimodal run?); more rounds would settle it"
        )
    else:
        return Comparison(REGRESSED if slower else IMPROVED, ratio, p, ci)
    return Comparison(INCONCLUSIVE, ratio, p, ci, why)
