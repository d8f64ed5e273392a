"""The stopping rule (measure/stopping.py): a case's rounds stop once its median is known, and
only where no gate tests the rounds. Pure functions and one in-process run of a small workload
with a timer that ticks evenly: well under a second."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pytest_concurrency import backends, workloads
from pytest_concurrency.measure import driver, stopping
from pytest_concurrency.measure.plan import CasePlan
from pytest_concurrency.measure.wallclock import WallClock
from pytest_concurrency.settings import Settings

# version-independent (arithmetic, settings): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once


def test_the_medians_interval_is_the_order_statistics_that_cover_95_percent():
    assert stopping.median_interval([1.0] * 5) is None  # 5 rounds: the range covers 93.8%
    assert stopping.median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)  # 96.9%
    assert stopping.median_interval([float(x) for x in range(1, 10)]) == (2.0, 8.0)  # 96.1%
    assert stopping.median_interval([float(x) for x in range(15, 0, -1)]) == (4.0, 12.0)


def test_a_median_is_known_when_its_interval_is_within_the_width_after_the_least_rounds():
    tight = [1.00, 1.01, 0.99, 1.02, 1.00, 0.995]
    assert stopping.known(tight, width=0.04)
    assert not stopping.known(tight, width=0.02)  # 1.02 - 0.99 = 3% of the median
    assert not stopping.known(tight[:5], width=0.04)  # too few rounds, however tight
    assert not stopping.known([1.0] * 6, width=0.04, min_rounds=7)
    outlier = [*tight[:5], 1.5]  # at 6 rounds the interval is the range: one burst keeps it open
    assert not stopping.known(outlier, width=0.04)
    # with 9 rounds the interval leaves the extremes out: the burst no longer holds the case
    assert stopping.known([*outlier, 1.0, 1.01, 0.5], width=0.04)


class _EvenTicks(WallClock):
    """A timer that advances by 1 at each reading: every round reads exactly 1.0."""

    def counter(self):
        ticks = itertools.count()
        return lambda: float(next(ticks))


def _rounds_run(stop_width) -> int:
    plan = CasePlan(
        model="asyncio",
        workload=workloads.get("switch"),
        params={"rounds": 10},
        rounds=15,
        warmup=1,
        instrument=_EvenTicks(),
        stop_width=stop_width,
    )
    samples, _ = driver.run_rounds(backends.load("asyncio"), plan, with_memory=False)
    assert set(samples) == {1.0}
    return len(samples)


def test_the_rounds_stop_at_the_least_count_when_the_median_is_known_else_run_all():
    assert _rounds_run(stop_width=0.04) == stopping.MIN_ROUNDS
    assert _rounds_run(stop_width=None) == 15


@pytest.mark.parametrize(
    "gated",
    [
        {"baseline": Path("base.json")},
        {"save_baseline": Path("base.json")},
        {"against": "git:HEAD^1"},
        {"paired": True},
        {"all_rounds": True},  # a suspect's second session
        {"rounds": 15},  # the rounds given
        {"measure": "instructions"},  # exact counts: a few rounds, all of them
    ],
    ids=lambda d: next(iter(d)),
)
def test_every_round_runs_where_a_gate_tests_them_or_they_were_given(gated):
    assert Settings().stop_width == stopping.DEFAULT_WIDTH
    assert Settings(median_width=0.02).stop_width == 0.02
    assert Settings(**gated).stop_width is None
