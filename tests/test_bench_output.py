"""What the benchmark suite prints (``tox -e bench``): pytest's header, the comparison tables and
the summary in a 100-column CI log, pytest-benchmark's wide table only when asked for.

One real smoke-scale session of the suite's rings and IO cases on asyncio, as a CI log gets it
(no terminal, 100 columns), and a second of its rings with ``--concurrency-benchmark-table``:
a few seconds each at rest (3.5 s of CPU the first; 135 s by the clock beside five busy helpers).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# version-independent (the suite's output): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 100
WIDE_TABLE = "benchmark 'ring["  # pytest-benchmark's heading of a group's table


def _session(tmp_path, *extra) -> tuple[str, dict]:
    out = tmp_path / "run.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks",
            "--benchmark-only",
            "--concurrency-scale=smoke",
            "--concurrency-backends=asyncio",
            "-k",
            "ring or io",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'tmp'}",
            f"--benchmark-json={out}",
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": str(WIDTH), "CI": "true"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run.stdout, json.loads(out.read_text())


def test_the_suites_output_fits_100_columns_without_pytest_benchmarks_table(tmp_path):
    said, recorded = _session(tmp_path)
    # every line, pytest's header too: its plugins' lines are wrapped, none left out
    # (pytest-benchmark's defaults line alone is 176 columns)
    wide = [line for line in said.splitlines() if len(line) > WIDTH]
    assert not wide, f"{len(wide)} lines over {WIDTH} columns:\n" + "\n".join(wide)
    assert "warmup_iterations=" in said and "\nplugins: concurrency-bench" in said
    assert WIDE_TABLE not in said
    passed = int(re.search(r"(\d+) passed", said).group(1))
    assert f"pytest-benchmark's table: {passed} workload cases left out (--concurrency-" in said
    assert "\nring [capacity=0,m=50,n=10]\n" in said  # the comparison table is there
    # smoke scale plans 5 rounds, fewer than the stopping rule's least: every one runs
    assert {b["stats"]["rounds"] for b in recorded["benchmarks"]} == {5}


def test_pytest_benchmarks_table_when_asked_for(tmp_path):
    said, _ = _session(tmp_path, "--concurrency-benchmark-table", "-k", "ring")
    assert WIDE_TABLE in said
    assert "workload cases left out" not in said
