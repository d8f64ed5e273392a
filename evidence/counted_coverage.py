#!/usr/bin/env python3
"""A counted session of a suite whose addopts turn coverage on: its counts and its cost, taking
turns between interpreters that have the plugin installed (issue 65).

The suite (``SUITE``: a plain test and two ``benchmark`` tests of a small loop, ``addopts = --cov=mod
--cov-context=test`` as multidict's) is written into a fresh directory for each session, which runs
``PY -m pytest -p no:cacheprovider --concurrency-measure=instructions --concurrency-save-baseline=b.json``
(three layouts, forked). Give each interpreter as ``LABEL=PYTHON``: e.g. one with main's code
installed (which counted under the suite's coverage) and this checkout's venv (which counts
without it). Each session is a line of ``--out``: its label, each benchmark's median count per call,
the CPU seconds (user + system) of its whole process tree (``os.wait4``), its wall seconds, the load
before and after, and whether a layout failed or the run said it counted without coverage.

    python3 evidence/counted_coverage.py main=/tmp/v311main/bin/python this=.venv/bin/python --turns 2
    COVERAGE_CORE=sysmon python3 evidence/counted_coverage.py ...   # coverage's sys.monitoring core

It needs valgrind, and pytest-cov in each interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

SUITE = {
    "mod.py": "def work(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n"
    "    return total\n",
    "test_cov.py": "import mod\n\n\ndef test_a_plain():\n    assert mod.work(3) == 5\n\n\n"
    "def test_work(benchmark):\n    assert benchmark(mod.work, 200) == sum(i * i for i in range(200))\n\n\n"
    "def test_more(benchmark):\n    assert benchmark(mod.work, 300) > 0\n",
    "pytest.ini": "[pytest]\naddopts = --cov=mod --cov-context=test\n",
}


def session(label: str, python: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="counted-coverage-") as work:
        for name, text in SUITE.items():
            Path(work, name).write_text(text)
        load = os.getloadavg()[0]
        started = time.monotonic()
        proc = subprocess.Popen(
            [python, "-m", "pytest", "-p", "no:cacheprovider"]
            + ["--concurrency-measure=instructions", "--concurrency-save-baseline=b.json"],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        saved = Path(work, "b.json")
        benchmarks = json.loads(saved.read_text())["benchmarks"] if saved.exists() else []
        return {
            "label": label,
            "python": python,
            "core": os.environ.get("COVERAGE_CORE", ""),
            "exit": os.waitstatus_to_exitcode(status),
            "counts": {b["name"]: b["stats"]["median"] for b in benchmarks},
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "wall_s": round(wall, 1),
            "load": [round(load, 1), round(os.getloadavg()[0], 1)],
            "said_without_coverage": "counted without your coverage" in out,
            "coverage_report": "tests coverage" in out,
            "layout_failed": "counted pass exited" in out or "DataError" in out,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="+", help="LABEL=PYTHON, taken in turns")
    parser.add_argument("--turns", type=int, default=2)
    here = Path(__file__).parent / "counted_coverage" / "results.jsonl"
    parser.add_argument("--out", default=str(here))
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for _ in range(args.turns):
        for given in args.pythons:
            label, _, python = given.partition("=")
            row = session(label, python)
            print(json.dumps(row), flush=True)
            with open(args.out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
