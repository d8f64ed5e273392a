"""A test that ends its process in a counted run (``os._exit``, a segfault) is named, once, and the
run stops there: it is not run again in the layout passes and the counted session, each under
valgrind, to end each of them the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import needs

from pytest_concurrency.measure import callgrind
from pytest_concurrency.roles import crash

# version-independent (how a crash under valgrind is named): once, on one Python (tox.ini's once env)
pytestmark = pytest.mark.once

HOSTILE = (Path(__file__).parent / "data" / "hostile.py").read_text()

needs_valgrind = needs("valgrind", callgrind.unavailable_reason())


@needs_valgrind
@pytest.mark.parametrize(
    "test, how",
    [("test_exits", "exit status 3"), ("test_segfaults", "killed by signal 11 (SIGSEGV)")],
)
def test_a_crash_in_the_kernel_pass_names_its_test_and_stops_the_run(pytester, test, how):
    # ~6 s each: the launcher's probe (collect-only) and the pass at full speed, which ends in
    # the test; nothing runs under valgrind
    pytester.makepyfile(test_hostile=HOSTILE)
    base = pytester.path / "base.json"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-k",
        f"test_fine or {test}",
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-kernel-pass",
        "--concurrency-backends=threading",
        f"--concurrency-save-baseline={base}",
        timeout=300,
    )
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out + err
    said = [line for line in err.splitlines() if "ended the process" in line]
    assert said == [
        f"pytest-concurrency: test_hostile.py::{test}[threading] ended the process of the pass at "
        f"full speed for kernel figures ({how}), so the counted run stops here and writes "
        f"nothing: fix the test (--concurrency-isolate runs it in a process of its own, where it "
        f"fails alone), or deselect it (--deselect test_hostile.py::{test}[threading])"
    ], out + err
    assert "more layout" not in out and "Traceback" not in err, out + err
    assert not base.exists()


#: Whether the process is a layout pass: started as one (its role on its command line), or forked
#: by the counted session (whose role its parent's command line, valgrind's, carries).
IN_A_LAYOUT_PASS = """
import os, sys

def in_a_layout_pass():
    if '"kind":"layout-pass"' in " ".join(sys.argv):
        return True
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
        return b'"kind":"counted"' in fh.read()
"""

ENDS_ONLY_IN_A_LAYOUT_PASS = (
    IN_A_LAYOUT_PASS
    + """
def test_ends_in_a_layout_pass(benchmark):
    def once():
        if in_a_layout_pass():  # only there: the counted session passes
            os._exit(3)
        return sum(range(100))
    benchmark.pedantic(once, rounds=3)
"""
)


@pytest.mark.slow  # ~60 s here: the counted session and one layout pass, side by side
@needs_valgrind
@pytest.mark.parametrize("layouts_from", ["fork", "start"])
def test_a_crash_in_a_layout_pass_beside_the_counted_session_writes_nothing(pytester, layouts_from):
    """The counted session runs beside the layout passes (forked from it, or started as processes
    of their own) and waits for them at its end: one that a test ended keeps it from saving, and
    the launcher names the test."""
    pytester.makepyfile(test_layout=ENDS_ONLY_IN_A_LAYOUT_PASS)
    base = pytester.path / "base.json"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-layouts=2",
        f"--concurrency-layouts-from={layouts_from}",
        f"--concurrency-save-baseline={base}",
        timeout=600,
    )
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out + err
    assert (
        "pytest-concurrency: test_layout.py::test_ends_in_a_layout_pass ended the process of "
        "layout 1's counted pass (exit status 3)" in err
    ), out + err
    assert not base.exists(), out + err


@pytest.mark.parametrize(
    "code, said",
    [
        (3, "exit status 3"),
        (-11, "killed by signal 11 (SIGSEGV)"),
        (139, "killed by signal 11 (SIGSEGV)"),
        (-9, "killed by signal 9 (SIGKILL)"),
        (1, "exit status 1"),
    ],
)
def test_an_exit_status_as_a_reader_knows_it(code, said):
    assert crash.how(code) == said


def test_the_running_file_names_the_test_until_it_is_done(tmp_path):
    path = crash.path(str(tmp_path), "kernel")
    running = crash.Running(path)
    assert crash.crashed(path) is None  # nothing started yet
    running.start("t.py::test_a")
    assert crash.crashed(path) == "t.py::test_a"
    running.done()
    assert crash.crashed(path) is None
