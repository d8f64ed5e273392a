"""The evidence scripts (evidence/, README there) still run: each one's smallest run, end to end.

They print the figures the docs quote and no other test runs them, so they rotted unseen. Each is
run here as a user runs it, ``sys.executable evidence/X.py --smoke`` in a directory of its own,
and must exit 0 and print the line it prints when its run went through (not just an exit status).
The figures themselves are not judged: a smoke run is too small to mean anything, and no test
asserts a speed. Costs are this repository's 2-core machine's, measured; over ~10 s is slow.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs

# version-independent (each script is a user's command line; what can differ between Pythons is tested in their own modules): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "evidence"
needs_valgrind = needs("valgrind", None if shutil.which("valgrind") else "valgrind is not on PATH")

#: script, its smallest run's extra arguments, what its output must hold (regular expressions)
CASES = [
    # ~1 s: git --version twice each way, under lifetime.run's keeper and subprocess.run
    pytest.param(
        "keeper_cost.py",
        [],
        [r"^keeper: [\d.]+ ms of CPU a call, subprocess.run: [\d.]+ ms"],
        id="keeper_cost",
    ),
    # ~1 s: the figures of the recorded sessions of real suites' sdists checked out from source,
    # what time left undecided counted on both sides (a run: `python evidence/undecided_suites.py
    # --suites fastapi --work DIR --sessions save,aa`, with valgrind, the package index and tens
    # of minutes of counting)
    pytest.param(
        "undecided_suites.py",
        [],
        [r"^zeroconf 0\.154\.0 aa: \d+ sessions, exits", r"caught exactly \d+ of \d+"],
        id="undecided_suites",
    ),
    # ~1 s: asyncio and threading, a tenth of the counts, once
    pytest.param(
        "primitive_costs.py",
        [],
        [r"rendezvous ns/hand-off", r"^asyncio \(", r"^threading \("],
        id="primitive_costs",
    ),
    # ~3 s: baselines of 100 and 5,000 rounds, each judged in a process of its own
    pytest.param(
        "gate_memory.py",
        [],
        [r"^\| 100 \| .* \| \+0 MiB", r"^\| 5,000 \| .* \| (unchanged|regressed) "],
        id="gate_memory",
        marks=pytest.mark.slow,  # 11 s in the fast tier's run
    ),
    # ~1 s: one A/A and one yield trial of the ring on threading, in this process
    pytest.param(
        "kernel_evidence.py",
        [],
        [r"A/A: \d+/1 trials with a kernel verdict", r"\+yield per hop .*: caught \d+/1"],
        id="kernel_evidence",
    ),
    # ~5 s: two sessions of the smoke suite's rings on asyncio, in-process and isolated
    pytest.param(
        "compare_modes.py",
        [],
        [r"^benchmarks compared: 2$", r"isolated/in-process median ratio: median [\d.]+"],
        id="compare_modes",
        marks=pytest.mark.slow,  # 10 s in the fast tier's run
    ),
    # ~8 s: one session of tests/data/plain_leaks.py on asyncio; exits 1 on a miss or false alarm
    pytest.param(
        "plain_memory_evidence.py",
        [],
        [
            r"^1 sessions \(",
            r"asyncio\s+none\s+no leak: 0/1 false alarms",
            r"asyncio\s+tasks\s+no leak: 0/1 false alarms",
            r"asyncio\s+c\s+caught 1/1",
            r"asyncio\s+mmap\s+caught 1/1 \(.*resident, outside every heap 1\b.*\)",
        ],
        id="plain_memory_evidence",
    ),
    # ~3 s: two processes time three kinds of round 0.2 s each beside the controls (one a busy loop beside)
    pytest.param(
        "control_estimators.py",
        [],
        [r"^\| pure-Python loop \| [\d.]+% \([\d.]+x\) \| [\d.]+% .*\| [\d.]+% \|$"],
        id="control_estimators",
    ),
    # ~30 s: a one-session baseline, then an A/A quiet and +10% beside a busy loop, judged four ways
    pytest.param(
        "control_evidence.py",
        [],
        [
            r"^1\.0@0 \(1 sessions",
            r"^  control +failed \d/1",
            r"^  raw +failed \d/1",
            r"^1\.10@1 \(1 sessions",
            r"^  pb +caught \(failed\) \d/1",
        ],
        id="control_evidence",
        marks=pytest.mark.slow,
    ),
    # ~10-15 s: two sessions of the smoke suite's rings on asyncio, judged both ways; exits 1 on a false alarm
    pytest.param(
        "memory_evidence.py",
        [],
        [r"^2 sessions, 2 A/A comparisons, \d+ memory verdicts: 0 false alarms"],
        id="memory_evidence",
        marks=pytest.mark.slow,
    ),
    # ~12 s: one interrupted session (time mode, SIGINT to the pid), 5 s to settle, the next start
    pytest.param(
        "interrupt_evidence.py",
        [],
        [r"^\| time \| SIGINT pid \| \S+ \(", r"^\| mode \| signal / limit \|"],
        id="interrupt_evidence",
        marks=pytest.mark.slow,
    ),
    # ~25 s (60 s on a loaded machine): a baseline saved, then two time sessions interrupted (at
    # 3 s, and just after the save), 5 s to settle each
    pytest.param(
        "nothing_lost.py",
        [],
        [
            r"^\| ctrl-c: time, at the end \| 2 \| [\d.]+ \| pytest-concurrency: interrupted after the "
            r"baseline was saved to b\.json \| 0 \| 0 \| changed \|$",
            r"^2 cases; left something behind: none$",
        ],
        id="nothing_lost",
        marks=pytest.mark.slow,
    ),
    # ~12 s: the first case, bare and through the plugin (one pytest session), 3 rounds
    pytest.param(
        "harness_overhead.py",
        [],
        [r"^ring\{.*\} on asyncio\s+[\d.]+ms\s+[\d.]+ms\s+[\d.]+$"],
        id="harness_overhead",
        marks=pytest.mark.slow,
    ),
    # ~15 s: the hostile test that ends its process, in-process and isolated, 1 s to settle
    pytest.param(
        "hostile_tests_evidence.py",
        [],
        [r"^\| in-process \| exits \|", r"^\| isolated \| exits \|"],
        id="hostile_tests_evidence",
        marks=pytest.mark.slow,
    ),
    # ~20 s: a warm-up session, one A/A pair and one yield trial of a plain ring on threading
    pytest.param(
        "kernel_plain_evidence.py",
        [],
        [
            r"^\| threading \| \d+/1 regressed or improved",
            r"^\| threading \| yield: \d+/1 regressed",
        ],
        id="kernel_plain_evidence",
        marks=pytest.mark.slow,
    ),
    # ~30 s: a baseline, the slowdown calibrated, three judged sessions: each a process of its own
    pytest.param(
        "gate_evidence.py",
        [],
        [r"^A/A quiet ", r"^slow 10% ", r"^gate: wrongly named, all conditions: "],
        id="gate_evidence",
        marks=pytest.mark.slow,
    ),
    # ~30 s: one --concurrency-against session with the change (its suspect in more pairs), the
    # test in two copies, each judged apart
    pytest.param(
        "against_evidence.py",
        ["--copies", "2"],
        [
            # (no change is read beside a busy core: the tier's other tests may be that)
            r"^changed \(.*\) 1/1: threading ([+-][\d.]+% )?\w+, threading#2 ([+-][\d.]+% )?\w+",
            r"^== changed \(.*\): 1 sessions, 2 verdicts",
        ],
        id="against_evidence",
        marks=pytest.mark.slow,
    ),
    # ~3 min (180 s at load 4-9): the same session counted against the base (valgrind, one model);
    # with a busy loop beside it under load 13-15 it ran past the 600 s timeout, hence none here
    pytest.param(
        "against_evidence.py",
        ["--measure", "instructions"],
        [
            r"^changed \(.*\) 1/1: threading [+-][\d.]+% \w+ \(\d+ s, load ",
            r"^== changed \(.*\): 1 sessions, 1 verdicts \(instructions, 0 busy loops\)",
        ],
        id="against_evidence_counted",
        marks=[pytest.mark.slow, needs_valgrind],
    ),
    # ~3 s: the recorded quiet control run read again, the processes a side each benchmark needs
    pytest.param(
        "control_processes.py",
        [],
        [
            r"^\| test_ring\[asyncio\] \| 50 \+ 50 \| [+-][\d.]+% \| [\d.]+% \| [+-][\d.]+% \| \d+ \|$"
        ],
        id="control_processes",
    ),
    # ~20 s: a 1-session stored baseline, then one A/A session judged by the plugin and one by
    # pytest-benchmark's rule (threading), a busy loop beside each
    pytest.param(
        "stored_time_evidence.py",
        [],
        [
            r"^A/A, 1 busy loops 1/1: threading [+-][\d.]+% \w+ \(pytest-benchmark (ok|FAILED)\)",
            r"^   threading: gate .*; pytest-benchmark mean:5% failed \d/1",
        ],
        id="stored_time_evidence",
        marks=pytest.mark.slow,
    ),
    # ~15 s: asyncio's ring counted round by round under valgrind, 2 rounds in 2 layouts
    pytest.param(
        "count_layouts.py",
        [],
        [r"^asyncio, directory name 8, \+0 B environment: ", r"^asyncio: medians of rounds 1\+"],
        id="count_layouts",
        marks=[pytest.mark.slow, needs_valgrind],
    ),
    # ~60 s: one counted session of a plain ring on asyncio, one layout (valgrind)
    pytest.param(
        "plain_count_repeat.py",
        [],
        [r"^  asyncio: A/A 0/0 false alarms", r"^session same0 \("],
        id="plain_count_repeat",
        marks=[pytest.mark.slow, needs_valgrind],
    ),
    # ~3 s: a run log of 30 runs x 12 benchmarks drawn as a site (the browser's timing is
    # tests/test_history_browser.py's browser, evidence-grade by hand)
    pytest.param(
        "history_site.py",
        ["--no-browser"],
        [r"^site of 30 runs x 12 benchmarks written in [\d.]+ s$"],
        id="history_site",
    ),
    # ~3 minutes: a history of 4 commits, one +2%, bisected by counted runs (valgrind)
    pytest.param(
        "bisect_evidence.py",
        [],
        [r'"right": true', r'"tree_untouched": true'],
        id="bisect_evidence",
        marks=[pytest.mark.slow, needs_valgrind],
    ),
    # ~5 s: one session of asyncio's two smoke rings, each part of a cell timed
    pytest.param(
        "bench_breakdown.py",
        [],
        [r"^2 cells; CPU [\d.]+ s", r"^memory pass +[\d.]+ +[\d.]+", r"^rounds +[\d.]+"],
        id="bench_breakdown",
    ),
    # ~30 s: a worktree of main, two sessions a side of asyncio's two smoke rings, in turns
    pytest.param(
        "bench_precision.py",
        [],
        [r"^before: median change", r"^after : median change", r"^after at least as good: "],
        id="bench_precision",
        marks=pytest.mark.slow,
    ),
    # ~2 s: 100 forks a condition, each right after a thread's join, under tracemalloc
    pytest.param(
        "fork_after_join.py",
        [],
        [r"^\S+ join only: \d+ of 100 children hung", r"^\S+ join, then left the OS: 0 of 100"],
        id="fork_after_join",
    ),
    # ~60 s: three counted sessions of greenlet's two smoke rings, one with +2% (valgrind)
    pytest.param(
        "count_evidence.py",
        [],
        [r"^A/A: 2 comparisons, \d+ false alarms", r"on greenlet: caught \d+ of 2"],
        id="count_evidence",
        marks=[pytest.mark.slow, needs_valgrind],
    ),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("script, extra, expected", CASES)
def test_evidence_script_smoke_run(tmp_path, script, extra, expected):
    before = _recorded()
    run = subprocess.run(
        [sys.executable, str(EVIDENCE / script), "--smoke", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = (
        f"exit {run.returncode}\n--- stdout\n{run.stdout[-4000:]}\n--- stderr\n{run.stderr[-4000:]}"
    )
    assert run.returncode == 0, said
    missing = [e for e in expected if not re.search(e, run.stdout, re.M)]
    assert not missing, f"{script} --smoke did not print {missing}:\n{said}"
    # a smoke run is no evidence: the recorded results are left as they were
    assert _recorded() == before, f"{script} --smoke wrote into evidence/"


def _recorded() -> dict:
    """The size of every results file under evidence/ (what a run appends to)."""
    return {p: p.stat().st_size for p in EVIDENCE.rglob("*.jsonl")}


#: Scripts with no smoke run here, and why: run by hand (their README says how). Not counted as
#: tested: a smoke run that always skipped made a green run claim what it never ran.
BY_HAND = {
    # minutes, and the package index: it downloads aiohttp's sdist and wheels, and installs the
    # plugin and pytest-codspeed in a venv of its own (`python evidence/existing_suites.py --smoke`)
    "existing_suites.py": "needs the package index (PyPI) and minutes of counting",
    # the same, five suites with their own config (`python evidence/real_suites.py --smoke`)
    "real_suites.py": "needs the package index (PyPI) and minutes",
    # yarl's suite counted whole and in 2 and 4 shards (`python evidence/shard_evidence.py --smoke --work DIR`)
    "shard_evidence.py": "needs the package index (PyPI) and minutes of counting",
    # FastAPI's suite that runs only under --codspeed (`python evidence/codspeed_suite.py --work DIR`)
    "codspeed_suite.py": "needs the package index (PyPI) and minutes of counting",
    # a library's base commit installed apart (setuptools from the index) and what time left
    # undecided counted on both sides (`python evidence/undecided_evidence.py --layouts 1`)
    "undecided_evidence.py": "needs valgrind, the package index and tens of minutes of counting",
    # yarl's sdist, a counted save beside pytest-codspeed's simulation mode (`python evidence/count_cost.py --smoke`)
    "count_cost.py": "needs the package index (PyPI) and minutes of counting",
    # yarl's sdist, one counted save with forked layouts (`python evidence/layout_separation.py --smoke`)
    "layout_separation.py": "needs the package index (PyPI) and minutes of counting",
    # a small suite with coverage in its addopts counted in turns by two interpreters, one with
    # the code before a change (`python evidence/counted_coverage.py main=PY this=.venv/bin/python`)
    "counted_coverage.py": "needs valgrind, a second interpreter with the plugin and minutes",
    # three real suites' sdists, counted A/As and injected slowdowns (`python evidence/count_matrix.py --smoke`)
    "count_matrix.py": "needs the package index (PyPI) and minutes of counting",
    # compares four sessions of the main job taken in turns, two with each side's code (their
    # --benchmark-json files: `python evidence/memory_pass_precision.py B1 A1 B2 A2`)
    "memory_pass_precision.py": "reads four main-job sessions taken by hand (minutes each)",
    # yarl's wrapper copy counted in forked children, type tags kept or drawn anew, beside
    # count_matrix.py's plain part (`python evidence/forked_type_cache.py --work W`)
    "forked_type_cache.py": "needs valgrind, count_matrix.py's work directory and minutes",
    # compares four bench_breakdown.py sessions taken in turns, two with each side's code
    # (`python evidence/memory_pass_cost.py B1 A1 B2 A2`)
    "memory_pass_cost.py": "reads four bench_breakdown.py sessions taken by hand (minutes each)",
    # counted saves of yarl's URL builds, their command lines a byte apart
    # (`python evidence/startup_draw.py --work W`)
    "startup_draw.py": "needs valgrind, yarl's venv from PyPI and minutes",
    # tox -e bench with main's code and this checkout's, two tox envs built
    # (`python evidence/tox_bench_turns.py --smoke`)
    "tox_bench_turns.py": "needs tox, perf and minutes (two tox envs built, then their runs)",
}


def test_every_evidence_script_has_a_smoke_run_here_or_is_run_by_hand():
    # a module whose name starts with _ is one the scripts import (_documents.py), not a script
    scripts = sorted(p.name for p in EVIDENCE.glob("*.py") if not p.name.startswith("_"))
    tested = {case.values[0] for case in CASES}  # a script may have a smoke run per mode
    assert not tested & set(BY_HAND)
    assert scripts == sorted(tested | set(BY_HAND))


#: The layers an evidence script may import (tests/test_layers.py's, below the top-level glue, which
#: is being restructured, and ``lifetime``, below every layer): anything else it drives through a
#: pytest command line.
LOWER = ("backends", "workloads", "measure", "runner", "gate", "store", "report", "lifetime")
RESTRUCTURED = ("pytest_concurrency.runner.launch",)


@pytest.mark.parametrize("path", sorted(EVIDENCE.glob("*.py")), ids=lambda p: p.name)
def test_evidence_imports_the_installed_package_from_its_lower_layers(path):
    text = path.read_text(encoding="utf-8")
    ours = set()
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            ours.update(a.name for a in node.names if a.name.startswith("pytest_concurrency."))
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest_concurrency":
            ours.update(f"pytest_concurrency.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "pytest_concurrency."
        ):
            ours.add(node.module)
    wrong = sorted(m for m in ours if m.split(".")[1] not in LOWER or m.startswith(RESTRUCTURED))
    assert not wrong, f"{path.name} imports {wrong}: drive the plugin through pytest instead"
    assert "sys.path" not in text, f"{path.name} edits sys.path: import the package as installed"
    assert "PYTEST_CONCURRENCY_AGAINST_KEEP" not in text, (
        "--concurrency-against-keep=DIR replaced it"
    )
