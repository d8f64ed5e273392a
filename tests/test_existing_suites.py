"""A project's existing benchmark suite, unmodified, is judged: tests that take only
pytest-benchmark's ``benchmark`` fixture, and pytest-codspeed's style (``@pytest.mark.benchmark``
on a test that takes no fixture: its whole body is the measured call). Real sessions, ~2 s each.
"""

from __future__ import annotations

import json

import pytest
from conftest import need

# version-independent (the plugin's reading of third-party suites): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once

SUITE = """
import asyncio
import pytest

@pytest.fixture(params=["pyloop", "threads"])
def loop(request):
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()

def test_sort(benchmark):
    benchmark.pedantic(sorted, args=(list(range(500, 0, -1)),), rounds=5)

@pytest.mark.parametrize("n", [10, 100])
def test_sum(benchmark, n):
    benchmark.pedantic(sum, args=(range(n),), rounds=5)

def test_on_a_loop(benchmark, loop):
    async def work():
        await asyncio.sleep(0)
    benchmark.pedantic(lambda: loop.run_until_complete(work()), rounds=5)

@pytest.mark.benchmark
def test_whole_body():
    assert sum(range(1000)) == 499500

@pytest.mark.benchmark
@pytest.mark.parametrize("n", [10, 20])
def test_whole_body_param(n):
    sorted(range(n, 0, -1))

@pytest.mark.benchmark(group="settings", min_rounds=3)
def test_benchmarks_own_marker(benchmark):
    benchmark(sum, range(10))

class Fast:
    def __str__(self):
        return "c"

class Slow:
    def __str__(self):
        return "py"

# multidict's shape: an implementation (an object) as a parameter, its id its str()
@pytest.fixture(params=[Fast(), Slow()], ids=str)
def implementation(request):
    return request.param

@pytest.mark.parametrize("kind", ["cs"])
def test_on_an_implementation(benchmark, implementation, kind):
    benchmark.pedantic(sorted, args=(range(50 if str(implementation) == "c" else 5000),), rounds=5)

def test_not_a_benchmark():
    pass
"""


@pytest.mark.slow
@pytest.mark.essential
def test_every_benchmark_of_an_unmodified_suite_is_in_the_baseline(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--strict-markers",
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0.05",  # 11 benchmarks, 1 s each by default: not the subject
        "--concurrency-save-baseline=base.json",
    )
    assert result.ret == 0, result.stdout.str()
    doc = json.loads((pytester.path / "base.json").read_text())
    keys = {
        (
            b["extra_info"]["workload"],
            json.dumps(b["extra_info"]["params"], sort_keys=True),
            b["extra_info"]["backend"],
        )
        for b in doc["benchmarks"]
    }
    assert keys == {
        ("test_suite.py::test_sort", "{}", ""),
        ("test_suite.py::test_sum", '{"n": 10}', ""),
        ("test_suite.py::test_sum", '{"n": 100}', ""),
        ("test_suite.py::test_on_a_loop", "{}", "asyncio"),  # the loop fixture's id names it
        ("test_suite.py::test_on_a_loop", "{}", "threading"),
        ("test_suite.py::test_whole_body", "{}", ""),
        ("test_suite.py::test_whole_body_param", '{"n": 10}', ""),
        ("test_suite.py::test_whole_body_param", '{"n": 20}', ""),
        ("test_suite.py::test_benchmarks_own_marker", "{}", ""),
        # an object parameter: the test's id in its params, or the two were one benchmark
        ("test_suite.py::test_on_an_implementation", '{"id": "c-cs", "kind": "cs"}', ""),
        ("test_suite.py::test_on_an_implementation", '{"id": "py-cs", "kind": "cs"}', ""),
    }
    whole = [b for b in doc["benchmarks"] if "whole_body" in b["name"]]
    assert all(len(b["stats"]["data"]) >= 5 for b in whole)  # measured, not run once
    out = result.stdout.str()
    assert "test_suite.py::test_sum [n=10]" in out and "asyncio" in out
    assert " on \n" not in out and "fake" not in out
    result.stdout.fnmatch_lines(["*baseline with 11 benchmarks written to base.json*"])

    # 100%: an A/A's noise on a loaded machine never reaches it; judged by the C test's rounds,
    # the pure-Python one read +5669%
    again = pytester.runpytest_subprocess(
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0.05",
        "--concurrency-threshold=100",
        "--concurrency-baseline=base.json",
        "-v",
    )
    text = again.stdout.str()
    assert "Gate: " in text and "nothing to judge" not in text
    assert "test_suite.py::test_on_a_loop on asyncio" in text  # each judged, named naturally
    assert "test_suite.py::test_whole_body_param[n=20]" in text
    assert "twice" not in text and "REGRESSED" not in text, text  # the py one judged by itself


