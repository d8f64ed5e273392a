"""The memory gate's rule on records with known figures: leaks, thresholds, floors, old baselines."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from _documents import document_from_records

from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate import memory as memory_gate
from pytest_concurrency.gate import verdicts as V
from pytest_concurrency.measure.records import Document, Record
from pytest_concurrency.report import markdown, terminal
from pytest_concurrency.store import baseline
from pytest_concurrency.store.history import Baseline

# version-independent (the memory gate's rule on records with known figures): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

DATA = Path(__file__).parent / "data"


def rec(workload="spawn", params=None, backend="gevent", **memory) -> Record:
    extra = {
        "workload": workload,
        "backend": backend,
        "params": params or {"count": 3000},
        "measure": "time",
        "tasks_per_round": 3000,
        **memory,
    }
    return Record(
        workload,
        dict(extra["params"]),
        backend,
        samples=[0.1, 0.1, 0.1],
        ops=3000,
        unit="task",
        extra=extra,
    )


def doc_of(*records: Record) -> dict:
    return document_from_records(list(records), baseline.current_meta({}, None))


def base_of(*records: Record) -> Baseline:
    return Baseline.of(doc_of(*records))


def test_a_leak_fails_without_a_baseline_and_says_how_much_per_task_per_round():
    leaking = rec("cancel", {"tasks": 30}, "greenlet", retained_b_per_task_round=1946.0)
    clean = rec("cancel", {"tasks": 30}, "asyncio", retained_b_per_task_round=0.0)
    result = memory_gate.judge(None, [leaking, clean])
    assert result.failed
    assert [memory_gate.line(v) for v in result.verdicts] == [
        "cancel[tasks=30] on greenlet: keeps 1.9 KiB per task per round in the Python heap (leak)"
    ]


def test_resident_memory_outside_the_heaps_is_a_leak_per_round_whatever_the_task_count():
    mapped = rec("spawn", {"count": 3000}, "threading", resident_b_per_round=1024.0 * 1024)
    noise = rec(
        "spawn", {"count": 10}, "threading", resident_b_per_round=200.0 * 1024, tasks_per_round=10
    )
    # the floor grows with a round's tasks: 256 B each, 750 KiB for 3,000 (a stack is 4 KiB)
    many = rec("spawn", {"count": 3000}, "greenlet", resident_b_per_round=500.0 * 1024)
    result = memory_gate.judge(None, [mapped, noise, many])
    assert [memory_gate.line(v) for v in result.verdicts] == [
        "spawn[count=3000] on threading: keeps 1 MiB per round resident, outside every heap (leak)"
    ]


def test_leaks_read_in_a_lighter_case_are_judged_by_its_tasks_and_say_so():
    # spawn of 3,000 whose leak rounds spawned 10 (measure/memory.py's ``lighter``): the floors
    # per round are those of 10 tasks (the C heap's 4 KiB a round: 410 B a task, not 64 B), and
    # the line says which rounds its figure is per task of
    light = {"leak_params": {"count": 10}, "leak_tasks_per_round": 10}
    c_noise = rec(c_heap_b_per_task_round=300.0, **light)  # 3 KiB a round: gevent's loop moves so
    python = rec(backend="asyncio", retained_b_per_task_round=1400.0, **light)
    threads = rec(backend="threading", threads_per_round=10.0, **light)
    result = memory_gate.judge(None, [c_noise, python, threads])
    assert [memory_gate.line(v) for v in result.verdicts] == [
        "spawn[count=3000] on asyncio: keeps 1.37 KiB per task per round of count=10 "
        "in the Python heap (leak)",
        "spawn[count=3000] on threading: 10 threads more alive after every round of count=10 (leak)",
    ]


@pytest.mark.parametrize(
    "heap", [{"retained_b_per_task_round": 2048.0}, {"c_heap_b_per_task_round": 2048.0}]
)
def test_a_heap_that_leaks_is_not_also_called_a_leak_outside_the_heaps(heap):
    """A heap's growth reaches resident memory in whole pages and arenas: its own line says where
    (2 KiB a task, 3,000 tasks: 5.9 MiB a round in the heap, 4 MiB resident)."""
    both = rec(resident_b_per_round=4.0 * 1024 * 1024, **heap)
    result = memory_gate.judge(None, [both])
    assert [v.metric for v in result.verdicts] == list(heap)


def test_a_small_heap_leak_beside_a_large_mapped_one_explains_nothing():
    # a user's test (no task count) keeps a 1 MiB map a round, and its ~100 B map object
    both = rec(
        tasks_per_round=None, resident_b_per_round=1024.0 * 1024, retained_b_per_task_round=532.0
    )
    result = memory_gate.judge(None, [both])
    assert sorted(v.metric for v in result.verdicts) == [
        "resident_b_per_round",
        "retained_b_per_task_round",
    ]


def test_retained_memory_below_the_floor_is_no_leak():
    result = memory_gate.judge(
        None, [rec(retained_b_per_task_round=memory_gate.LEAKS[0].floor_per_task - 1)]
    )
    assert not result.failed and not result.verdicts


def test_memory_per_task_beyond_the_threshold_regresses_with_the_issue_wording():
    result = memory_gate.judge(base_of(rec(kib_per_task=5.6)), [rec(kib_per_task=7.9)])
    assert result.failed
    assert (
        memory_gate.line(result.verdicts[0])
        == "spawn[count=3000] on gevent: 5.6 -> 7.9 KiB per task (+41%)"
    )
    assert (
        memory_gate.judge(base_of(rec(kib_per_task=7.9)), [rec(kib_per_task=5.6)])
        .verdicts[0]
        .status
        == V.IMPROVED
    )


def test_changes_within_the_threshold_or_the_floor_do_not_count():
    within = memory_gate.judge(base_of(rec(kib_per_task=5.6)), [rec(kib_per_task=6.0)])  # +7%
    assert [v.status for v in within.verdicts] == [V.UNCHANGED]
    assert memory_gate.judge(base_of(rec(kib_per_task=5.6)), [rec(kib_per_task=6.0)], 0.05).failed
    # +50%, but 32 KiB over the round's tasks: under the 64 KiB a round must add up to
    few = dict(params={"count": 16}, tasks_per_round=16)
    tiny = memory_gate.judge(base_of(rec(kib_per_task=4.0, **few)), [rec(kib_per_task=6.0, **few)])
    assert [v.status for v in tiny.verdicts] == [V.UNCHANGED]
    heap = memory_gate.judge(base_of(rec(peak_traced_kib=100.0)), [rec(peak_traced_kib=150.0)])
    assert [v.status for v in heap.verdicts] == [V.UNCHANGED]  # +50% but 50 KiB < the 64 KiB floor


def test_a_baseline_without_memory_figures_still_loads_and_says_new():
    path = str(DATA / "run_a.json")  # written by a version that recorded no memory figures
    old = baseline.load(path)
    current = [
        dataclasses.replace(
            r, extra={**r.extra, "peak_traced_kib": 900.0, "retained_b_per_task_round": 0.0}
        )
        for r in Document.of(json.loads((DATA / "run_a.json").read_text())).records
    ]
    result = gate.compare(old, current, old.meta, gate.GateSettings(allow_cross_python=True))
    assert not result.memory.failed
    by_metric = {
        m: {v.status for v in result.memory.verdicts if v.metric == m}
        for m in ("peak_traced_kib", "kib_per_task")
    }
    assert by_metric == {
        "peak_traced_kib": {V.NEW},
        "kib_per_task": {V.UNCHANGED},
    }  # spawn had it already
    assert any("no memory figures peak heap in a round" in n for n in result.memory.notes)


def test_the_gate_fails_on_memory_alone_and_every_report_has_the_section():
    base = doc_of(rec(kib_per_task=5.6))
    result = gate.compare(
        Baseline.of(base),
        [rec(kib_per_task=7.9)],
        base["pytest_concurrency"],
        gate.GateSettings(memory_threshold=0.2),
    )
    assert result.failed and not result.by_status(V.REGRESSED)  # time unchanged, memory regressed
    line = "spawn[count=3000] on gevent: 5.6 -> 7.9 KiB per task (+41%)"
    assert line in terminal.render([rec(kib_per_task=7.9)], result, width=200)
    assert f"- {line}" in markdown.render([rec(kib_per_task=7.9)], result)
    assert "Memory regressions (fail the build)" in markdown.render([rec(kib_per_task=7.9)], result)


def test_memory_figures_of_earlier_sessions_count_through_the_median():
    from pytest_concurrency.store import history

    sessions = None
    for value in (5.0, 5.6, 9.0):  # one odd session does not move the median
        doc = doc_of(rec(kib_per_task=value))
        sessions = history.merge(doc, sessions and Baseline.of(sessions), keep=5)
    result = memory_gate.judge(Baseline.of(sessions), [rec(kib_per_task=5.7)])
    assert [(v.status, v.baseline) for v in result.verdicts] == [(V.UNCHANGED, 5.6)]


def test_a_bad_memory_threshold_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="memory threshold: -0.1 is not a fraction"):
        gate.GateSettings(memory_threshold=-0.1)
    copy.deepcopy(gate.GateSettings(memory_threshold=0.1))
