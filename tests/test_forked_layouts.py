"""A counted session's other layouts, forked from it after its collection (the default,
``--concurrency-layouts-from=fork``; roles/forked_layouts.py): one start-up under valgrind for all,
each child's heap moved its own way before its first round."""

from __future__ import annotations

import importlib.util
import json
import statistics

import pytest
from conftest import need, needs

from pytest_concurrency.measure import callgrind, layouts

needs_valgrind = needs("valgrind", callgrind.unavailable_reason())

#: Three tests: one whose work follows the layout, so that the first two disagree and the third
#: counts it, and which fails there only (its other layouts still count it); one whose every call
#: allocates objects that live across the loop, so where they land moves its count a little from
#: layout to layout; and one that runs git (which valgrind leaves untraced), counted alike in the
#: first two, so not in the third. Each child prints a line its own log keeps.
SUITE = """
import json
import os
import subprocess

from pytest_concurrency.backends import child_env
from pytest_concurrency.measure import layouts


def forked_to():  # the layout layouts.pad moved this process to (0: none)
    return len(layouts._kept[-1]) // layouts.PAD_OBJECTS if layouts._kept else 0


def test_json(benchmark):
    print("RUN IN LAYOUT", forked_to())
    data = [{"k": str(i), "v": [i, i * 2]} for i in range(200)]
    benchmark(lambda: json.loads(json.dumps(data)))


def test_git_runs_outside_valgrind(benchmark):
    git = subprocess.Popen(["git", "--version"], stdout=subprocess.DEVNULL)
    assert git.wait() == 0
    # a process valgrind traces leaves its counts in the counted session's directory at its end
    directory = child_env.get(child_env.CALLGRIND_DIR)
    assert not os.path.exists(os.path.join(directory, f"callgrind.{git.pid}"))
    benchmark(sorted, [3, 1, 2])


def test_not_in_layout_two(benchmark):
    assert forked_to() != 2, "fails in the second forked layout only"
    benchmark(sorted, list(range(300 + 100 * forked_to(), 0, -1)))


def test_plain():
    assert True
"""


#: Each switch of callgrind's instrumentation, by the process that asked for it.
SWITCHES = """
import os

from pytest_concurrency.measure import client_request

LOG = os.path.join(os.path.dirname(__file__), "switches.txt")


def _logged(name, request):
    def switch():
        result = request()
        with open(LOG, "a") as fh:
            fh.write(f"{os.getpid()} {name}\\n")
        return result

    return switch


client_request.start_instrumentation = _logged("on", client_request.start_instrumentation)
client_request.stop_instrumentation = _logged("off", client_request.stop_instrumentation)
"""


