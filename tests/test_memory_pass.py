"""The memory pass's rule on its own (no session: a few rounds of a function, ~0.1 s): a leak
grows in every round; what grew in one stretch only is read again and is no leak. Then a
default-scale case whose leaks are read in a lighter case's rounds, on real models (1.5-2 s each)."""

from __future__ import annotations

import contextlib
import itertools
import sys

import pytest

from pytest_concurrency import backends, workloads
from pytest_concurrency.gate import memory as memory_gate
from pytest_concurrency.measure import driver, memory
from pytest_concurrency.measure.records import Record
from pytest_concurrency.workloads import cancel

KEY = "retained_b_per_task_round"


def _pass(one_round) -> dict:
    return memory.leak_pass(one_round, contextlib.nullcontext)


def _ruled(monkeypatch, one_round, kept: list) -> dict:
    """The rule alone: the only probe reads the bytes the test keeps. The real Python heap moves
    with other threads too (xdist's own, receiving the next tests: 738 B in one round once made
    a three-round pass read five), which no rule can tell from the rounds' own."""
    heap = {"python": lambda: sum(map(len, kept))}
    monkeypatch.setattr(memory.memory_probes, "available", lambda: (heap, {}))
    return _pass(one_round)


def test_a_steady_leak_reads_whole_in_both_sets_of_rounds():
    kept = []
    out = _pass(lambda: kept.append(bytes(4096)))
    assert out["memory_rounds"] == 2 * memory.READINGS  # it grew: read again
    assert 4096 <= out[KEY] < 4096 + 512, out


def test_a_stretch_of_retention_in_the_first_rounds_is_no_leak(monkeypatch):
    kept, calls = [], []

    def one_round():
        calls.append(None)
        if len(calls) <= memory.WARMUP + memory.READINGS:
            kept.append(bytes(4096))  # held for a while (a loaded machine's slow cleanup)...
        else:
            kept.clear()  # ...then let go

    out = _ruled(monkeypatch, one_round, kept)
    assert out["memory_rounds"] == 2 * memory.READINGS and out[KEY] <= 0, out


def test_rounds_that_keep_nothing_stop_after_three(monkeypatch):
    # three growths at or under every floor: the median of five is too, so two rounds are saved
    out = _ruled(monkeypatch, lambda: sum(range(1000)), [])
    assert out["memory_rounds"] == memory.ENOUGH < memory.READINGS and out[KEY] == 0, out


def test_a_one_off_in_the_first_three_rounds_reads_a_fourth_and_is_no_leak(monkeypatch):
    # three of the four growths at or under the floor: the median of five is too, so the fifth
    # round is saved
    kept, calls = [bytes(0)], itertools.count(1)  # no list that grows with the rounds

    def one_round():
        if next(calls) == memory.WARMUP + 2:  # a cache filled once, above the floor
            kept[0] = bytes(4096)

    out = _ruled(monkeypatch, one_round, kept)
    assert out["memory_rounds"] == memory.ENOUGH + 1 < memory.READINGS and out[KEY] == 0, out


def test_two_one_offs_in_the_first_four_rounds_read_all_five_and_are_no_leak(monkeypatch):
    kept, calls = [bytes(0), bytes(0)], itertools.count(1)

    def one_round():
        call = next(calls)
        for slot, when in enumerate((memory.WARMUP + 1, memory.WARMUP + 3)):
            if call == when:  # two caches, each filled once, above the floor
                kept[slot] = bytes(4096)

    out = _ruled(monkeypatch, one_round, kept)
    assert out["memory_rounds"] == memory.READINGS and out[KEY] == 0, out


def test_a_leak_that_starts_late_in_the_five_is_read_as_the_five_read_it(monkeypatch):
    # the three under the floors decide the five's median: what the later rounds keep cannot
    # make it a leak, so stopping after three loses no verdict
    kept, calls = [], itertools.count(1)

    def one_round():
        if next(calls) > memory.WARMUP + memory.ENOUGH:
            kept.append(bytes(4096))

    out = _ruled(monkeypatch, one_round, kept)
    assert out["memory_rounds"] == memory.ENOUGH and out[KEY] == 0, out


# -- a heavy case's leaks, read in rounds of a lighter case (workloads.leak_params) -----------

KEPT: list = []


def _keeps_its_frame(*args):
    try:
        return cancel._blocked(*args)
    finally:
        KEPT.append(sys._getframe())


async def _akeeps_its_frame(*args):
    try:
        return await cancel._ablocked(*args)
    finally:
        KEPT.append(sys._getframe())


class _Leaky(cancel.Cancel):
    """Cancel whose tasks keep their frame once cancelled: a leak per task."""

    name = "leaky"
    sync_task, async_task = staticmethod(_keeps_its_frame), staticmethod(_akeeps_its_frame)


@pytest.mark.parametrize("spec", ["asyncio", "greenlet"])
@pytest.mark.parametrize("workload", [_Leaky(), cancel.WORKLOAD], ids=["leaky", "plain"])
def test_a_leak_per_task_of_a_default_case_is_read_in_its_lighter_rounds(workload, spec):
    # 1,000 blocked tasks a round; its leaks read in rounds of 10 (LEAK_SIZES): a frame kept per
    # task reads per task as it would in rounds of 1,000, and fails the gate; the same
    # cancellations without it do not (~1 s a model)
    be, params = backends.load(spec), {"tasks": 1000, "wait": "get", "end": "cancel"}
    light = workloads.leak_params(workload, params)
    assert light == dict(params, tasks=10)
    workload.run(be, params)
    try:
        figures = driver.memory_figures(workload, be, params)
    finally:
        KEPT.clear()
    assert figures["leak_params"] == light and figures["leak_tasks_per_round"] == 10
    assert figures["tasks_per_round"] == 1000 and figures["peak_traced_kib"] > 1000, figures
    extra = {"workload": "cancel", "backend": spec, "params": params, **figures}
    record = Record("cancel", params, spec, samples=[1.0], ops=1000, unit="task", extra=extra)
    lines = [memory_gate.line(v) for v in memory_gate.judge(None, [record]).verdicts]
    if workload is cancel.WORKLOAD:
        assert figures[KEY] < 512 and not lines, (figures, lines)
        return
    assert figures[KEY] > 512, figures  # a frame: 1.3 KiB (asyncio), 1.8 KiB (greenlet)
    assert any(
        "per task per round of tasks=10 in the Python heap (leak)" in line for line in lines
    ), lines
