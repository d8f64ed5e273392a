"""The sides' one start-up (roles/shared_start.py): a server that has imported pytest forks each
side's counted session, which must be the session ``python -m pytest`` would have started.

These start the server at full speed (no valgrind: what it does to a session is the same; the
counted run against the base under valgrind is test_against.py's). Each test: a server start-up
and one or two pytest sessions, 1-6 s (the slowest 4.8-5.8 s in .ci/run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.roles import child_sessions, shared_start

#: What a session sees of its process: what it prints, to compare with ``python -m pytest``'s
PROCESS = """
import json, os, sys


def test_process():
    seen = {
        "path": sys.path,
        "cwd": os.getcwd(),
        "marked": os.environ.get("MARKED"),
        "argv": sys.argv[1:],
        "stdin": sys.stdin.read(),
        "plugin modules": "pytest_concurrency" in sys.modules,
    }
    print("SEEN=" + json.dumps(seen))
"""

#: a forked session ignores Ctrl-C until its session has started, when a counted session takes it
#: (counting.py: ``lifetime.take_ctrl_c``); this conftest does as that session does
TAKES_CTRL_C = """
from pytest_concurrency import lifetime


def pytest_sessionstart(session):
    lifetime.take_ctrl_c()
"""

WAITS = """
import os, time


def test_waits():
    open(os.environ["STARTED"], "w").close()
    time.sleep(600)
"""


@pytest.fixture
def server(tmp_path):
    """A running server, in a ``Children`` block, told to stop at the end: a function that gives
    the next side its end of its pair (``Server``)."""
    with child_sessions.Children() as children:
        ends = shared_start.begin(
            children,
            shared_start.server_argv(["not_a_module_here"]),
            dict(os.environ),
            tmp_path,
            tmp_path / "server.log",
            ("first", "second"),
        )
        assert ends is not None, (tmp_path / "server.log").read_text()
        handed = iter(ends.values())
        yield lambda: shared_start.Server(next(handed))
        (proc, _, _), *_ = children.procs
    assert proc.returncode == 0, (tmp_path / "server.log").read_text()  # stopped, not killed
    assert not (tmp_path / "server.log").read_text()  # said nothing: no warning, no traceback


def _seen(text: str) -> dict:
    (line,) = [line for line in text.splitlines() if line.startswith("SEEN=")]
    return json.loads(line[len("SEEN=") :])


def test_a_forked_session_is_the_one_python_m_pytest_starts(server, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_process.py").write_text(PROCESS)
    extra = tmp_path / "first-on-the-path"
    extra.mkdir()
    env = {**os.environ, "MARKED": "yes", "PYTHONPATH": str(extra)}
    args = ["-q", "-s", "-p", "no:cacheprovider", "-W", "error", "test_process.py"]
    log = tmp_path / "forked.log"
    forked = server().request(args, env, str(project), str(log))
    assert forked.wait(60) == Exit.OK, log.read_text()
    alone = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert alone.returncode == Exit.OK, alone.stdout + alone.stderr
    # its import path (directory, PYTHONPATH, then the rest), directory, environment, arguments,
    # stdin; the plugin imported anew (no "already imported" warning under -W error)
    assert _seen(log.read_text()) == _seen(alone.stdout)
    assert _seen(alone.stdout)["path"][:2] == [str(project), str(extra)]


def test_a_sessions_exit_status_and_output_are_its_sides(server, tmp_path):
    (tmp_path / "test_fails.py").write_text("def test_fails():\n    assert 1 == 2\n")
    log = tmp_path / "forked.log"
    args = ["-q", "-p", "no:cacheprovider", "test_fails.py"]
    forked = server().request(args, dict(os.environ), str(tmp_path), str(log))
    assert forked.wait(60) == Exit.TESTS_FAILED
    assert "1 failed" in log.read_text() and "assert 1 == 2" in log.read_text()
    assert forked.poll() == Exit.TESTS_FAILED  # read once, kept


def _started(tmp_path, server, name: str):
    """A session forked to run WAITS, once its test has started."""
    (tmp_path / "test_waits.py").write_text(WAITS)
    (tmp_path / "conftest.py").write_text(TAKES_CTRL_C)
    started = tmp_path / name
    env = {**os.environ, "STARTED": str(started)}
    args = ["-q", "-p", "no:cacheprovider", "test_waits.py"]
    side = server()
    forked = side.request(args, env, str(tmp_path), str(tmp_path / f"{name}.log"))
    deadline = time.monotonic() + 60
    while not started.exists():
        assert forked.poll() is None and time.monotonic() < deadline, forked.returncode
        time.sleep(0.05)
    return side, forked


def test_a_ctrl_c_forwarded_by_the_one_policy_ends_it_as_interrupted(server, tmp_path):
    _, forked = _started(tmp_path, server, "started")
    child_sessions.stop([(forked, 30.0)])
    assert forked.returncode == Exit.INTERRUPTED
    assert "KeyboardInterrupt" in (tmp_path / "started.log").read_text()


def test_a_session_whose_side_is_gone_is_killed(server, tmp_path):
    side, forked = _started(tmp_path, server, "started")
    side._conn.close()  # as a side killed with SIGKILL leaves it
    deadline = time.monotonic() + 30
    while _alive(forked.pid):
        assert time.monotonic() < deadline, "the session of a side that is gone runs on"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_base_that_holds_a_module_the_start_up_imported_is_served_by_no_one(tmp_path, capsys):
    """pytest is imported by the server: a base side that installs its own pytest must import
    that, so the server says why and stops; each side then starts its own valgrind."""
    with child_sessions.Children() as children:
        ends = shared_start.begin(
            children,
            shared_start.server_argv(["pytest", "nothing_else"]),
            dict(os.environ),
            tmp_path,
            tmp_path / "server.log",
            ("base", "head"),
        )
        (proc, _, _), *_ = children.procs
        assert proc.wait(30) == shared_start.SERVES_NO_ONE
    assert ends is None
    said = capsys.readouterr().out
    assert "each side starts its own valgrind: the base's install holds pytest, which" in said


def test_a_start_up_that_is_never_ready_is_killed_and_each_side_starts_its_own(tmp_path, capsys):
    """A server whose start-up hangs (here: one that sleeps) must not hang the run: past its
    deadline it is killed, and the sides start their own valgrind."""
    with child_sessions.Children() as children:
        ends = shared_start.begin(
            children,
            [sys.executable, "-c", "import time; time.sleep(600)"],
            dict(os.environ),
            tmp_path,
            tmp_path / "server.log",
            ("base", "head"),
            ready_within=0.5,
        )
        (proc, _, _), *_ = children.procs
        assert proc.returncode == -signal.SIGKILL
    assert ends is None
    said = capsys.readouterr().out
    assert (
        "each side starts its own valgrind: the shared start-up was not ready in 0.5 s (killed)"
        in said
    )


def test_the_server_dies_with_its_run(tmp_path):
    """A ``kill -9`` of the run leaves no server nor session behind (PR_SET_PDEATHSIG)."""
    (tmp_path / "test_waits.py").write_text(WAITS)
    run = f"""
