"""Isolated workers, timeouts, crashes and leaks, through real pytest runs of real backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import needs

from pytest_concurrency import backends
from pytest_concurrency.measure import callgrind

# A user's own workloads, importable by the worker as "misbehaving:HANG" etc.
MISBEHAVING = '''
import os, sys
from pytest_concurrency.workloads import Outcome


class _Base:
    unit = "call"

    def cases(self, scale):
        return [{"size": 1}]

    def rounds(self, scale):
        return 3, 0

    def unsupported(self, backend, params):
        return None


class Hang(_Base):
    """Waits on a rendezvous channel nobody ever puts to: a real deadlock."""
    name = "hang"

    def run(self, backend, params):
        if backend.family == "async":
            async def main():
                await backend.channel(0).get()
        else:
            def main():
                backend.channel(0).get()
        backend.run(main)
        return Outcome(1)


class Crash(_Base):
    name = "crash"

    def run(self, backend, params):
        print("about to die", file=sys.stderr, flush=True)
        os._exit(3)


class Segfault(_Base):
    name = "segfault"

    def run(self, backend, params):
        import ctypes
        ctypes.string_at(0)


class Fine(_Base):
    name = "fine"

    def run(self, backend, params):
        return Outcome(1)


HANG, CRASH, SEGFAULT, FINE = Hang(), Crash(), Segfault(), Fine()
'''

CASES_TEST = """
import pytest

@pytest.mark.concurrency(workloads={workloads!r})
def test_case(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""


def _suite(pytester, *workloads):
    pytester.makepyfile(misbehaving=MISBEHAVING)
    pytester.makepyfile(test_cases=CASES_TEST.format(workloads=list(workloads)))


@pytest.mark.once
def test_isolated_hang_fails_that_benchmark_and_the_session_goes_on(pytester):
    _suite(pytester, "misbehaving:HANG", "misbehaving:FINE")
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-isolate",
        "--concurrency-timeout=1",
        "--concurrency-backends=threading,asyncio",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(failed=2, passed=2)
    result.stdout.fnmatch_lines(
        [
            "*hang[[]size=1] on threading: a round did not finish within 1 s; the worker and its task processes were killed*",
            "*hang[[]size=1] on asyncio: a round did not finish within 1 s*",
        ]
    )


@pytest.mark.parametrize(
    "spec",
    [
        "asyncio",
        "gevent",
        "threading",
        *(
            pytest.param(s, marks=pytest.mark.slow)
            for s in ("greenlet", "eventlet", "uvloop", "trio", "anyio[trio]")
        ),
    ],
)
def test_in_process_deadlock_fails_instead_of_hanging(pytester, spec):
    if backends.unavailable_reason(spec):
        pytest.skip(backends.unavailable_reason(spec))
    _suite(pytester, "misbehaving:HANG")
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-timeout=2", f"--concurrency-backends={spec}"
    )
    result.assert_outcomes(failed=1)
    # gevent and our greenlet scheduler see the deadlock themselves; asyncio needs the watchdog
    assert any(
        marker in result.stdout.str()
        for marker in ("did not finish a round within 2 s", "LoopExit", "Deadlock")
    ), result.stdout.str()


@pytest.mark.once
def test_worker_crash_reports_exit_status_and_stderr(pytester):
    _suite(pytester, "misbehaving:CRASH", "misbehaving:SEGFAULT", "misbehaving:FINE")
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-isolate", "--concurrency-backends=asyncio"
    )
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*crash[[]size=1] on asyncio: worker for asyncio ended without a reply: exit status 3*",
            "about to die",
            "*segfault[[]size=1] on asyncio: worker for asyncio ended without a reply: killed by signal 11*",
        ]
    )


