"""The child pytest sessions (roles/child_sessions.py): every role that starts one stops it alike.

One Ctrl-C policy for every parent: a terminal's Ctrl-C reaches the parent alone (each child runs
in a session of its own); the parent forwards one to each child, which ends as an interrupted
session does, and kills the group of a child not ended after its grace. Each case below is a real
parent (a pytest session, or a bisection) stopped while a child session of its kind runs a test:
the parent exits 2 with its one line and no traceback, the child and everything it started are
gone, and nothing the parent was asked to write is written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import need
from test_interrupts import _ours

from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.measure import callgrind
from pytest_concurrency.roles import child_sessions

#: A test that, in a process of a kind named in STOP_IN (its role's kind, "user" for a process
#: started without one), says so in STARTED and waits to be stopped, noting there whether a Ctrl-C
#: stopped it; in one named in SLOW_IN its rounds take twice as long (a regression that a second
#: process does not confirm).
TESTS = """
import json, os, sys, time


def _kind():
    given = [a for a in sys.argv if a.startswith("--concurrency-role=")]
    return json.loads(given[-1].partition("=")[2])["kind"] if given else "user"  # the last counts


def test_work(benchmark):
    if _kind() in os.environ.get("STOP_IN", "").split(","):
        said = os.path.join(os.environ["STARTED"], str(os.getpid()))
        open(said, "w").close()
        try:
            time.sleep(600)
        except KeyboardInterrupt:
            os.rename(said, said + ".ctrl-c")
            raise
    nap = 0.004 if _kind() in os.environ.get("SLOW_IN", "").split(",") else 0.002
    benchmark.pedantic(time.sleep, args=(nap,), rounds=20)