import os, sys, time
from pytest_concurrency.roles import child_sessions, shared_start
with child_sessions.Children() as children:
    ends = shared_start.begin(children, shared_start.server_argv([]), dict(os.environ),
                              {str(tmp_path)!r}, {str(tmp_path / "log")!r}, ("side",))
    forked = shared_start.Server(ends["side"]).request(
        ["-q", "-p", "no:cacheprovider", "test_waits.py"],
        {{**os.environ, "STARTED": {str(tmp_path / "started")!r}}}, {str(tmp_path)!r}, None)
    print(children.procs[0][0].pid, forked.pid, flush=True)
    time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", run], stdout=subprocess.PIPE, text=True)
    server_pid, session_pid = map(int, proc.stdout.readline().split())
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while _alive(server_pid) or _alive(session_pid):
        assert time.monotonic() < deadline, "the server or its session runs on after the run"
        time.sleep(0.05)


def test_the_server_ends_by_itself_once_every_side_is_done(tmp_path):
    """A side's session ended and reported, the side gone, and a side that never asked: nothing
    is left for the server to serve, and it exits 0 without being told."""
    (tmp_path / "test_passes.py").write_text("def test_passes():\n    pass\n")
    with child_sessions.Children() as children:
        ends = shared_start.begin(
            children,
            shared_start.server_argv([]),
            dict(os.environ),
            tmp_path,
            tmp_path / "server.log",
            ("asks", "never asks"),
        )
        assert ends is not None
        (proc, _, _), *_ = children.procs
        side = shared_start.Server(ends["asks"])
        args = ["-q", "-p", "no:cacheprovider", "test_passes.py"]
        forked = side.request(args, dict(os.environ), str(tmp_path), str(tmp_path / "forked.log"))
        assert forked.wait(60) == Exit.OK
        os.close(ends["never asks"])
        assert proc.poll() is None  # the second side has not said it is done before it is gone
        side._conn.close()
        assert proc.wait(30) == 0
