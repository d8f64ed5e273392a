"""The control timed beside each round (measure/control.py) and time judged over it by the
stored gate (gate/controlled.py), on records made here."""

from __future__ import annotations

import contextlib
import math
import random
import time

import pytest
from _documents import document_from_records

from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate.verdicts import IMPROVED, INCONCLUSIVE, REGRESSED, UNCHANGED
from pytest_concurrency.measure import control
from pytest_concurrency.measure.records import Record
from pytest_concurrency.store import baseline
from pytest_concurrency.store.history import Baseline

pytestmark = pytest.mark.once  # version-independent: the arithmetic, on one Python

PY = {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"}
META = {"schema_version": 1, "python": PY, "cpu_count": 2, "cpu_model": "x", "calibration": None}


def controlled(seed: int, work: float = 1.0, speed: float = 1.0, busy: float = 1.0) -> Record:
    """A session of 60 rounds of one thread's work: ``work`` times the code's CPU time, on a
    machine ``speed`` times slower (its controls' CPU time too), its process running ``busy`` of
    the wall time (a neighbour took the rest); 2% noise on rounds and controls alike."""
    rng = random.Random(seed)
    cpu = [1e-3 * work * speed * rng.lognormvariate(0, 0.02) for _ in range(60)]
    controls = [3e-4 * speed * rng.lognormvariate(0, 0.02) for _ in cpu]
    return Record(
        "test_pure",
        {},
        "asyncio",
        [c / busy for c in cpu],  # wall time: the CPU time and the slices it waited
        extra={
            "control_factor": [busy / c for c in controls],
            "control_s": 3e-4 * speed,
            "control_busy": busy,
            "control_waits": 0.0,
            "control_version": control.VERSION,
            "task_kind": "light",
        },
    )


def stored(*sessions: Record) -> dict:
    """A baseline of these sessions (latest first), as saving each in turn makes it."""
    doc = None
    for rec in reversed(sessions):
        new = document_from_records([rec], META)
        doc = gate.add_session(new, Baseline.of(doc), [rec])[0] if doc else new
    assert doc is not None
    return doc


def verdict(doc: dict, rec: Record):
    [v] = gate.compare(Baseline.of(doc), [rec], META).verdicts
    return v


def test_a_slower_machine_and_a_neighbours_slices_divide_out():
    doc = stored(controlled(1), controlled(2), controlled(3))
    # the machine 1.6x slower and the process given 60% of the wall time: raw +167%
    v = verdict(doc, controlled(4, speed=1.6, busy=0.6))
    assert v.decided_by == "control" and v.status == UNCHANGED, v
    assert v.raw_change > 1.5 and abs(v.change) < 0.03
    assert v.machine_speed == pytest.approx(1.6, rel=0.05)
    assert "was the machine's" in v.note


def test_a_change_of_the_code_shows_over_its_controls_and_raw_alike():
    doc = stored(controlled(1), controlled(2), controlled(3))
    v = verdict(doc, controlled(4, work=1.10, speed=1.05))
    assert v.decided_by == "control" and v.status == REGRESSED, v
    assert v.change == pytest.approx(0.10, abs=0.02) and v.raw_change > 0.10
    summary = gate.compare(Baseline.of(doc), [controlled(4, work=1.10)], META).summary
    assert "alpha 0.01, over their controls)" in summary, summary


def test_a_change_raw_time_does_not_show_is_not_called_a_regression():
    """The machine 30% faster: +10% over the controls reads -23% raw. On this machine unchanged
    code read so too (its control sped up more than the code did): neither reading decides."""
    doc = stored(controlled(1), controlled(2), controlled(3))
    v = verdict(doc, controlled(4, work=1.10, speed=0.7))
    assert v.raw_change < -0.2 and v.status == INCONCLUSIVE, v
    assert "over its controls +9" in v.note and "raw -23" in v.note
    result = gate.compare(Baseline.of(doc), [controlled(4, work=1.10, speed=0.7)], META)
    assert gate.suspects(result) == [v.key]  # measured again, in a fresh process
    raw = gate.compare(
        Baseline.of(_without_controls(doc)), [_bare(controlled(4, work=1.10, speed=0.7))], META
    )
    assert raw.verdicts[0].status == IMPROVED  # what the controls still save the gate from


def _bare(rec: Record) -> Record:
    return Record(rec.workload, rec.params, rec.backend, rec.samples, extra={"task_kind": "light"})


def _without_controls(doc: dict) -> dict:
    for b in doc["benchmarks"]:
        b["extra_info"] = {k: v for k, v in b["extra_info"].items() if k not in control.KEYS}
    for entry in doc["pytest_concurrency"].get("history") or ():
        for b in entry["benchmarks"]:
            for k in control.KEYS:
                b.pop(k, None)
    return doc


@pytest.mark.parametrize(
    "change, why",
    [
        ({"control_waits": 3.0}, "waited 3.0 times a round"),
        ({"control_busy": 1.9}, "1.9 cores"),
        ({"control_version": control.VERSION + 1}, "no controls"),
        ({"control_factor": [1.0] * 59}, "not one a round"),
    ],
)
def test_rounds_that_do_not_follow_a_control_are_judged_raw_and_say_why(change, why):
    doc = stored(controlled(1), controlled(2))
    rec = controlled(3, work=1.2)
    rec.extra.update(change)
    v = verdict(doc, rec)
    assert v.decided_by == "raw" and why in v.not_divided
    assert v.status == REGRESSED  # the raw rule still catches +20% on a steady machine


# rounds of 100 us are timed between a neighbour's slices (wall time is CPU time, the median
# never stretched), rounds of 5 ms are stretched by each slice (CPU time is wall time by the share)
@pytest.mark.parametrize("round_s, per_round_share", [(1e-4, 1.0), (5e-3, 0.5)])
def test_groups_keep_the_controls_cost_under_its_bound_and_figures_stay_aligned(
    monkeypatch, round_s, per_round_share
):
    clock = {"wall": 0.0, "cpu": 0.0}
    monkeypatch.setattr(control, "_reading", lambda: (clock["wall"], clock["cpu"], 0))
    monkeypatch.setattr(control, "_now", lambda: clock["wall"])

    def run_control():  # 300 us of CPU and wall
        clock["wall"] += 3e-4
        clock["cpu"] += 3e-4

    monkeypatch.setattr(control, "run_once", run_control)
    bracket = control.Bracket()
    for _ in range(1000):  # the process given half the wall time
        bracket.before()
        clock["wall"] += round_s
        clock["cpu"] += round_s / 2
        bracket.after(round_s)
    figures = bracket.figures(last=900)  # the first 100 were warm-ups
    assert len(figures["control_factor"]) == 900
    # every group's control within the bound, and the first control, before any round, beside it
    assert figures["control_cost"] <= control.MAX_COST + 3e-4 / (1000 * round_s)
    every = math.ceil(3e-3 / round_s - 1e-9)  # a control each 3 ms of rounds
    assert len(bracket.controls) == 1 + 1000 // every
    assert figures["control_busy"] == 0.5 and figures["control_s"] == pytest.approx(3e-4)
    # a round's CPU time in controls: its wall time by its share, over 300 us
    assert figures["control_factor"] == [pytest.approx(per_round_share / 3e-4, rel=1e-4)] * 900
    assert control.scales(figures) is None
    assert bracket.figures(last=1001) == {}  # more rounds than it bracketed: nothing, not a guess


def test_a_slow_first_round_sizes_nothing_and_nothing_is_read_around_a_round(monkeypatch):
    # under load a first round can be preempted for milliseconds: sized on it, every later round
    # of microseconds had its own control and kernel readings (a 0.5 s test took 17-84 s)
    clock = {"wall": 0.0, "cpu": 0.0, "readings": 0, "asides": 0}

    def reading():
        clock["readings"] += 1
        return clock["wall"], clock["cpu"], 0

    @contextlib.contextmanager
    def aside():
        clock["asides"] += 1
        yield

    def run_control():  # 300 us
        clock["wall"] += 3e-4
        clock["cpu"] += 3e-4

    monkeypatch.setattr(control, "_reading", reading)
    monkeypatch.setattr(control, "_now", lambda: clock["wall"])
    monkeypatch.setattr(control, "run_once", run_control)
    bracket = control.Bracket(aside)
    for i in range(10_000):  # a first round of 10 ms, then rounds of 5 us
        took = 1e-2 if i == 0 else 5e-6
        bracket.before()
        clock["wall"] += took
        clock["cpu"] += took
        bracket.after(took)
    figures = bracket.figures(last=10_000)
    assert figures["control_cost"] <= control.MAX_COST + 3e-4 / (1e-2 + 9_999 * 5e-6)
    assert len(bracket.controls) <= 21  # 60 ms of rounds: a control each 3 ms of them, + the first
    assert clock["readings"] == 2 * len(bracket.controls)  # only at the controls
    assert clock["asides"] == len(bracket.controls)
    assert figures["control_busy"] == 1.0 and len(figures["control_factor"]) == 10_000


def test_waits_are_a_round_of_the_rounds_read_not_of_those_settled_after_the_last_control(
    monkeypatch,
):
    # a loaded machine stretches the controls, so fewer of them close groups: the rounds after the
    # last one are settled unread, and counting them diluted the waits (0.5 a round, CI, eb27dc2)
    clock = {"wall": 0.0, "cpu": 0.0, "waits": 0}
    monkeypatch.setattr(control, "_reading", lambda: (clock["wall"], clock["cpu"], clock["waits"]))
    monkeypatch.setattr(control, "_now", lambda: clock["wall"])

    def run_control():  # 300 us
        clock["wall"] += 3e-4
        clock["cpu"] += 3e-4

    monkeypatch.setattr(control, "run_once", run_control)
    bracket = control.Bracket()
    for _ in range(1000):  # rounds of 10 us, each blocking once
        bracket.before()
        clock["wall"] += 1e-5
        clock["cpu"] += 1e-5
        clock["waits"] += 1
        bracket.after(1e-5)
    assert bracket._group  # the last rounds were never followed by a control
    figures = bracket.figures(last=1000)
    assert figures["control_waits"] == 1.0
    assert "waited 1.0 times a round" in control.scales(figures)


def test_the_control_checks_its_own_result(monkeypatch):
    monkeypatch.setattr(control, "work", lambda: control.EXPECTED + 1)
    with pytest.raises(RuntimeError, match="the control computed"):
        control.run_once()


def test_a_saved_baseline_thins_controls_as_its_rounds():
    rec = controlled(1)
    rec.samples = rec.samples * 30  # 1,800 rounds, more than a baseline keeps
    rec.extra["control_factor"] = rec.extra["control_factor"] * 30
    doc = baseline._thinned(document_from_records([rec], META))
    [b] = doc["benchmarks"]
    kept = len(b["stats"]["data"])
    assert kept == baseline.KEPT_ROUNDS
    assert len(b["extra_info"]["control_factor"]) == kept


class _Fixture:
    """What KernelPerRounds wraps of pytest-benchmark's fixture; its first round is slow."""

    _min_rounds, _max_time = 5, 1.0

    def __init__(self):
        self.calls = 0

    def _make_runner(self, function, args, kwargs):
        def runner(loops_range, timer=time.perf_counter):
            self.calls += 1
            if self.calls == 1:
                time.sleep(0.01)  # preempted for 10 ms by a neighbour
            return 1e-6

        return runner

    def _make_stats(self, iterations):
        return None

    def pedantic(self, *args, **named):
        return None


def test_the_kernel_groups_are_sized_on_the_shortest_first_round():
    """Sized on a first round a neighbour slowed, groups of one round read the kernel's counters
    around every round of microseconds."""
    from pytest_concurrency.measure.driver import KernelPerRounds

    fixture = _Fixture()
    rounds = KernelPerRounds(fixture, one_a_round=False)
    try:
        fixture._make_stats(1)
        run = fixture._make_runner(lambda: None, (), {})
        for _ in range(KernelPerRounds.SIZING + 1):
            run(range(1))
        assert rounds._size >= 100  # 2 ms of rounds of microseconds, not 1
        assert rounds._starts == []  # the sizing rounds are in no group
    finally:
        rounds.close()
