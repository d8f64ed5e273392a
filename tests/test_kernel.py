"""The kernel instrument (measure/kernel.py) and the kernel gate (gate/kernel.py)."""

from __future__ import annotations

import json
import os
import statistics
import threading

import pytest
from _documents import document_from_records
from conftest import needs

from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate import kernel as kernel_gate
from pytest_concurrency.gate.verdicts import (
    IMPROVED,
    INCONCLUSIVE,
    NOT_MEASURED,
    REGRESSED,
    UNCHANGED,
)
from pytest_concurrency.measure import callgrind, kernel
from pytest_concurrency.measure.records import Record
from pytest_concurrency.report import kernel as kernel_report
from pytest_concurrency.store import history
from pytest_concurrency.store.history import Baseline

with kernel.Counters() as _probe:
    SYSCALLS = _probe.source["syscalls"] == "perf_event_open"
    WHY_NOT = _probe.why_not
needs_syscalls = needs(
    "tracefs (perf's syscall events)",
    None if SYSCALLS else f"syscalls cannot be counted: {WHY_NOT}",
)


@needs_syscalls
def test_a_round_counts_its_syscalls_exactly_and_its_threads_too():
    with kernel.Counters() as c:
        # another thread of this process (pytest-xdist's IO thread) may call the kernel between two
        # reads (4 syscalls in one CI run): the least of several readings of nothing is exact
        empty = min(
            (c.between(c.read(), c.read()) for _ in range(20)), key=lambda got: got["syscalls"]
        )
        before = c.read()
        for _ in range(1000):
            os.sched_yield()
        yields = c.between(before, c.read())
        before = c.read()
        threads = [
            threading.Thread(target=lambda: [os.sched_yield() for _ in range(500)])
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        in_threads = c.between(before, c.read())
    assert empty["syscalls"] == 0  # the readings' own reads are subtracted
    # each yield once; a GIL hand-off to another thread of this process (pytest-xdist's IO thread)
    # is a futex call or two more, now and then (1002 in one CI run of 4)
    assert 1000 <= yields["syscalls"] <= 1010
    assert (
        in_threads["syscalls"] >= 2000
    )  # inherited: the threads' yields, plus starting and joining them
    assert all(c.source[f] == "perf_event_open" for f in ("csw", "minflt"))


def test_without_perf_the_fallback_says_so_and_never_reads_zero(monkeypatch):
    monkeypatch.setenv(kernel.NO_PERF_ENV, "1")
    with kernel.Counters() as c:
        got = c.between(c.read(), c.read())
    assert c.source["syscalls"] == "not measured" and c.source["csw"] == "getrusage"
    assert got["syscalls"] is None and got["migrations"] is None and got["csw"] is not None
    assert kernel.NO_PERF_ENV in c.why_not
    keys = kernel.per_op([got, got, got], 10, c.source, c.why_not)
    assert (
        "syscalls_per_op" not in keys and "csw_per_op" in keys and keys["kernel_note"] == c.why_not
    )


# -- the gate, on synthetic records ------------------------------------------------------------

META = {
    "schema_version": 1,
    "python": {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"},
    "backends": {"threading": "3.11.7"},
    "libraries": {},
    "cpu_count": 2,
    "cpu_model": "x",
    "calibration": None,
}


def _rec(
    backend="asyncio",
    *,
    syscalls=1.24,
    vcsw=0.0,
    icsw=0.0,
    sys_s=1e-6,
    spread=0.0,
    source="perf_event_open",
):
    rounds = {
        "syscalls": [syscalls * 100] * 5,
        "vcsw": [vcsw * 100 * (1 + spread * d) for d in (-1, -0.5, 0, 0.5, 1)],
        "icsw": [icsw * 100] * 5,
        "csw": [(vcsw + icsw) * 100] * 5,
        "sys_s": [sys_s * 100] * 5,
        "minflt": [0.0] * 5,
    }
    extra = {
        "measure": "time",
        "kernel_source": {"syscalls": source},
        "kernel_rounds": rounds,
        "csw_per_op": vcsw + icsw,
        "vcsw_per_op": vcsw,
        "icsw_per_op": icsw,
        "sys_s_per_op": sys_s,
        "minflt_per_op": 0.0,
    }
    if source == "perf_event_open":
        extra["syscalls_per_op"] = syscalls
    else:
        extra["kernel_note"] = "perf_event_open not used (PYTEST_CONCURRENCY_NO_PERF is set)"
        del rounds["syscalls"]
    return Record("ring", {"n": 10}, backend, [0.01] * 5, ops=100, unit="hop", extra=extra)


def base_of(records: list[Record], meta: dict) -> Baseline:
    return Baseline.of(document_from_records(records, meta))


def _judge(base, now):
    doc = base_of([base], META)
    return {(v.figure): v for v in kernel_gate.judge(doc, [now]).verdicts}


@pytest.mark.once
@pytest.mark.parametrize(
    "now, status",
    [
        (_rec(syscalls=1.24 * 3.33), REGRESSED),  # a sched_yield per hop on top: +233%
        (_rec(syscalls=1.24 * 1.03), UNCHANGED),
        (_rec(syscalls=0.62), IMPROVED),
    ],
)
def test_syscalls_per_op_are_judged_tightly(now, status):
    assert _judge(_rec(), now)["syscalls"].status == status


@pytest.mark.once
def test_system_cpu_per_op_catches_more_kernel_work_in_the_same_syscalls():
    got = _judge(_rec(sys_s=100e-6), _rec(sys_s=300e-6))  # readv of 4 KiB -> 256 KiB per hop: x3
    assert got["sys_s"].status == REGRESSED and got["syscalls"].status == UNCHANGED
    # a round of 100 ops reading one scheduler tick more (4 ms) is the source's resolution, not a change
    assert _judge(_rec(sys_s=0.0), _rec(sys_s=40e-6))["sys_s"].status == UNCHANGED


@pytest.mark.once
def test_switches_whose_rounds_spread_widely_need_a_wider_change():
    base = _rec("threading", vcsw=4.3, spread=0.4)
    got = _judge(base, _rec("threading", vcsw=4.3 * 1.5, spread=0.4))["vcsw"]
    assert got.status == UNCHANGED and got.threshold > 0.5  # three times the rounds' spread
    assert (
        _judge(_rec("threading", vcsw=4.3), _rec("threading", vcsw=4.3 * 1.5))["vcsw"].status
        == REGRESSED
    )


@pytest.mark.once
def test_a_figure_one_side_did_not_measure_is_not_measured_never_passed():
    got = _judge(_rec(), _rec(source="getrusage"))
    assert (
        got["syscalls"].status == NOT_MEASURED
        and "PYTEST_CONCURRENCY_NO_PERF" in got["syscalls"].note
    )
    result = kernel_gate.judge(base_of([_rec()], META), [_rec(source="getrusage")])
    assert (
        not result.failed and result.not_measured and "not measured" in kernel_gate.summary(result)
    )


def test_a_plain_test_counted_under_valgrind_reads_not_measured_with_why_never_nothing():
    counted = Record(
        "test_mine",
        {},
        "gevent",
        [2.0e6] * 5,
        ops=1,
        unit="call",
        extra={"measure": "instructions", **kernel.not_measured(kernel.UNDER_VALGRIND)},
    )
    then = Record(
        "test_mine",
        {},
        "gevent",
        [2.0e6] * 5,
        ops=1,
        unit="call",
        extra={"measure": "instructions"},
    )
    result = kernel_gate.judge(base_of([then], META), [counted])
    gated = [f.name for f in kernel_gate.FIGURES if f.gated]
    assert sorted(v.figure for v in result.verdicts) == sorted(gated)
    assert {v.status for v in result.verdicts} == {NOT_MEASURED} and not result.failed
    (why,) = result.not_measured  # one line for the four figures, saying why and what to do
    assert why.startswith(
        "syscalls/op, voluntary context switches/op, system CPU/op, minor page faults/op not measured "
        "in this run (a plain test counted under valgrind"
    ), why
    assert "--concurrency-measure=time" in why and why.endswith(": 1 benchmark")
    assert "passed: 4 not measured" in kernel_gate.summary(result)


@pytest.mark.once
def test_a_kernel_regression_fails_the_gate_and_reads_as_one_story():
    doc = base_of([_rec()], META)
    result = gate.compare(doc, [_rec(syscalls=1.24 * 3.33)], META)
    assert result.failed and result.kernel.failed
    line = kernel_gate.line(result.kernel.by_status(REGRESSED)[0])
    assert line.startswith(
        "ring[n=10] on asyncio: 1.24 -> 4.13 syscalls/op (+233%, threshold 5%)"
    ), line


def _saved(*sys_s_per_op: float) -> Baseline:
    """A baseline saved once per figure, the first given the latest, as a real save merges it."""
    doc = None
    for value in reversed(sys_s_per_op):
        doc = history.merge(
            document_from_records([_rec(sys_s=value)], META), doc and Baseline.of(doc), 5
        )
    return Baseline.of(doc)


@pytest.mark.once
@pytest.mark.parametrize(
    "now, status, said",
    [
        (0.060, UNCHANGED, "within what the baseline's 3 sessions read 53 ms to 70 ms"),
        (0.082, UNCHANGED, "beyond what"),  # +17% past the highest session
        (0.100, REGRESSED, "beyond what"),  # +43% past it
        (0.040, UNCHANGED, "beyond what"),  # -25% past the lowest
    ],
)
def test_a_figure_is_judged_beyond_what_the_baselines_own_sessions_read(now, status, said):
    # multidict's two insert benchmarks (a sleep(0) a call each) read 52.5 and 57.6 ms of system
    # CPU an op in a save and 72-86 ms in A/As: judged against the latest session alone, a quiet
    # A/A failed at +39% and +57%
    base = _saved(0.053, 0.058, 0.070)
    assert [s.kernel["sys_s_per_op"] for s in base.sessions[_rec().key]] == [0.053, 0.058, 0.070]
    got = {v.figure: v for v in kernel_gate.judge(base, [_rec(sys_s=now)]).verdicts}["sys_s"]
    assert got.status == status and said in got.note, kernel_gate.line(got)
    # a baseline that kept its latest session's figures alone judges against them, as before
    alone = {v.figure: v for v in kernel_gate.judge(_saved(0.053), [_rec(sys_s=now)]).verdicts}
    assert alone["sys_s"].status == (REGRESSED if now > 0.053 * 1.3 else UNCHANGED)


@pytest.mark.once
def test_a_save_whose_figure_moved_drops_the_earlier_sessions_figures():
    # a syscall saved away and then put back would read within the span of sessions that measured
    # the old code: the save that moved a figure starts its kernel history again
    doc = None
    for syscalls in (1.24, 1.24, 0.62):  # the third save: half the syscalls
        now = document_from_records([_rec(syscalls=syscalls)], META)
        doc, said = gate.add_session(now, doc and Baseline.of(doc), [_rec(syscalls=syscalls)])
    assert any("syscalls/op moved beyond what the earlier sessions read" in m for m in said)
    base = Baseline.of(doc)
    assert [s.kernel.get("syscalls_per_op") for s in base.sessions[_rec().key]] == [
        0.62,
        None,
        None,
    ]
    back = {v.figure: v for v in kernel_gate.judge(base, [_rec(syscalls=1.24)]).verdicts}
    assert back["syscalls"].status == REGRESSED  # not "within what the baseline's sessions read"


@pytest.mark.once
def test_two_rounds_apart_widen_the_threshold_as_more_rounds_do():
    # a call of seconds has two rounds: multidict's insert read 34 and 71 ms of system CPU
    base, now = _rec(sys_s=0.0525), _rec(sys_s=0.0525 * 1.5)
    base.extra["kernel_rounds"]["sys_s"] = [3.4, 7.1]  # per round of 100 ops
    got = _judge(base, now)["sys_s"]
    assert got.status == UNCHANGED and got.threshold == pytest.approx(3 * 1.85 / 5.25)
    assert _judge(_rec(sys_s=0.0525), now)["sys_s"].status == REGRESSED


@pytest.mark.once
def test_a_kernel_regression_must_show_in_the_second_process_too():
    """A rise one process made (its heap, its neighbours) is gone in the fresh one: the figure
    judged is the lesser of the two sessions'; the code's own rise shows in both."""
    doc = base_of([_rec()], META)
    first = _rec(syscalls=1.24 * 3.33)
    result = gate.compare(doc, [first], META)
    assert gate.suspects(result) == [first.key]  # its test runs again, in a fresh process
    for again, status in ((_rec(), UNCHANGED), (_rec(syscalls=1.24 * 3.2), REGRESSED)):
        both = gate.faster_sessions([first], {first.key: again})
        judged = {v.figure: v for v in gate.compare(doc, both, META).kernel.verdicts}
        assert judged["syscalls"].status == status, judged["syscalls"]


@pytest.mark.once
def test_on_a_busier_machine_threads_scheduler_figures_are_inconclusive_not_regressed():
    def threads(syscalls, foreign_cpu):
        rec = _rec("threading", syscalls=syscalls, vcsw=4.0)
        rec.extra.update(task_kind="thread", foreign_cpu=foreign_cpu)
        return rec

    doc = base_of([threads(21.5, 0.02)], META)
    busy = gate.compare(doc, [threads(21.5 * 1.6, 1.03)], META)  # a busy loop on the other core
    assert not busy.failed and busy.kernel.by_status(INCONCLUSIVE)[0].figure == "syscalls"
    assert "cannot be told from the load" in kernel_gate.line(busy.kernel.verdicts[0])
    assert "1 inconclusive" in kernel_gate.summary(busy.kernel)
    quiet = gate.compare(doc, [threads(21.5 * 1.6, 0.02)], META)  # the same rise on a quiet machine
    assert quiet.failed and quiet.kernel.by_status(REGRESSED)[0].figure == "syscalls"


@pytest.mark.once
def test_on_a_busier_machine_a_suites_own_benchmarks_waits_are_inconclusive_not_regressed():
    """A suite's own benchmark names no model, and may wait on threads of its own (FastAPI's test
    client): beside busy loops that left it less than one free core, an unchanged one read 29 ->
    46 voluntary switches an op. The same rise on a quiet machine is the code's."""

    def own(vcsw, foreign_cpu):
        rec = _rec("-", syscalls=40.0, vcsw=vcsw)
        rec.extra.update(foreign_cpu=foreign_cpu)  # no task kind: no model named
        return rec

    doc = base_of([own(29.0, 0.05)], META)
    busy = gate.compare(doc, [own(45.5, 1.33)], META)
    assert not busy.kernel.failed, [kernel_gate.line(v) for v in busy.kernel.verdicts]
    (waits,) = [v for v in busy.kernel.verdicts if v.figure == "vcsw"]
    assert waits.status == INCONCLUSIVE and "cannot be told from the load" in waits.note
    quiet = gate.compare(doc, [own(45.5, 0.05)], META)
    assert quiet.kernel.failed and quiet.kernel.by_status(REGRESSED)[0].figure == "vcsw"


@pytest.mark.once
def test_a_plain_tests_figures_carry_the_machines_load_as_a_workload_cases_do():
    # 0.3 s of sleeping rounds: long enough for /proc/stat's ticks to tell the load
    from pytest_concurrency import backends
    from pytest_concurrency.measure import driver

    backend = backends.load("threading")
    per_run = driver.KernelPerRun(backend)
    try:
        for _ in range(3):
            backend.run(lambda: threading.Event().wait(0.1))
        got = per_run.figures(last=3)
    finally:
        per_run.close()
    assert len(got["kernel_rounds"]["csw"]) == 3
    assert isinstance(got["foreign_cpu"], float) and 0.0 <= got["foreign_cpu"] <= os.cpu_count()


@pytest.mark.once
def test_preemptions_are_shown_never_judged_and_the_codes_own_waits_are():
    """An overloaded machine preempts any model: involuntary switches follow the neighbours (a
    counted A/A at load 6 read 14 -> 25 switches per op and failed its build), so they are not
    judged, loaded or quiet; a voluntary switch more per hop is the code's, and fails."""

    def light(syscalls, vcsw, icsw, foreign_cpu):
        rec = _rec("asyncio", syscalls=syscalls, vcsw=vcsw, icsw=icsw)
        rec.extra.update(task_kind="light", foreign_cpu=foreign_cpu)
        return rec

    doc = base_of([light(1.24, 0.5, 0.02, 0.05)], META)

    def statuses(rec):
        return {v.figure: v.status for v in gate.compare(doc, [rec], META).kernel.verdicts}

    # other processes kept 1.9 of 2 cores busy: preempted 10 times as often (2 -> 20 a round)
    for foreign_cpu in (1.9, 0.05):
        got = statuses(light(1.24, 0.5, 0.2, foreign_cpu))
        assert got == {f: UNCHANGED for f in ("syscalls", "vcsw", "sys_s", "minflt")}, got
    more = statuses(light(2.24, 1.5, 0.02, 1.9))  # a syscall and a wait more per hop
    assert more["syscalls"] == REGRESSED and more["vcsw"] == REGRESSED


# -- one real session ----------------------------------------------------------------------------

#: A user's own code: a ping-pong over rendezvous channels; EXTRA_SYSCALL adds one syscall per hop.
PING_PONG = """
import os
import sys


def ping_pong(backend, hops=200):
    extra = bool(os.environ.get("EXTRA_SYSCALL"))

    async def pong(ch, back):
        for _ in range(hops):
            await back.put(await ch.get() + 1)

    async def main():
        ch, back = backend.channel(0), backend.channel(0)
        task = backend.spawn(pong, ch, back)
        total = 0
        for _ in range(hops):
            if extra:
                os.getppid()
            await ch.put(total)
            total = await back.get()
        await task.join()
        return total
    return main
"""

WORKLOAD = (
    PING_PONG
    + '''
from pytest_concurrency.workloads import Outcome


class Hops:
    """The ping-pong as a workload of 200 hops."""
    name = "hops"
    unit = "hop"

    def cases(self, scale):
        return [{"hops": 200}]

    def rounds(self, scale):
        return 5, 1

    def unsupported(self, backend, params):
        return None

    def run(self, backend, params):
        assert backend.run(ping_pong(backend, params["hops"])) == params["hops"]
        return Outcome(params["hops"])


HOPS = Hops()
'''
)

TEST = """
import pytest

@pytest.mark.concurrency(workloads=["hops:HOPS"], backends=["asyncio"])
def test_hops(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""


@pytest.mark.slow
@pytest.mark.once  # the time gate is held off (900%): the kernel figures are counts, load or not
@needs_syscalls
def test_one_extra_syscall_per_hop_fails_a_real_session_on_its_kernel_figures(
    pytester, monkeypatch
):
    # three sessions on asyncio, about 2 s each here
    pytester.makepyfile(hops=WORKLOAD, test_hops=TEST)
    base = pytester.path / "base.json"
    pytester.runpytest_subprocess(
        "--benchmark-only", f"--concurrency-save-baseline={base}"
    ).assert_outcomes(passed=1)
    extra = json.loads(base.read_text())["benchmarks"][0]["extra_info"]
    assert (
        extra["kernel_source"]["syscalls"] == "perf_event_open"
        and len(extra["kernel_rounds"]["syscalls"]) == 5
    )

    same = pytester.runpytest_subprocess(
        "--benchmark-only", f"--concurrency-baseline={base}", "--concurrency-threshold=900"
    )  # the kernel gate is judged, not time
    assert same.ret == 0, same.stdout.str()
    monkeypatch.setenv("EXTRA_SYSCALL", "1")
    slow = pytester.runpytest_subprocess(
        "--benchmark-only", f"--concurrency-baseline={base}", "--concurrency-threshold=900"
    )  # the time gate cannot fail it
    out = " ".join(slow.stdout.str().split())
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "Kernel regressions (fail the build):" in out and "syscalls/op" in out


PLAIN = (
    PING_PONG
    + """

def test_my_ping_pong(benchmark, concurrency_backend):
    assert benchmark.pedantic(concurrency_backend.run, args=(ping_pong(concurrency_backend),), rounds=5) == 200
"""
)


@pytest.mark.slow
@pytest.mark.essential
@pytest.mark.once  # as above
@needs_syscalls
def test_a_users_plain_test_gets_kernel_figures_and_its_extra_syscalls_fail(pytester, monkeypatch):
    # three sessions of one plain test on asyncio, about 2 s each here
    pytester.makepyfile(test_plain=PLAIN)
    base = pytester.path / "base.json"
    args = (
        "--benchmark-only",
        "--concurrency-backends=asyncio",
        "--concurrency-threshold=900",
    )  # kernel, not time
    pytester.runpytest_subprocess(*args, f"--concurrency-save-baseline={base}").assert_outcomes(
        passed=1
    )
    extra = json.loads(base.read_text())["benchmarks"][0]["extra_info"]
    assert (
        len(extra["kernel_rounds"]["syscalls"]) == 5 and extra["syscalls_per_op"] >= 0
    )  # per run call
    same = pytester.runpytest_subprocess(*args, f"--concurrency-baseline={base}")
    assert same.ret == 0, same.stdout.str()
    monkeypatch.setenv("EXTRA_SYSCALL", "1")
    slow = pytester.runpytest_subprocess(*args, f"--concurrency-baseline={base}")
    out = " ".join(slow.stdout.str().split())
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, out
    assert (
        "test_my_ping_pong on asyncio:" in out
        and "syscalls/op" in out.split("Kernel regressions")[1]
    )


@pytest.mark.once
def test_threads_judged_on_a_stored_baseline_are_told_what_judges_them_tighter():
    threaded = _rec("threading")
    threaded.extra["task_kind"] = "thread"
    result = kernel_gate.judge(base_of([threaded], META), [threaded])
    ((title, lines),) = kernel_report.sections(result)
    assert title == "Kernel" and lines[0] == "kernel passed: 4 unchanged"
    assert lines[1].startswith(
        "on threads a stored baseline holds syscalls/op to 40%, voluntary context switches/op to 80%"
    )
    assert (
        "--concurrency-against" in lines[1]
        and "at 8%, 25%" in lines[1]
        and lines[1].endswith(": 1 benchmark")
    )
    light = kernel_gate.judge(base_of([_rec()], META), [_rec()])
    assert kernel_gate.loose_note(light) is None  # light tasks are held tightly either way


NOT_IN_LAYOUT_TWO = (
    PING_PONG
    + """

def test_not_in_layout_two(benchmark, concurrency_backend):
    assert '"layout":2' not in " ".join(sys.argv), "fails in the second layout pass only"
    benchmark.pedantic(concurrency_backend.run, args=(ping_pong(concurrency_backend),), rounds=5)
"""
)


@pytest.mark.slow  # a counted session of two plain tests, their kernel pass and two layout passes: 148 s here, loaded
@needs_syscalls
@needs("valgrind", callgrind.unavailable_reason())
def test_a_users_plain_test_counted_gets_kernel_figures_and_other_layouts_from_passes(pytester):
    # the gate judges them as in time mode (the test above) and over layouts (test_stats.py); here: they
    # are there, and they are the test's own; a test failing in one layout pass has the others
    pytester.makepyfile(test_plain=PLAIN, test_other=NOT_IN_LAYOUT_TWO)
    base, out = pytester.path / "base.json", pytester.path / "run.json"
    saved = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-backends=asyncio",
        "--concurrency-measure=instructions",
        "--concurrency-kernel-pass",
        "--concurrency-layouts-from=start",  # (forked: test_forked_layouts.py)
        f"--concurrency-save-baseline={base}",
        f"--benchmark-json={out}",
        "-p",
        "no:cacheprovider",
    )
    saved.assert_outcomes(passed=2)
    assert (
        "kernel figures for 2 benchmarks measured here, from a pass at full speed"
        in saved.stdout.str()
    )
    saved.stdout.fnmatch_lines(
        [
            "*counting in 2 more layouts beside it*median over 3 layouts*",
            "*layout 2's counted pass exited 1: its tests were judged on the layouts that counted them*",
            "*FAILED test_other.py::test_not_in_layout_two*",
            "*2 more layouts counted beside this session*",
        ]
    )
    bench, other = sorted(
        json.loads(base.read_text())["benchmarks"], key=lambda b: "ping_pong" not in b["name"]
    )
    assert len(other["extra_info"]["layouts"]) == 1  # layout 1's; layout 2 failed it
    extra = bench["extra_info"]
    own, others = bench["stats"]["data"], extra["layouts"]  # counted, each in its own process
    assert len(others) == 2 and all(len(rounds) == len(own) == 5 for rounds in others)
    medians = [statistics.median(rounds) for rounds in (own, *others)]
    assert max(medians) / min(medians) < 1.02 and len(set(medians)) == 3, (
        medians
    )  # the same code, landed elsewhere
    assert extra["measure"] == "instructions" and len(extra["kernel_rounds"]["syscalls"]) == 5
    assert (
        300 < extra["syscalls_per_op"] < 5000
    )  # the ping-pong's own (~800 a call), not valgrind's, nor none
    written = json.loads(out.read_text())[
        "benchmarks"
    ]  # the counted session's JSON, not the pass's
    assert [
        (b["extra_info"]["measure"], "syscalls_per_op" in b["extra_info"]) for b in written
    ] == [("instructions", True)] * 2