@pytest.mark.slow
def test_isolated_records_match_in_process_records(pytester, tmp_path):
    pytester.makepyfile(test_cases=CASES_TEST.format(workloads=["ring", "spawn"]))
    docs = {}
    for mode in ("in-process", "isolated"):
        out = tmp_path / f"{mode}.json"
        args = [
            "--benchmark-only",
            "--concurrency-scale=smoke",
            "--concurrency-backends=threading,asyncio",
            f"--benchmark-json={out}",
        ]
        if mode == "isolated":
            args.append("--concurrency-isolate")
        pytester.runpytest_subprocess(*args).assert_outcomes(passed=6)  # ring x2 cases, spawn
        docs[mode] = {b["name"]: b for b in json.loads(out.read_text())["benchmarks"]}
    assert docs["in-process"].keys() == docs["isolated"].keys()
    for name, local in docs["in-process"].items():
        remote = docs["isolated"][name]
        assert remote["extra_info"].pop("isolated") is True
        remote["extra_info"].pop("worker_wall_s")
        assert local["extra_info"].keys() == remote["extra_info"].keys()
        for key in ("backend", "workload", "params", "ops", "unit"):
            assert local["extra_info"][key] == remote["extra_info"][key]
        assert local["stats"]["rounds"] == remote["stats"]["rounds"]
        assert local["group"] == remote["group"]


def test_patched_variants_run_the_io_workload_on_stdlib_sockets(pytester):
    specs = [
        s for s in ("gevent[patched]", "eventlet[patched]") if not backends.unavailable_reason(s)
    ]
    if not specs:
        pytest.skip("neither gevent nor eventlet installed")
    pytester.makepyfile(test_cases=CASES_TEST.format(workloads=["io"]))
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-scale=smoke",
        "--concurrency-isolate",
        "-rs",
        f"--concurrency-backends={','.join(specs)}",
    )
    result.assert_outcomes(passed=2 * len(specs))  # the timer and the tcp case
    without = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-scale=smoke", "-rs", f"--concurrency-backends={specs[0]}"
    )
    without.assert_outcomes(skipped=2)
    without.stdout.fnmatch_lines(
        ["*monkey-patches the whole process: run it with --concurrency-isolate*"]
    )


@pytest.mark.once
def test_isolated_users_tests_that_exit_crash_stall_or_leak_fail_alone(pytester, tmp_path):
    """--concurrency-isolate runs each of a user's plain tests in a child of its own: one that ends
    its process, segfaults, never returns or leaves a thread running is reported, the session goes
    on and ends, and what the good ones measured is recorded as usual. (One session, ~6 s.)"""
    pytester.makepyfile(test_hostile=(Path(__file__).parent / "data" / "hostile.py").read_text())
    out = tmp_path / "bench.json"
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-isolate",
        "--concurrency-timeout=1",
        "--concurrency-backends=threading",
        "-p",
        "no:randomly",
        f"--benchmark-json={out}",
        "-rs",
        "-k",
        "not 2gb and not 100mb",
    )  # slow, not hostile here
    result.assert_outcomes(
        passed=2, failed=4, skipped=1, warnings=1
    )  # not "the fixture was not used"
    result.stdout.fnmatch_lines_random(
        [
            "*test_exits?threading?: the test's process ended without a result: exit status 3*",
            "*leaving now*",
            "*test_segfaults?threading?: the test's process ended without a result: killed by signal 11 (SIGSEGV)*",
            "*test_never_returns?threading?: for 3.1 s no backend.run call ended and the test did not return*",
            '*test_hostile.py", line 3? in test_never_returns*',  # its stack, dumped before it was killed
            "*test_leaks_a_thread?threading?: the test left non-daemon threads running (left-behind)*",
            "*assert 499500 == 1*",  # pytest's own report of the assertion, rewritten in the child
            "*not today*",
        ]
    )
    records = {b["name"]: b for b in json.loads(out.read_text())["benchmarks"]}
    # as in-process, a test that failed after its rounds keeps them
    assert sorted(records) == [
        "test_fails[threading]",
        "test_fine[threading]",
        "test_leaks_a_thread[threading]",
    ]
    for name, rounds in (
        ("test_fine[threading]", 5),
        ("test_leaks_a_thread[threading]", 3),
        ("test_fails[threading]", 2),
    ):
        record = records[name]
        assert len(record["stats"]["data"]) == rounds
        assert record["extra_info"]["backend"] == "threading"
        assert record["extra_info"]["csw_per_op"] is not None  # read in the child, around its calls


