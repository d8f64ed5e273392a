"""A project's existing benchmark suite, unmodified, is judged: tests that take only
pytest-benchmark's ``benchmark`` fixture, and pytest-codspeed's style (``@pytest.mark.benchmark``
on a test that takes no fixture: its whole body is the measured call). Real sessions, ~2 s each.
"""

from __future__ import annotations

import json

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

def test_not_a_benchmark():
    pass
"""


def test_every_benchmark_of_an_unmodified_suite_is_in_the_baseline(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--strict-markers",
        "-p",
        "no:cacheprovider",
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
    }
    whole = [b for b in doc["benchmarks"] if "whole_body" in b["name"]]
    assert all(len(b["stats"]["data"]) >= 5 for b in whole)  # measured, not run once
    out = result.stdout.str()
    assert "test_suite.py::test_sum [n=10]" in out and "asyncio" in out
    assert " on \n" not in out and "fake" not in out
    result.stdout.fnmatch_lines(["*baseline with 9 benchmarks written to base.json*"])

    again = pytester.runpytest_subprocess(
        "--benchmark-only", "-p", "no:cacheprovider", "--concurrency-baseline=base.json", "-v"
    )
    text = again.stdout.str()
    assert "Gate: " in text and "nothing to judge" not in text
    assert "test_suite.py::test_on_a_loop on asyncio" in text  # each judged, named naturally
    assert "test_suite.py::test_whole_body_param[n=20]" in text
