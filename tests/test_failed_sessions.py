"""A session in which a benchmark test failed writes no baseline: the file stays byte-identical.

A baseline saved without the failed test's rounds would hold one benchmark less, and after
``--concurrency-baseline-sessions`` such saves it would be gone; so the save is refused, with
one line naming the failed tests (docs/gates/time.md, "Saving").
"""

from __future__ import annotations

import hashlib

import pytest
from conftest import needs

from pytest_concurrency.measure import callgrind

# version-independent (what a failed session leaves): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once

TESTS = """
import os

def test_steady(benchmark):
    benchmark.pedantic(sum, args=(range(1000),), rounds=5)

def test_breaks(benchmark):
    benchmark.pedantic(sum, args=(range(1000),), rounds=5)
    assert not os.environ.get("BREAK_IT"), "broken on purpose"
"""


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _save_then_fail(pytester, monkeypatch, *args):
    pytester.makepyfile(test_two=TESTS)
    save = ("--benchmark-only", "-p", "no:cacheprovider", "--concurrency-save-baseline=base.json")
    assert pytester.runpytest_subprocess(*save, *args).ret == 0
    before = _sha(pytester.path / "base.json")
    monkeypatch.setenv("BREAK_IT", "1")
    result = pytester.runpytest_subprocess(*save, *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ERROR: no baseline written to base.json: 1 benchmark test failed "
            "(test_two.py::test_breaks)*left as it was*"
        ]
    )
    assert _sha(pytester.path / "base.json") == before
    assert "benchmarks written to" not in result.stdout.str()


def test_a_failed_benchmark_test_leaves_the_baseline_as_it_was(pytester, monkeypatch):
    """~3 s: two time sessions."""
    _save_then_fail(pytester, monkeypatch)


@pytest.mark.slow  # ~40 s: two counted sessions (one layout) of two tiny tests under valgrind
@needs("valgrind", callgrind.unavailable_reason())
def test_a_failed_counted_benchmark_test_leaves_the_baseline_as_it_was(pytester, monkeypatch):
    _save_then_fail(
        pytester, monkeypatch, "--concurrency-measure=instructions", "--concurrency-layouts=1"
    )
