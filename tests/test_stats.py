"""The gate's statistics on synthetic samples (seeded, so every run sees the same numbers)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from pytest_concurrency.gate import stats
from pytest_concurrency.gate.verdicts import IMPROVED, INCONCLUSIVE, REGRESSED, UNCHANGED

# version-independent (the gate's statistics on seeded samples): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once


def noisy(seed: int, n: int, scale: float = 1e-3, sigma: float = 0.03) -> list[float]:
    rng = random.Random(seed)
    return [scale * rng.lognormvariate(0, sigma) for _ in range(n)]


def test_same_code_is_unchanged():
    c = stats.decide(noisy(1, 20), noisy(2, 20), threshold=0.05)
    assert c.status == UNCHANGED
    assert abs(c.change) < 0.05


def test_slowdown_with_enough_rounds_regresses():
    c = stats.decide(noisy(1, 20), noisy(2, 20, scale=1.15e-3), threshold=0.05)
    assert c.status == REGRESSED
    assert 0.10 < c.change < 0.20
    assert c.p_value < stats.DEFAULT_ALPHA
    assert c.ci[0] > 1 + 0.05 / 2


def test_same_slowdown_with_three_rounds_is_inconclusive_and_says_how_many():
    c = stats.decide(noisy(1, 3), noisy(2, 3, scale=1.15e-3), threshold=0.05)
    assert c.status == INCONCLUSIVE
    assert c.change > 0.05
    assert f"at least {stats.rounds_needed(stats.DEFAULT_ALPHA)} rounds" in c.note


def test_speedup_is_improved():
    c = stats.decide(noisy(1, 20), noisy(2, 20, scale=0.85e-3), threshold=0.05)
    assert c.status == IMPROVED
    assert c.change < -0.05


def test_change_inside_threshold_is_unchanged_even_if_significant():
    c = stats.decide(
        noisy(1, 50, sigma=0.002), noisy(2, 50, scale=1.03e-3, sigma=0.002), threshold=0.05
    )
    assert c.p_value < 1e-6  # clearly different...
    assert c.status == UNCHANGED  # ...but below the practical threshold


def test_shape_change_without_a_reliable_median_shift_is_inconclusive():
    # 11 of 20 current rounds hit a slow path: U is significant, but the median flips
    # between the two modes under resampling, so its interval includes no change
    base = noisy(1, 20, sigma=0.005)
    cur = noisy(2, 9, sigma=0.005) + [1.3e-3] * 11
    c = stats.decide(base, cur, threshold=0.05)
    assert c.p_value < stats.DEFAULT_ALPHA
    assert c.ci[0] < 1.025  # the low end of the interval is the old median
    assert c.status == INCONCLUSIVE
    assert "unstable" in c.note


def test_equal_samples_give_p_one():
    assert stats.mann_whitney_p([1.0] * 5, [1.0] * 5) == 1.0
    assert stats.decide([1.0] * 5, [1.0] * 5, threshold=0.05).status == UNCHANGED


def test_smallest_p_is_what_the_exact_test_gives_for_complete_separation():
    for n in (3, 4, 5):
        base = [float(i) for i in range(n)]
        cur = [float(i + 100) for i in range(n)]
        assert stats.mann_whitney_p(base, cur) == pytest.approx(stats.smallest_p(n, n))


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.001])
def test_rounds_needed_is_the_first_size_that_can_reach_alpha(alpha):
    n = stats.rounds_needed(alpha)
    assert stats.smallest_p(n, n) < alpha <= stats.smallest_p(n - 1, n - 1)


def test_bootstrap_is_reproducible_and_brackets_the_ratio():
    base, cur = noisy(1, 15), noisy(2, 15, scale=1.1e-3)
    ci = stats.bootstrap_ratio_ci(base, cur)
    assert ci == stats.bootstrap_ratio_ci(base, cur)
    assert ci[0] < stats.median(cur) / stats.median(base) < ci[1]
    assert ci != stats.bootstrap_ratio_ci(base, cur, seed=7)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_round_of_zero_seconds_bounds_the_interval_without_numpys_warning():
    """A baseline round of 0 s (a clock too coarse for it; tests/test_fuzz_baselines.py) is the
    median of some resamples: their ratios are unbounded, not a divide-by-zero RuntimeWarning."""
    base = [0.0, 0.0108, 0.0025, 0.0146, 0.0145, 0.0023]
    cur = [0.0146, 0.0108, 0.0025, 0.0146, 0.0145]
    lo, hi = stats.bootstrap_ratio_ci(base, cur)
    assert lo < stats.median(cur) / stats.median(base) < hi
    assert stats.bootstrap_ratio_ci([0.0] * 3 + [1.0], [0.0] * 3 + [1.0]) == (0.0, float("inf"))
    assert stats.decide(base, cur, threshold=0.05).status in (UNCHANGED, INCONCLUSIVE)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 51, 200])
def test_resampled_medians_follow_the_bootstrap_drawn_the_long_way(n):
    """~0.5 s: two Beta variates a resample give the distribution of n draws a resample."""
    import numpy as np

    rng = np.random.default_rng(n)
    x = rng.lognormal(0, 0.3, n)
    long_way = np.median(x[rng.integers(0, n, (40_000, n))], axis=1)
    drawn = stats.resampled_medians(x, 40_000, rng)
    assert set(np.unique(drawn)) <= set(np.unique(long_way)) | set(
        (a + b) / 2 for a in x for b in x
    )
    for q in (2.5, 10, 25, 50, 75, 90, 97.5):  # every quantile lands on (nearly) the same value
        a, b = np.percentile(long_way, q), np.percentile(drawn, q)
        assert abs(a - b) <= 0.02 * np.ptp(x) + 1e-12, (q, a, b)


def test_the_bootstrap_of_many_rounds_stays_small():
    """~0.1 s: 200,000 rounds a side; drawn n indices a resample it needed 6 GB."""
    import tracemalloc

    base, cur = noisy(3, 200_000), noisy(4, 200_000, scale=1.02e-3)
    tracemalloc.start()
    lo, hi = stats.bootstrap_ratio_ci(base, cur)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert lo < stats.median(cur) / stats.median(base) < hi
    assert peak < 50 * 2**20, peak  # the sorted copies and a few arrays of 2,000


def test_decide_needs_samples():
    with pytest.raises(ValueError):
        stats.decide([], [1.0], threshold=0.05)


def test_large_but_noisy_change_is_inconclusive_not_significant():
    base = [i * 1e-3 for i in range(1, 9)]
    cur = [(i + 0.5) * 1e-3 for i in range(1, 9)]  # median +11%, but the samples overlap
    c = stats.decide(base, cur, threshold=0.05)
    assert c.change > 0.10
    assert c.p_value > 0.3
    assert c.status == INCONCLUSIVE
    assert "not significant" in c.note


def test_session_drift_needs_three_sessions_and_leaves_out_the_farthest_from_four():
    assert stats.session_drift([1.0, 1.1]) is None
    drift, used = stats.session_drift([1.0, 1.1, 0.9])
    assert used == 3 and 0.08 < drift < 0.12
    steady, used = stats.session_drift([1.0, 1.01, 0.99, 1.0, 2.0])
    assert used == 4 and steady < 0.01


def test_t_within_is_students_t_and_counts_need_no_scipy():
    from scipy.stats import t

    for dof in (1, 2, 3, 4, 7, 30, 121):
        for coverage in (0.8, 0.95, 0.99):
            want = t.ppf(1 - (1 - coverage) / 2, dof)
            assert stats.t_within(coverage, dof) == pytest.approx(want, rel=1e-9), (dof, coverage)
    with pytest.raises(ValueError, match="whole number"):
        stats.t_within(0.95, 2.5)
    # a counted session judges under valgrind, where importing scipy.stats costs 12 s of CPU
    code = (
        "import sys\n"
        "from pytest_concurrency.gate import stats\n"
        "stats.drift_allowance(0.01, 3)\n"
        "stats.decide_layouts([[100.0, 100.0]] * 3, [[103.0, 103.0]] * 3, 0.01)\n"
        "print('scipy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stdout + done.stderr


def test_drift_allowance_shrinks_as_sessions_accumulate():
    few, many = stats.drift_allowance(0.02, 3), stats.drift_allowance(0.02, 10)
    assert few > many > 0.02 * 2  # always wider than the drift itself
    assert stats.drift_allowance(0.0, 5) == 0.0


def test_a_suites_typical_drift_is_its_benchmarks_median_corrected_for_their_few_sessions():
    assert stats.typical_drift([(0.05, 3)] * (stats.TYPICAL_FROM - 1)) is None
    # three sessions (2 degrees of freedom) read a variance at its median 0.69 of the true one
    typical = stats.typical_drift([(0.01, 3), (0.04, 3), (0.05, 3), (0.06, 3), (0.2, 3)])
    assert typical == pytest.approx(0.05 / (1 - 1 / 9) ** 1.5)


def test_a_benchmarks_drift_is_shrunk_toward_its_suites_and_rests_on_more_freedom():
    assert stats.moderated((0.01, 3), None) == (0.01, 2)
    lucky, dof = stats.moderated((0.01, 3), 0.05)
    assert dof == 2 + stats.TYPICAL_WEIGHT and 0.01 < lucky < 0.05
    unlucky, _ = stats.moderated((0.15, 3), 0.05)
    assert 0.05 < unlucky < 0.15
    # the lucky one's allowance grows past a 7% threshold, the unlucky one's shrinks
    assert stats.drift_allowance(0.01, 3) < 0.07 < stats.drift_allowance(lucky, 3, dof)
    assert stats.drift_allowance(unlucky, 3, dof) < stats.drift_allowance(0.15, 3) / 2


def test_the_gate_allows_the_wider_of_a_benchmarks_own_drift_and_its_suites():
    lucky, by_suite = stats.allowance((0.01, 3), 0.05)
    assert by_suite and lucky > stats.drift_allowance(0.01, 3)
    noisy, by_suite = stats.allowance((0.15, 3), 0.05)
    assert not by_suite and noisy == stats.drift_allowance(0.15, 3)
    # two sessions learn no drift of their own: the suite's speaks for them; and for one
    two, by_suite = stats.allowance((0.01, 2), 0.05)
    assert by_suite and 0.05 < two < stats.drift_allowance(0.01, 2)
    assert stats.session_drift([1.0]) is None and stats.session_drift([1.0], 1) == (0.0, 1)
    one, by_suite = stats.allowance(stats.session_drift([1.0], 1), 0.05)
    assert by_suite and one > two
    assert stats.allowance((0.01, 3), None) == (stats.drift_allowance(0.01, 3), False)


# -- exact samples: one outlying round set aside ---------------------------------------------

STEADY = [2_013_937] * 4


def test_a_cold_first_round_no_longer_hides_a_two_percent_change():
    # the user test: the first round counted cold, the four others to the instruction
    base = [2_076_295, *STEADY]
    now = [round(2_076_295 * 1.02), *(round(x * 1.02) for x in STEADY)]
    c = stats.decide_layouts([base], [now], 0.02 * 0.9)  # +2% against a threshold just below it
    assert c.status == REGRESSED, c
    assert (
        "baseline round 1 of 5 (2,076,295, +3.10% from the others) set aside as an outlier"
        in c.note
    )
    assert "current round 1 of 5" in c.note


def test_forty_percent_with_one_outlier_is_a_regression_not_inconclusive():
    base = [1_000_000] * 4 + [1_090_000]
    now = [1_400_000] * 4 + [1_250_000]
    assert stats.decide_layouts([base], [now], 0.02).status == REGRESSED


def test_two_outlying_rounds_are_wandering_not_outliers():
    wandering = [1_000_000, 1_000_000, 1_000_000, 1_030_000, 1_031_000]
    kept, index = stats.set_aside(wandering)
    assert index is None and kept == wandering
    assert (
        stats.decide_layouts([wandering], [[x * 1.025 for x in wandering]], 0.02).status
        == INCONCLUSIVE
    )


def test_a_round_a_few_instructions_off_rounds_that_agree_is_no_outlier():
    # 3 instructions off 2 million (0.0001%) was set aside, noted "+0.00% from the others": four
    # rounds equal to the instruction leave any other "three times farther" from the median
    close = [*STEADY, 2_013_940]
    assert stats.set_aside(close) == (close, None)
    assert "outlier" not in stats.decide_layouts([close], [close], 0.01).note
    # 0.1% of the median is where a round starts to be one: the cold first round's 3.1% still is
    assert stats.set_aside([*STEADY, 2_013_937 + 2_000]) == ([*STEADY, 2_015_937], None)
    assert stats.set_aside([*STEADY, 2_013_937 + 2_100]) == (STEADY, 4)


def test_three_rounds_are_too_few_to_call_one_an_outlier():
    assert stats.set_aside([1.0, 1.0, 1.2]) == ([1.0, 1.0, 1.2], None)
    assert stats.set_aside([5.0] * 6) == ([5.0] * 6, None)  # nothing set aside when all agree


# -- counts in several layouts: the median of the layouts' medians ---------------------------


def _layout(level: float, rounds: int = 5) -> list[float]:
    return [round(level * (1 + 0.0002 * i)) for i in range(rounds)]  # rounds that agree within 0.1%


def test_one_layout_whose_objects_landed_badly_moves_nothing():
    # the shift: a gevent ring counted 2.8% more in one directory, nothing else changed
    base = [_layout(42.9e6), _layout(42.95e6), _layout(42.9e6 * 1.028)]
    now = [_layout(42.92e6), _layout(42.9e6 * 1.028), _layout(42.88e6)]
    alone = stats.decide_layouts([base[0]], [now[1]], 0.01)  # one layout a side, as before
    assert alone.status == REGRESSED
    c = stats.decide_layouts(base, now, 0.01)
    assert c.status == UNCHANGED and abs(c.change) < 0.002, c
    assert (
        "the baseline's 3 layouts disagree by 2.80%" in c.note
        and "judged on their median" in c.note
    )


def test_a_change_in_every_layout_is_caught_at_its_size():
    base = [_layout(42.9e6), _layout(42.95e6), _layout(44.1e6)]
    now = [_layout(x * 1.02) for x in (42.9e6, 43.0e6, 42.85e6)]  # +2%, landing elsewhere again
    c = stats.decide_layouts(base, now, 0.01)
    assert c.status == REGRESSED and 0.015 < c.change < 0.025, c
    improved = stats.decide_layouts(now, base, 0.01)
    assert improved.status == IMPROVED


def test_paired_layouts_that_moved_with_the_allocators_state_are_inconclusive():
    # counted against the base, identical code (evidence/nothing_lost.py's tmpfs row, kept): each
    # side's layouts landed in one of two pymalloc states, in another order on each side
    low, high = 12_191_290, 12_350_380
    base = [_layout(high), _layout(low), _layout(high)]
    head = [_layout(low), _layout(high), _layout(low)]
    c = stats.decide_layouts(base, head, 0.01, paired=True)
    assert c.status == INCONCLUSIVE and "1 of 3 layouts moved up beyond 1% and 2 down" in c.note, c
    assert stats.decide_layouts(head, base, 0.01, paired=True).status == INCONCLUSIVE
    # or two of the head's layouts stepped the same way and one counted the same as the base's:
    # the code costs the same there, so the median's move is where objects landed
    one_way = stats.decide_layouts(
        [_layout(low)] * 3, [_layout(high), _layout(high), _layout(low)], 0.01, paired=True
    )
    assert one_way.status == INCONCLUSIVE and "1 of 3 layouts counted the same" in one_way.note
    # a change that moved every layout the same way is still caught, one way or the other
    slower = [_layout(x * 1.02) for x in (high, low, high)]
    assert stats.decide_layouts(base, slower, 0.01, paired=True).status == REGRESSED
    assert stats.decide_layouts(slower, base, 0.01, paired=True).status == IMPROVED


def test_paired_sides_with_two_and_three_layouts_are_judged_on_the_two_they_share():
    # yarl's ipv6 benchmark counts 255,632 or 258,245 by where the start-up's objects landed; a
    # third layout is counted only where a side's first two disagree, so one side has two
    low, high = 255_632, 258_245
    two, three = [_layout(low)] * 2, [_layout(low), _layout(high), _layout(high)]
    unpaired = stats.decide_layouts(two, three, 0.01)
    assert unpaired.status == REGRESSED  # the medians of layouts: 255,632 against 258,245
    c = stats.decide_layouts(two, three, 0.01, paired=True)
    assert c.status == INCONCLUSIVE and "layout by layout +0.00%, +1.02%: 1 of 2" in c.note, c
    assert stats.decide_layouts(three, two, 0.01, paired=True).status == INCONCLUSIVE
    # a change in both shared layouts is caught, whichever side counted a third
    slower = [_layout(low * 1.02), _layout(high * 1.02)]
    assert stats.decide_layouts(three, slower, 0.01, paired=True).status == REGRESSED


def test_a_layout_whose_rounds_wander_makes_it_inconclusive_and_an_outlier_is_named_by_layout():
    wandering = [1_000_000, 1_000_000, 1_000_000, 1_030_000, 1_031_000]
    steady = [_layout(1e6), _layout(1e6)]
    c = stats.decide_layouts([*steady, wandering], [_layout(1.025e6)] * 3, 0.02)
    assert c.status == INCONCLUSIVE and "the rounds disagree by up to 3.10%" in c.note, c
    cold = [_layout(1e6), [1_050_000, *_layout(1e6, 4)], _layout(1e6)]
    c = stats.decide_layouts(cold, [_layout(1e6)] * 3, 0.01)
    assert c.status == UNCHANGED and "baseline round 1 of 5 in layout 1 (1,050,000," in c.note


def test_one_layout_is_judged_as_before_and_a_side_without_rounds_is_refused():
    base, now = [2_076_295, *STEADY], [round(x * 1.02) for x in [2_076_295, *STEADY]]
    c = stats.decide_layouts(
        [base], [now], 0.018
    )  # as one layout a side: no layout named where there is one
    assert (
        c.status == REGRESSED
        and "baseline round 1 of 5 (2,076,295" in c.note
        and "layout" not in c.note
    )
    assert stats.center([[1.0, 2.0, 3.0], [10.0], [4.0, 5.0]]) == 4.5
    with pytest.raises(ValueError, match="in every layout"):
        stats.decide_layouts([base, []], [now], 0.02)