@pytest.mark.slow  # a counted session of three small tests, two forked layouts: 100-180 s, loaded
@needs_valgrind
def test_a_counted_session_forks_its_layouts_after_its_collection(pytester):
    pytester.makepyfile(test_forked=SUITE)
    pytester.makeconftest(SWITCHES)
    base = pytester.path / "base.json"
    saved = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        "--concurrency-measure=instructions",
        f"--concurrency-save-baseline={base}",
        timeout=900,
    )
    out = saved.stdout.str()
    saved.stdout.fnmatch_lines(
        [
            "*counting in 2 more layouts forked from it after its collection*median over 3 layouts,"
            " the third where the first two disagree*",
            "*the third layout counted * of 3 tests: the others counted alike in the first two*",
            "*layout 2's counted pass exited 1: its tests were judged on the layouts that counted them*",
            "*FAILED test_forked.py::test_not_in_layout_two*",
            "*2 more layouts counted beside this session*",
        ]
    )
    # the session's own outcomes, as without the plugin: the failure in a layout is not the test's
    saved.assert_outcomes(passed=3, skipped=1)
    assert "kernel figures" not in out, out  # the kernel pass runs only when asked for
    benches = {b["name"]: b for b in json.loads(base.read_text())["benchmarks"]}
    own = benches["test_json"]["stats"]["data"]
    others = benches["test_json"]["extra_info"]["layouts"]
    assert others and all(len(rounds) == len(own) for rounds in others)
    medians = [statistics.median(rounds) for rounds in (own, *others)]
    # the same code, its objects landed elsewhere in each child
    assert max(medians) / min(medians) < 1.02 and len(set(medians)) == len(medians), medians
    # the first two agreed: no third; where they did not, the third counted it (and failed)
    git = benches["test_git_runs_outside_valgrind"]
    assert len(git["extra_info"]["layouts"]) == 1, git
    assert len(benches["test_not_in_layout_two"]["extra_info"]["layouts"]) == 1  # layout 1's
    assert "syscalls_per_op" not in benches["test_json"]["extra_info"]
    # a child's output stays in its log: the session's own terminal shows the session's
    assert "RUN IN LAYOUT 1" not in out and "RUN IN LAYOUT 2" not in out, out
    # instrumentation on from the first counted test to the last, off before the plain test: each
    # switch makes callgrind translate again what runs after it
    switches: dict[str, list[str]] = {}
    for line in (pytester.path / "switches.txt").read_text().splitlines():
        pid, switch = line.split()
        switches.setdefault(pid, []).append(switch)
    # (layout 2 counted only the test that fails there before its first reading: no switch)
    assert sorted(switches.values()) == [["on", "off"]] * 2, switches


def test_a_forked_layout_moves_the_heap_by_its_number():
    """~0 s: ``pad`` keeps ``layout * PAD_OBJECTS`` objects alive."""
    before = len(layouts._kept)
    try:
        layouts.pad(2)
        assert len(layouts._kept) == before + 1
        assert len(layouts._kept[-1]) == 2 * layouts.PAD_OBJECTS
        # the same objects a started layout allocates before pytest is imported
        assert f"range({2 * layouts.PAD_OBJECTS})" in layouts.padding(2)
    finally:
        del layouts._kept[before:]


#: A suite whose addopts turn coverage on with a context a test, as multidict's setup.cfg does:
#: a plain test first (the counted session alone runs it), then two counted ones.
COVERED = {
    "mod.py": "def work(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n"
    "    return total\n",
    "test_cov.py": """
import mod


def test_a_plain():
    assert mod.work(3) == 5


def test_work(benchmark):
    assert benchmark(mod.work, 200) == sum(i * i for i in range(200))


def test_more(benchmark):
    assert benchmark(mod.work, 300) > 0
""",
    "pytest.ini": "[pytest]\naddopts = --cov=mod --cov-context=test\n",
}


@pytest.mark.slow  # one counted session of three small tests, two forked layouts: 157-173 s by the clock, load 15-18
@needs_valgrind
def test_a_counted_session_counts_without_the_suites_coverage(pytester):
    """A forked layout, seeing a pid of its own, erased coverage's data file its parent was writing
    and made it again (multidict's ``--cov-context=test``: ``no such table: context``, the layout
    failed), and a count must not depend on whether a tracer ran. A counted
    run turns the suite's coverage off in each counted process and says so once: no coverage
    report, no data file (the launcher's pytest-cov erases the old one at its start, as any run
    with ``--cov`` does, and writes none). Before this (6886ac5) the counted session traced coverage,
    wrote ``.coverage`` and its report, and said nothing."""
    need("pytest-cov", None if importlib.util.find_spec("pytest_cov") else "pip install pytest-cov")
    for name, text in COVERED.items():
        (pytester.path / name).write_text(text)
    done = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--concurrency-measure=instructions", timeout=900
    )  # fmt: skip
    out = done.stdout.str()
    assert out.count("counted without your coverage") == 1, out
    assert "2 more layouts counted beside this session" in out, out
    assert "exited" not in out and "DataError" not in out, out  # no layout failed
    assert "tests coverage" not in out, out  # pytest-cov's report: traced, it would be here
    done.assert_outcomes(passed=3)
    assert list(pytester.path.glob(".coverage*")) == []