@pytest.mark.once
def test_in_process_a_stalled_test_fails_and_a_thread_left_running_is_named(pytester):
    """In the session's process, a test stalled outside ``backend.run`` fails once no run call has
    ended for the silence deadline (1 s timeout: 3.1 s), naming where it waited; one that leaves a
    non-daemon thread waiting for ever gets a warning, the session says whose thread it is, and the
    process exits without it after the same bound, with the session's status (~8 s)."""
    pytester.makepyfile("""
        import threading, time

        def test_leaks(benchmark, concurrency_backend):
            threading.Thread(target=threading.Event().wait, name="left-behind").start()
            benchmark.pedantic(concurrency_backend.run, args=(lambda: None,), rounds=2)

        def test_stalls(benchmark, concurrency_backend):
            benchmark.pedantic(concurrency_backend.run, args=(lambda: None,), rounds=2)
            threading.Event().wait()

        def test_after(benchmark, concurrency_backend):
            benchmark.pedantic(concurrency_backend.run, args=(lambda: None,), rounds=2)
    """)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-backends=threading",
        "--concurrency-timeout=1",
        timeout=60,
    )
    result.assert_outcomes(passed=2, failed=1, warnings=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*test_stalls?threading? did not return, nor end a backend.run call, within 3.1 s*",
            "*in test_stalls: threading.Event().wait()",
            "*test_leaks?threading?: the test left non-daemon threads running (left-behind)*",
            "pytest-concurrency: tests left threads running (left-behind); Python waits for them before this "
            "process exits, here for at most 3.1 s of them (then it exits without them).*",
        ]
    )
    result.stderr.fnmatch_lines(
        [
            "pytest-concurrency: threads users' tests left (left-behind) still run 3.1 s "
            "after the session: exiting without them, status 1"
        ]
    )


LEAKS_A_THREAD = """
import threading

def test_leaks(benchmark):
    threading.Thread(target=threading.Event().wait, name="left-behind").start()
    benchmark.pedantic(sum, args=(range(100),), rounds=3)
"""


@pytest.mark.once
def test_a_suites_own_benchmark_test_that_leaves_a_thread_is_named_and_not_waited_for(pytester):
    """~4 s: a test with only pytest-benchmark's fixture (no model, so no run call to watch) that
    leaves a thread waiting for ever: warned about by name, and the process exits without it."""
    pytester.makepyfile(LEAKS_A_THREAD)
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-timeout=1", timeout=60
    )
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*test_leaks: the test left non-daemon threads running (left-behind); the session's "
            "process waits for them at most 3.1 s when it exits*"
        ]
    )
    result.stderr.fnmatch_lines(["*threads users' tests left (left-behind) still run 3.1 s*"])


@pytest.mark.slow  # ~90 s: its kernel pass and counted session each wait out the 30 s
@needs("valgrind", callgrind.unavailable_reason())
def test_a_counted_session_waits_for_a_left_thread_no_longer_than_a_timed_one(pytester):
    """Counted, the round timeout is 1200 s by default, and the exit once waited that long for a
    thread a test left; the bound is now the same 30 s in every role (plain_tests.EXIT_WAIT_S)."""
    pytester.makepyfile(LEAKS_A_THREAD)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-layouts=1",
        "-p",
        "no:cacheprovider",
        timeout=400,
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*left non-daemon threads running (left-behind)*at most 30 s*"])
    assert "still run 30 s after the session" in result.stderr.str() + result.stdout.str()


LEAK_CONFTEST = """
import atexit, json, os, threading
import psutil

_me = psutil.Process()
_before = {"fds": _me.num_fds()}

@atexit.register
def _report():
    after = {
        "fds": _me.num_fds(),
        "threads": threading.active_count(),
        "children": [c.cmdline() for c in _me.children(recursive=True)],
        "sockets": len(_me.net_connections(kind="inet")),
    }
    with open(os.environ["LEAK_REPORT"], "w") as fh:
        json.dump({"before": _before, "after": after}, fh)
"""