SYSCALLS = """
import os

CALLS = int(os.environ["CALLS"])

def few_syscalls():
    for _ in range(CALLS):
        os.getpid()

def test_pid(benchmark):
    benchmark.pedantic(few_syscalls, rounds=300, iterations=20)
"""


@pytest.mark.slow
def test_a_suite_s_own_test_has_kernel_figures_and_the_kernel_gate_judges_them(
    pytester, monkeypatch
):
    """Read around pytest-benchmark's rounds, in groups (measure/driver.KernelPerRounds): one
    getpid a call reads one syscall a call, and three read as a regression. ~6 s."""
    pytester.makepyfile(test_pids=SYSCALLS)
    args = ("--benchmark-only", "-p", "no:cacheprovider")
    monkeypatch.setenv("CALLS", "1")
    saved = pytester.runpytest_subprocess(*args, "--concurrency-save-baseline=base.json")
    assert saved.ret == 0, saved.stdout.str()
    (extra,) = [
        b["extra_info"] for b in json.loads((pytester.path / "base.json").read_text())["benchmarks"]
    ]
    need(
        "tracefs (perf's syscall events)",
        None
        if extra["kernel_source"].get("syscalls") == "perf_event_open"
        else f"syscalls are not counted on this machine: {extra.get('kernel_note')}",
    )
    assert extra["syscalls_per_op"] == 1.0
    assert extra["kernel_round_ops"] % 20 == 0  # whole rounds of 20 calls
    assert len(extra["kernel_rounds"]["syscalls"]) >= 10

    monkeypatch.setenv("CALLS", "3")
    judged = pytester.runpytest_subprocess(*args, "--concurrency-baseline=base.json")
    text = judged.stdout.str()
    assert judged.ret == 1, text
    assert "syscalls/op" in text and "regressed" in text, text


CODSPEED_SUITE = """
import pytest
from pytest_codspeed import BenchmarkFixture

@pytest.mark.benchmark
def test_whole_body():
    assert sum(range(1000)) == 499500

def test_typed(benchmark: BenchmarkFixture):
    assert benchmark(sorted, range(100, 0, -1))[0] == 1
"""


@pytest.mark.slow
@pytest.mark.essential
def test_a_pytest_codspeed_suite_runs_as_it_is_with_pytest_codspeed_installed(
    pytester, monkeypatch
):
    """pytest-codspeed installed and not enabled: its ``benchmark`` marker and its fixture's type
    are the suite's, pytest-benchmark measures, and every test is judged; with ``--codspeed``
    pytest-codspeed measures and the gate says it has nothing of pytest-benchmark's to judge
    (exit 8). Three real sessions, ~4 s."""
    pytest.importorskip("pytest_codspeed")
    pytester.makepyfile(test_codspeed_style=CODSPEED_SUITE)
    # how many rounds is not the subject: pytest-benchmark's 1 s a test, and pytest-codspeed's
    # warm-up and 3 s, made this test 40 s under xdist on a loaded machine
    args = ("--benchmark-only", "-p", "no:cacheprovider", "--strict-markers")
    args += ("--benchmark-max-time=0.05",)
    saved = pytester.runpytest_subprocess(*args, "--concurrency-save-baseline=base.json")
    assert saved.ret == 0, saved.stdout.str()
    names = {
        b["extra_info"]["workload"]
        for b in json.loads((pytester.path / "base.json").read_text())["benchmarks"]
    }
    assert names == {
        "test_codspeed_style.py::test_whole_body",
        "test_codspeed_style.py::test_typed",
    }
    judged = pytester.runpytest_subprocess(*args, "--concurrency-baseline=base.json", "-v")
    assert "Gate: " in judged.stdout.str() and "nothing to judge" not in judged.stdout.str()

    # with a gate's option, --codspeed is the suite's, and the gate measures (below); under
    # CodSpeed's runner (CODSPEED_ENV) pytest-codspeed measures, and nothing is judged
    monkeypatch.setenv("CODSPEED_ENV", "1")
    monkeypatch.setenv("CODSPEED_RUNNER_MODE", "walltime")
    enabled = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--concurrency-baseline=base.json",
        "--codspeed-warmup-time=0", "--codspeed-max-time=0.05",
    )  # (pytest-codspeed refuses --benchmark-only beside it)  # fmt: skip
    assert enabled.ret == 8, enabled.stdout.str()
    assert "unset CODSPEED_ENV" in enabled.stdout.str()


