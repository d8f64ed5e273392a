"""A gate that judged nothing never passes quietly: it exits 8 with one line that says why.

Each case is a real session (runpytest_subprocess, ~1-2 s each) of a suite in which nothing the
gate could judge ran; the baseline file it names is left as it was (or not created).
"""

from __future__ import annotations

import hashlib

import pytest
from conftest import needs

from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.measure import callgrind

# version-independent (exit 8's reasons): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once

BENCH = """
def test_bench(benchmark):
    benchmark(sum, range(100))
"""
PLAIN = """
def test_plain():
    assert sum(range(3)) == 3
"""


def _run(pytester, *args):
    # a short round budget: these sessions are about what is judged, not how well it is timed
    return pytester.runpytest_subprocess(
        "--benchmark-only", "--benchmark-max-time=0.1", "-p", "no:cacheprovider", *args
    )


def _why(result) -> str:
    lines = [line for line in result.stdout.lines if "NOTHING JUDGED" in line]
    assert len(lines) == 1, result.stdout.str()
    return lines[0]


def test_no_test_uses_a_benchmark_fixture(pytester):
    pytester.makepyfile(test_plain=PLAIN)
    result = _run(pytester, "--concurrency-save-baseline=base.json")
    assert result.ret == Exit.NOTHING_JUDGED
    assert "no test uses a benchmark fixture" in _why(result)
    assert not (pytester.path / "base.json").exists()


def test_every_benchmark_test_was_skipped(pytester):
    pytester.makepyfile(
        test_skipped="""
        import pytest

        @pytest.mark.skip(reason="needs the network")
        def test_bench(benchmark):
            benchmark(sum, range(100))
        """
    )
    result = _run(pytester, "--concurrency-save-baseline=base.json")
    assert result.ret == Exit.NOTHING_JUDGED
    assert "all 1 benchmark test were skipped (the first: needs the network)" in _why(result)


def test_every_benchmark_test_was_deselected_and_the_baseline_is_left_as_it_was(pytester):
    pytester.makepyfile(test_bench=BENCH)
    assert _run(pytester, "--concurrency-save-baseline=base.json").ret == 0
    before = hashlib.sha256((pytester.path / "base.json").read_bytes()).hexdigest()
    pytester.makepyfile(test_plain=PLAIN)
    for option in ("--concurrency-save-baseline=base.json", "--concurrency-baseline=base.json"):
        result = _run(pytester, option, "-k", "plain")
        assert result.ret == Exit.NOTHING_JUDGED, result.stdout.str()
        assert "all 1 benchmark test were deselected" in _why(result)
    after = hashlib.sha256((pytester.path / "base.json").read_bytes()).hexdigest()
    assert after == before


def test_every_test_was_deselected(pytester):
    pytester.makepyfile(test_bench=BENCH, test_plain=PLAIN)
    result = _run(pytester, "--concurrency-save-baseline=base.json", "-k", "no_such_test")
    assert result.ret == Exit.NOTHING_JUDGED  # not pytest's 5: the line and the status agree
    assert "all 1 benchmark test were deselected" in _why(result)  # the plain one is no benchmark
    assert not (pytester.path / "base.json").exists()


def test_a_session_that_ran_its_benchmarks_is_judged_as_before(pytester):
    """The exit above is for nothing judged, not for a plain suite's benchmark tests."""
    pytester.makepyfile(test_bench=BENCH)
    result = _run(pytester, "--concurrency-save-baseline=base.json")
    assert result.ret == 0, result.stdout.str()
    assert "NOTHING JUDGED" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*baseline with 1 benchmarks written to base.json*"])


# ~15 s: pip installs the base side, whose code lacks what the tests import; then the two sides
@pytest.mark.slow
def test_a_base_side_that_cannot_collect_is_nothing_judged(pytester):
    base = pytester.path / "base"
    (base / "lib").mkdir(parents=True)
    (base / "lib" / "__init__.py").write_text("__version__ = '1.0'\n")
    pyproject = "[project]\nname = 'lib'\nversion = '{}'\n[tool.setuptools]\npackages = ['lib']\n"
    (base / "pyproject.toml").write_text(pyproject.format("1.0"))
    (pytester.path / "lib").mkdir()
    (pytester.path / "lib" / "__init__.py").write_text("__version__ = '1.1'\ndef new(): return 1\n")
    (pytester.path / "pyproject.toml").write_text(pyproject.format("1.1"))
    pytester.makepyfile(
        test_new="""
        from lib import new

        def test_bench(benchmark):
            benchmark(new)
        """
    )
    result = _run(pytester, "--concurrency-against=base", "--concurrency-backends=asyncio")
    assert result.ret == Exit.NOTHING_JUDGED, result.stdout.str()
    why = _why(result)
    assert "the base side (" in why and "could not collect its tests (exit 2)" in why, why
    assert "cannot import name 'new'" in why, why


@needs("valgrind", callgrind.unavailable_reason())
def test_a_counted_session_that_would_record_nothing_says_so_before_counting(pytester):
    """~3 s: the probe sees only a skipped benchmark, so nothing runs under valgrind."""
    pytester.makepyfile(
        test_skipped="""
        import pytest

        @pytest.mark.skipif("True", reason="not on this machine")
        def test_bench(benchmark):
            benchmark(sum, range(100))
        """
    )
    result = _run(
        pytester, "--concurrency-measure=instructions", "--concurrency-save-baseline=base.json"
    )
    assert result.ret == Exit.NOTHING_JUDGED
    assert "run again under valgrind" not in result.stdout.str()
    assert "all 1 benchmark test were skipped (the first: not on this machine)" in _why(result)


def test_a_baseline_with_no_benchmark_in_common_is_nothing_judged(pytester):
    """~3 s (two sessions): another suite's baseline (or every test renamed) passed with a check
    mark, "0 regressions, 1 new, 1 missing", exit 0."""
    pytester.makepyfile(test_bench=BENCH)
    assert _run(pytester, "--concurrency-save-baseline=base.json").ret == 0
    pytester.makepyfile(test_bench="def test_renamed(benchmark):\n    benchmark(sum, range(100))\n")
    result = _run(pytester, "--concurrency-baseline=base.json", "--concurrency-report-md=r.md")
    assert result.ret == Exit.NOTHING_JUDGED, result.stdout.str()
    why = _why(result)
    assert "base.json has no benchmark in common with this run (1 new, 1 missing" in why, why
    assert "judge against a baseline saved by this suite" in why
    assert ":white_check_mark:" not in (pytester.path / "r.md").read_text()