# Both in the slow tier. Each variant once stalled for the whole 120 s round timeout on a
# multiprocessing[fork] round under parallel load. The in-process one's cause (likely the other's):
# a child forked while a feeder thread of the round before still freed its state under tracemalloc
# (backends/_multiprocessing._left_the_os).
# The in-process one took 26-30 s of the fast tier's run: essential, the only no-leak session.
@pytest.mark.once
@pytest.mark.parametrize(
    "isolate",
    [
        pytest.param(True, marks=pytest.mark.slow),
        pytest.param(False, marks=[pytest.mark.slow, pytest.mark.essential]),
    ],
    ids=["isolated", "in-process"],
)
def test_no_leaked_threads_processes_sockets_or_fds(pytester, tmp_path, isolate, monkeypatch):
    tag = uuid.uuid4().hex
    report = tmp_path / "leaks.json"
    monkeypatch.setenv("LEAK_REPORT", str(report))
    monkeypatch.setenv("PYTEST_CONCURRENCY_LEAK_TAG", tag)
    pytester.makeconftest(LEAK_CONFTEST)
    pytester.makepyfile(test_cases=CASES_TEST.format(workloads=["ring", "io", "spawn"]))
    specs = "threading,multiprocessing[fork],asyncio"
    args = ["--benchmark-only", "--concurrency-scale=smoke", f"--concurrency-backends={specs}"]
    if isolate:
        args.append("--concurrency-isolate")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 0, result.stdout.str()
    data = json.loads(report.read_text())
    assert data["after"]["children"] == []
    assert data["after"]["threads"] == 1
    assert data["after"]["sockets"] == 0
    assert data["after"]["fds"] <= data["before"]["fds"]
    survivors = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("PYTEST_CONCURRENCY_LEAK_TAG") == tag:
                survivors.append(proc.cmdline())
        except (psutil.Error, OSError):
            continue
    assert survivors == []


HOSTILE = (Path(__file__).parent / "data" / "hostile.py").read_text()


@pytest.fixture(scope="module")
def saved_baseline(tmp_path_factory) -> bytes:
    """A time baseline of hostile.py's good test, saved once for the tests below (~3 s)."""
    where = tmp_path_factory.mktemp("saved")
    (where / "test_hostile.py").write_text(HOSTILE)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only", "-q"]
        + ["-k", "test_fine", "--concurrency-backends=threading"]
        + [f"--concurrency-save-baseline={where / 'b.json'}", "test_hostile.py"],
        cwd=where,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")},
        capture_output=True,
        check=True,
        timeout=300,
    )
    return (where / "b.json").read_bytes()


@pytest.mark.once
@pytest.mark.parametrize("test, status", [("test_exits", 3), ("test_segfaults", -11)])
def test_in_process_a_test_that_ends_the_sessions_process_is_named_by_its_watcher(
    pytester, watched_session, saved_baseline, test, status
):
    """~4 s each, and ~6 s once for the baseline: in time mode, a test that called ``os._exit`` or
    segfaulted ended the session with its own status and not a word saying which test it was
    (roles/watcher.py)."""
    pytester.makepyfile(test_hostile=HOSTILE)
    (pytester.path / "b.json").write_bytes(saved_baseline)
    ended = watched_session(
        "--benchmark-only",
        "-k",
        f"test_fine or {test}",
        "--concurrency-backends=threading",
        "--concurrency-save-baseline=b.json",
        "--concurrency-report-md=r.md",
    )
    said = [line for line in ended.err.splitlines() if "pytest-concurrency" in line]
    nodeid = f"test_hostile.py::{test}[threading]"
    assert ended.status == status, ended
    assert said == [
        f"pytest-concurrency: {nodeid} ended the session's process (os._exit, a fatal signal such "
        "as SIGSEGV, or a kill), so it wrote no baseline, report or verdict: fix the test "
        "(--concurrency-isolate runs it in a process of its own, where it fails alone), or "
        f"deselect it (--deselect {nodeid})"
    ], ended
    assert "Traceback (most recent call last)" not in ended.err, ended  # faulthandler's is not ours
    assert (pytester.path / "b.json").read_bytes() == saved_baseline
    assert not (pytester.path / "r.md").exists()