"""

LIB = "def work():\n    return 1\n"
PYPROJECT = (Path(__file__).parent / "data" / "mylib.pyproject.toml").read_text()
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only"]
SAID = "pytest-concurrency: interrupted"  # the line a pytest parent ends with
AT_THE_END = f"{SAID} at the session's end: no baseline, report, verdict or rounds written"


def _project(root: Path) -> None:
    """The test above, in a git repository with mylib (a base side to install: ``base/``)."""
    (root / "test_w.py").write_text(TESTS)
    for where in (root, root / "base"):
        (where / "mylib").mkdir(parents=True, exist_ok=True)
        (where / "mylib" / "__init__.py").write_text(LIB)
        (where / "pyproject.toml").write_text(PYPROJECT.format(version="1.0"))
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "test_w.py", "mylib", "pyproject.toml"], cwd=root, check=True)
    for n in range(2):  # a history to bisect
        subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", f"c{n}"], cwd=root, check=True)


def _commits(root: Path) -> list[str]:
    done = subprocess.run(["git", "rev-list", "--reverse", "HEAD"], cwd=root, capture_output=True)
    return done.stdout.decode().split()


#: role -> (the kinds of child the test waits in, the parent's command line, what it must not write,
#: its line, needs valgrind, a baseline saved first). Each is the parent whose child sessions the
#: role starts: counting.Launcher, against.Orchestrator, counted_against (the base side's counted
#: session), remeasure.SecondSessions, arbiter.Arbiter (in a base side's counted session it starts),
#: and a bisection's step.
CASES = {
    "counting": (
        "counted",
        [*PYTEST, "--concurrency-measure=instructions", "--concurrency-layouts=1"]
        + ["--concurrency-save-baseline=b.json", "test_w.py"],
        "b.json",
        SAID,
        True,
        False,
    ),
    "against": (
        "side",
        [*PYTEST, "--concurrency-against=base", "--concurrency-report-md=r.md", "test_w.py"],
        "r.md",
        SAID,
        False,
        False,
    ),
    "counted_against": (
        "counted",
        [*PYTEST, "--concurrency-measure=instructions", "--concurrency-layouts=1"]
        + ["--concurrency-against=base", "--concurrency-save-baseline=b.json", "test_w.py"],
        "b.json",
        SAID,
        True,
        False,
    ),
    "remeasure": (
        "again",
        [*PYTEST, "--concurrency-baseline=saved.json", "--concurrency-remeasure=every"]
        + ["--concurrency-report-md=r.md", "test_w.py"],
        "r.md",
        AT_THE_END,
        False,
        True,
    ),
    "arbiter": (
        "counted",
        [*PYTEST, "--concurrency-baseline=saved.json", "--concurrency-report-md=r.md", "test_w.py"],
        "r.md",
        AT_THE_END,
        True,
        True,
    ),
    "bisection": (
        "user",
        [sys.executable, "-m", "pytest_concurrency", "bisect", "--measure", "time"]
        + ["--json", "b.json", "--good", "{0}", "--bad", "{1}", "--", "test_w.py", "-q"],
        "b.json",
        "bisect: interrupted (Ctrl-C)",
        False,
        False,
    ),
}


#: Each case's cost, measured on 2 cores at a load of 22-40 (other jobs running): its process tree's
#: CPU seconds (user + sys, ``/usr/bin/time`` around pytest running the one case) and its time by
#: the clock; the last two by the clock alone, run side by side at a load of 20-30.
@pytest.mark.once
@pytest.mark.parametrize(
    "role",
    [
        # 20 CPU s, 79 s: a save, then the judged session's second process stopped
        pytest.param("remeasure", marks=[pytest.mark.slow, pytest.mark.essential]),
        # 9 CPU s, 27 s: a bisection's start, its first step stopped (test_shards.py stops one in
        # the fast tier's once env: its line, its worktree)
        pytest.param("bisection", marks=pytest.mark.slow),
        # 22 CPU s, 63 s: the base installed (pip), both sides started, then stopped
        pytest.param("against", marks=pytest.mark.slow),
        # 35 CPU s, 155 s: a probe, then the counted session stopped under valgrind
        pytest.param("counting", marks=pytest.mark.slow),
        # 217 s: the base installed, its counted run's counted session stopped
        pytest.param("counted_against", marks=pytest.mark.slow),
        # 298 s: a save; a judged session whose suspect a second process did not confirm; the
        # base commit installed, its counted session stopped
        pytest.param("arbiter", marks=pytest.mark.slow),
    ],
)
def test_a_ctrl_c_stops_the_child_session_of_every_role_alike(tmp_path, role):
    stop_in, command, written, said, counted, saved_first = CASES[role]
    if counted:
        need("valgrind", callgrind.unavailable_reason())
    root, started = tmp_path / "project", tmp_path / "started"
    root.mkdir()
    started.mkdir()
    _project(root)
    marker = f"PYTEST_CONCURRENCY_TEST_MARKER={os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "STARTED": str(started), marker.split("=")[0]: marker.split("=")[1]}
    if saved_first:
        save = [*PYTEST, "--concurrency-save-baseline=saved.json", "test_w.py"]
        subprocess.run(save, cwd=root, env=env, check=True, capture_output=True, timeout=300)
    env.update(STOP_IN=stop_in, SLOW_IN="user" if role == "arbiter" else "")
    parent = subprocess.Popen(
        [arg.format(*_commits(root)) for arg in command],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the terminal's group: a Ctrl-C at it reaches all of it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 600
        while not list(started.iterdir()):
            assert time.monotonic() < deadline and parent.poll() is None, parent.communicate()
            time.sleep(0.1)
        os.killpg(parent.pid, signal.SIGINT)  # as a terminal's Ctrl-C
        out, _ = parent.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == Exit.INTERRUPTED, out
    assert said in out and "Traceback" not in out, out
    assert not (root / written).exists(), out
    children = [p.name for p in started.iterdir()]
    if not counted:  # it took the Ctrl-C forwarded to it (under valgrind it may be killed instead)
        assert all(name.endswith(".ctrl-c") for name in children), (children, out)
    for name in children:  # the child session that ran the test is gone ...
        with pytest.raises(ProcessLookupError):
            os.kill(int(name.partition(".")[0]), 0)
    assert _ours(marker) == [], out  # ... and so is everything the parent started


@pytest.mark.once
def test_a_childs_log_tail_is_its_last_lines_that_are_not_blank(tmp_path):
    """~0 s: the one tail every role reads a child's log with."""
    log = tmp_path / "log"
    assert child_sessions.log_tail(log) == "(no log)"
    log.write_text("")
    assert child_sessions.log_tail(log) == "(no output)"
    log.write_text("one\n\ntwo  \n   \nthree\n")
    assert child_sessions.log_tail(log, 2, " | ") == "two | three"