#: FastAPI 0.165's tests/benchmarks modules, in small: skipped unless --codspeed is on the command line
ONLY_UNDER_CODSPEED = """
import sys
import pytest

if "--codspeed" not in sys.argv:
    pytest.skip("Benchmark tests are skipped by default; run with --codspeed.", allow_module_level=True)

def test_sum(benchmark):
    assert benchmark(sum, range(1000)) == 499500
"""


# three real sessions each: a save and an A/A with --codspeed, with pytest-codspeed active, then
# blocked; and without a gate's option, pytest-codspeed's own run (CPU: see the commit)
@pytest.mark.slow
@pytest.mark.parametrize(
    "codspeed", [pytest.param("installed", marks=pytest.mark.essential), "blocked"]
)
def test_a_suite_that_runs_only_under_codspeed_is_judged_with_a_gates_option(pytester, codspeed):
    """Such a suite skipped everything without --codspeed (nothing judged, exit 8) and, with it,
    pytest-codspeed measured and switched pytest-benchmark off (exit 8). With a gate's option,
    --codspeed is the suite's: pytest-codspeed's measurement is off (or, not active, the plugin
    accepts the flag), and the gate saves and judges pytest-benchmark's rounds."""
    pytest.importorskip("pytest_codspeed")
    pytester.makepyfile(test_only_under_codspeed=ONLY_UNDER_CODSPEED)
    args = [
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0.05",
        "--strict-markers",
        "-W",
        "error",
    ]
    args += ["--codspeed", *(["-p", "no:codspeed"] if codspeed == "blocked" else [])]
    said = (
        "--codspeed left to the suite's own checks of the command line: pytest-codspeed does not "
        "measure in this run, the gate does"
        if codspeed == "installed"
        else "--codspeed accepted for the suite's own checks (pytest-codspeed is not active)"
    )
    saved = pytester.runpytest_subprocess(*args, "--concurrency-save-baseline=base.json")
    out = saved.stdout.str()
    assert saved.ret == 0, out
    assert said in " ".join(out.split()), out
    (bench,) = json.loads((pytester.path / "base.json").read_text())["benchmarks"]
    assert bench["extra_info"]["workload"] == "test_only_under_codspeed.py::test_sum"
    judged = pytester.runpytest_subprocess(*args, "--concurrency-baseline=base.json")
    out = " ".join(judged.stdout.str().split())
    assert judged.ret in (0, 1), out  # judged: the verdict is time's, on a loaded machine
    assert "Gate: " in out and "test_only_under_codspeed.py::test_sum" in out, out
    assert "1 passed" in out and "skipped" not in out, out
    # without a gate's option --codspeed is as it was: pytest-codspeed's, or an unknown option
    if codspeed == "installed":
        alone = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--codspeed", "--codspeed-warmup-time=0",
            "--codspeed-max-time=0.05",
        )  # fmt: skip
        out = alone.stdout.str()
        assert alone.ret == 0 and "codspeed: " in out and "(enabled" in out, out
        assert "concurrency benchmarks" not in out, out
    else:
        alone = pytester.runpytest_subprocess("--codspeed", "-p", "no:codspeed")
        assert alone.ret == pytest.ExitCode.USAGE_ERROR, alone.stderr.str()