BENCHMARK_ONLY = """
import ctypes
import os

def test_exits(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)
    os._exit(3)

def test_segfaults(benchmark):
    benchmark.pedantic(ctypes.string_at, args=(0,), rounds=1)
"""


@pytest.mark.once
def test_a_test_with_benchmark_alone_that_ends_the_process_is_named(pytester, watched_session):
    """~2 s: in the session's process, a test with pytest-benchmark's ``benchmark`` alone that ends
    the process is named by the watcher, with its own status."""
    pytester.makepyfile(test_bench=BENCHMARK_ONLY)
    ended = watched_session("--benchmark-only", "-k", "test_exits")
    said = [line for line in ended.err.splitlines() if "pytest-concurrency" in line]
    nodeid = "test_bench.py::test_exits"
    assert ended.status == 3, ended
    assert said == [
        f"pytest-concurrency: {nodeid} ended the session's process (os._exit, a fatal signal such "
        "as SIGSEGV, or a kill), so it wrote no baseline, report or verdict: fix the test "
        "(--concurrency-isolate runs it in a process of its own, where it fails alone), or "
        f"deselect it (--deselect {nodeid})"
    ], ended


@pytest.mark.once
def test_isolated_a_test_with_benchmark_alone_that_exits_or_segfaults_fails_alone(pytester):
    """~4 s: --concurrency-isolate forked only the tests that take ``concurrency_backend``, though
    its help said each of your own benchmark tests; one with pytest-benchmark's ``benchmark`` alone
    that called ``os._exit(3)`` or segfaulted ended the whole session (exit 3 or 139) and the tests
    after it never ran. Now each fails alone, by name, and what the others measured is recorded."""
    pytester.makepyfile(test_bench=BENCHMARK_ONLY + AFTER)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-isolate",
        "-p",
        "no:randomly",
        f"--benchmark-json={pytester.path / 'b.json'}",
        timeout=180,
    )
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines_random(
        [
            "*test_bench.py::test_exits: the test's process ended without a result: exit status 3*",
            "*test_bench.py::test_segfaults: the test's process ended without a result: killed by "
            "signal 11 (SIGSEGV)*",
        ]
    )
    (record,) = json.loads((pytester.path / "b.json").read_text())["benchmarks"]
    assert record["name"] == "test_after" and len(record["stats"]["data"]) == 5
    # measured in the child, with its controls and kernel figures; per iteration (not divided by
    # the iterations twice): a sleep of 10 ms takes 10 ms or more
    assert record["stats"]["iterations"] == 2 and min(record["stats"]["data"]) >= 0.01
    assert "control_factor" in record["extra_info"] and "csw_per_op" in record["extra_info"]


AFTER = """
import time

def test_after(benchmark):
    benchmark.pedantic(time.sleep, args=(0.01,), rounds=5, iterations=2)
"""


STOPS = """
import pytest

def test_stops(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)
    pytest.exit("enough")
"""


@pytest.mark.once
@pytest.mark.parametrize(
    "args, status",
    [
        (["-k", "test_fine"], pytest.ExitCode.OK),
        (["-k", "test_fine or test_fails"], pytest.ExitCode.TESTS_FAILED),
        (["-x", "-k", "test_fine or test_fails or test_skips"], pytest.ExitCode.TESTS_FAILED),
        (["-k", "test_fine or test_stops"], pytest.ExitCode.INTERRUPTED),
    ],
    ids=["passed", "a-test-failed", "stopped-by--x", "pytest.exit"],
)
def test_in_process_a_session_that_ends_as_sessions_do_has_a_silent_watcher(
    pytester, watched_session, args, status
):
    """~4 s each (one session, no baseline: its calibration would double that): the watcher
    speaks only when the session's process is gone without its end."""
    pytester.makepyfile(test_hostile=HOSTILE, test_stop=STOPS)
    ended = watched_session("--benchmark-only", "--concurrency-backends=threading", *args)
    assert ended.status == status, ended
    assert ended.watcher is not None and not ended.watcher_alive, ended
    assert "ended the session's process" not in ended.err, ended
    assert "the session's process ended" not in ended.err, ended
