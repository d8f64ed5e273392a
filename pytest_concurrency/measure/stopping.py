"""When a workload case's rounds have told its median well enough: the stopping rule.

A comparison of the models needs each case's median, not a fixed count of rounds: a quiet case's
median is known after a few rounds, a noisy one's needs all of them. So a case that is not gated
(no baseline read or saved, no base side: ``cases.plan``) stops once the distribution-free
interval of its median (``CONFIDENCE``, from the order statistics: no assumption about the
rounds' distribution, which is skewed by the machine's bursts) is at most ``width`` of the median
wide, after at least ``MIN_ROUNDS``; else it runs every round it was planned (``CasePlan.rounds``).

A gated session keeps its fixed rounds: its tests (Mann-Whitney against a baseline, pairs
against the base side) need the count, not only a known median.
"""

from __future__ import annotations

import math
import statistics

#: The interval's coverage. With ``MIN_ROUNDS`` rounds it is the rounds' whole range (96.9%):
#: a case stops that early only when every one of its rounds lies within ``width``.
CONFIDENCE = 0.95
MIN_ROUNDS = 6
#: The interval's default width, as a fraction of the median (``--concurrency-median-width``):
#: a quarter of the time gate's 7% threshold on each side, and under the 3-8% that two
#: processes of the same code read apart here, which the rounds of one process cannot narrow.
DEFAULT_WIDTH = 0.04


def median_interval(
    values: list[float], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The order-statistics interval of the median at ``confidence``, or None: too few values
    (fewer than 6 at 95%, 8 at 99%). The gate's pairs use it too (gate/paired.py)."""
    n = len(values)
    ordered = sorted(values)
    if n > 200:  # the binomial's normal approximation; the exact sum below is slow in big integers
        z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        k = max(1, int(math.floor(n / 2 - z * math.sqrt(n) / 2)))
        return ordered[k - 1], ordered[n - k]
    # the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2: [x(k), x(n+1-k)]
    tail, k, cumulative = (1 - confidence) / 2, 0, 0.0
    while k < n:
        p = math.comb(n, k) / 2**n
        if cumulative + p > tail:
            break
        cumulative += p
        k += 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k]


def known(samples: list[float], width: float, min_rounds: int = MIN_ROUNDS) -> bool:
    """Whether the median of ``samples`` is known within ``width`` (a fraction of it): its
    interval no wider, after at least ``min_rounds`` rounds."""
    if len(samples) < max(min_rounds, 1):
        return False
    interval = median_interval(samples)
    if interval is None:
        return False
    median = statistics.median(samples)
    return median > 0 and (interval[1] - interval[0]) <= width * median
