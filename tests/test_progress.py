"""The status line of a benchmark run: shown on a terminal, quiet in CI logs and pipes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from pytest_concurrency.report import progress

# version-independent (the progress line): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once

SUITE = """
import pytest

@pytest.mark.concurrency(workloads=["spawn"], backends=["threading", "asyncio"])
def test_case(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""
ARGS = [
    "-m",
    "pytest",
    "-p",
    "no:cacheprovider",
    "--benchmark-only",
    "--concurrency-scale=smoke",
    "--concurrency-rounds=2",
]


def _on_a_terminal(cwd, env, *extra) -> str:
    """Run pytest with a pseudo-terminal as its stdout, as a person at a terminal would."""
    primary, secondary = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, *ARGS, *extra],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def _env(**changes):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(COLUMNS="200", TERM="xterm", **changes)
    return env


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.path


def test_a_terminal_shows_which_benchmark_runs_and_how_far(suite):
    out = _on_a_terminal(suite, _env())
    # smoke spawn has one case: 2 benchmarks, 2 rounds each plus the warm-up
    assert " [1/2] threading: spawn[count=10]" in out, out
    assert " [1/2, round 1/" in out and " [2/2, round 2/" in out, out
    assert re.search(r" \[2/2, round (\d+)/\1\] asyncio: spawn\[count=10\]", out), (
        out
    )  # the last round
    # each status is erased again before pytest writes its result
    assert out.count(progress.SAVE) == 2 and out.count(progress.RESTORE + progress.CLEAR) >= 2


@pytest.mark.parametrize("how", ["CI=true", "-q", "isolated"])
def test_ci_and_quiet_runs_show_no_status_and_isolated_runs_do(suite, how):
    extra = {"-q": ["-q"], "isolated": ["--concurrency-isolate"]}.get(how, [])
    env = _env(CI="true") if how == "CI=true" else _env()
    out = _on_a_terminal(suite, env, *extra)
    if how == "isolated":  # the worker's rounds are reported as they come, then its memory step
        assert (
            " [2/2, round 2/" in out and " [2/2, memory per task] asyncio: spawn[count=10]" in out
        ), out
    else:
        assert progress.SAVE not in out and "[1/2" not in out, out


def test_a_pipe_gets_no_status(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(*ARGS[2:])
    result.assert_outcomes(passed=2)
    assert progress.SAVE not in result.stdout.str() and "[1/2" not in result.stdout.str()
