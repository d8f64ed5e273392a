"""Killed and interrupted sessions: nothing runs on, nothing is written, nothing is left behind.

The whole of it, every mode and signal against real sessions, is evidence/interrupt_evidence.py
(its table is in docs/security.md); these are the pieces that once failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import needs

from pytest_concurrency import lifetime
from pytest_concurrency.backends import scratch
from pytest_concurrency.measure import callgrind
from pytest_concurrency.roles import child_sessions
from pytest_concurrency.runner import isolate, lockstep

MARKER = "PYTEST_CONCURRENCY_TEST_MARKER"

# A launcher that starts a fork-server worker, hands it a case that runs for minutes, says when
# the case runs, and waits: it is then killed with SIGKILL.
LAUNCHER = textwrap.dedent("""
    import json, time
    from pytest_concurrency.runner import isolate
    worker = isolate.Worker("threading", fork_each=True)
    payload = {"workload": "switch", "params": {"rounds": 10 ** 9}, "rounds": 5, "warmup": 0,
               "with_memory": False, "measure": "time", "fork": True}
    worker._receive(60, "did not start")
    worker.proc.stdin.write((json.dumps(payload) + "\\n").encode())
    print(worker.proc.pid, flush=True)
    time.sleep(600)
""")


def _ours(marker: str) -> list[int]:
    """Live (not zombie) processes whose environment carries ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _left_after(marker: str, seconds: float) -> dict[int, str]:
    """Ours still alive once they had ``seconds`` to go, with their command lines; each then
    killed, not to leave them to the next test."""
    deadline = time.monotonic() + seconds
    while _ours(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {pid: _command_line(pid) for pid in _ours(marker)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.once
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_launcher_takes_its_worker_and_the_case_it_forked_along():
    """~3 s: a worker (a fork server, its case forked and running for minutes) once outlived
    a ``kill -9`` of its session until its case ended."""
    marker = f"{MARKER}={os.getpid()}-{time.monotonic_ns()}"
    key, value = marker.split("=")
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, key: value},
    )
    worker = int(launcher.stdout.readline())
    deadline = time.monotonic() + 30
    while len(_ours(marker)) < 3:  # the launcher, the fork server and the case it forked
        assert time.monotonic() < deadline, f"the case never started: {_ours(marker)}"
        time.sleep(0.1)
    launcher.kill()
    launcher.wait()
    left = _left_after(marker, 5)
    assert not left, f"alive 5 s after the kill: {left} (the worker was {worker})"


@pytest.mark.once
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_command_and_what_it_started_die_with_a_killed_parent():
    """~1 s: a parent killed (``kill -9``) while ``lifetime.run`` waits for a shell whose two
    children sleep: the shell, its children and the keeper go with it (PR_SET_PDEATHSIG alone
    reaches the shell only)."""
    marker = f"{MARKER}={os.getpid()}-{time.monotonic_ns()}"
    key, value = marker.split("=")
    code = (
        "from pytest_concurrency import lifetime\n"
        "print('started', flush=True)\n"
        "lifetime.run(['sh', '-c', 'sleep 600 & sleep 600 & wait'])\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, env={**os.environ, key: value}
    )
    try:
        assert parent.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 30
        while len(_ours(marker)) < 5:  # the parent, the keeper, the shell, its two sleeps
            assert time.monotonic() < deadline, _ours(marker)
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        left = _left_after(marker, 5)
    finally:
        for pid in _ours(marker):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"alive 5 s after the kill: {left}"


@pytest.mark.once
def test_a_command_run_apart_reads_as_subprocess_run_and_ends_with_its_call():
    """~1 s: status, output and input as ``subprocess.run``'s; a command ended by a signal reads
    as ended by it; one not found raises; past its timeout, what it started is gone too."""
    done = lifetime.run(
        ["sh", "-c", "cat; echo err >&2; exit 3"], input="in", capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "in", "err\n")
    assert lifetime.run("kill -TERM $$", shell=True).returncode == -signal.SIGTERM
    with pytest.raises(FileNotFoundError):
        lifetime.run(["no-such-command-here"])
    marker = f"{MARKER}={os.getpid()}-{time.monotonic_ns()}"
    key, value = marker.split("=")
    with pytest.raises(subprocess.TimeoutExpired):
        lifetime.run(["sh", "-c", "sleep 600 & wait"], timeout=1, env={**os.environ, key: value})
    left = _left_after(marker, 5)
    assert not left


#: A project whose build backend (run by pip in a process of its own) starts a process of its
#: own, says so in BUILD_STARTED, and waits: the base side of --concurrency-against=./slow, being
#: installed. pip, its backend and the backend's child are the run's child, grandchild and
#: great-grandchild (under lifetime.run, one more level: the keeper).
SLOW_BUILD = {
    "slow/pyproject.toml": """[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]
""",
    "slow/backend.py": """import os, subprocess, sys, time


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    compiler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["BUILD_STARTED"], "w") as fh:
        fh.write(str(compiler.pid))
    time.sleep(600)
""",
    "test_w.py": "def test_w(benchmark):\n    benchmark(sum, range(10))\n",
}


@pytest.mark.once
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize(
    "how",
    [
        pytest.param("kill -9", marks=[pytest.mark.slow, pytest.mark.essential]),
        pytest.param("SIGINT", marks=pytest.mark.slow),
    ],
)
def test_a_run_killed_or_interrupted_while_the_base_side_builds_leaves_nothing_running(
    tmp_path, how
):
    """16-19 s each by the clock at a load of 18 (about 4 CPU s: a pytest start-up, pip's, its
    build environment): the base side's install was a bare ``subprocess.run``, and a ``kill -9``
    of the run left pip, its build backend and what that started running on; a SIGINT to the run
    alone (a CI runner's cancel; a terminal's Ctrl-C reaches the run alone too, the install runs
    in a session of its own) killed pip and left the rest. Killed, nothing the run started
    outlives it; interrupted, it exits 2 with its one line, nothing running, its temporary
    directory gone."""
    for name, text in SLOW_BUILD.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    started, temporary = tmp_path / "started", tmp_path / "tmp"
    temporary.mkdir()
    marker = f"{MARKER}={os.getpid()}-{time.monotonic_ns()}"
    key, value = marker.split("=")
    env = {**os.environ, key: value, "BUILD_STARTED": str(started), "TMPDIR": str(temporary)}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--concurrency-against=./slow"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists() or not started.read_text():
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.1)
        assert len(_ours(marker)) >= 3  # the run, pip, its backend, the backend's child
        run.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGINT)
        out, _ = run.communicate(timeout=60)
        left = _left_after(marker, 5)
    finally:
        for pid in _ours(marker):  # not to leave them to the next test
            os.kill(pid, signal.SIGKILL)
    assert not left, f"alive 5 s after the {how}: {left}"
    if how == "SIGINT":
        assert run.returncode == 2, out
        assert out.strip().splitlines()[-1] == (
            "pytest-concurrency: interrupted: no verdict against the base side, nothing written"
        ), out
        assert "Traceback" not in out, out
        assert list(temporary.iterdir()) == [], out  # the base side's directory went with it


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@pytest.mark.once
def test_a_lane_outlives_its_cases_until_the_session_ends():
    """~0 s: a worker gets its parent's death signal when the thread that started it ends; a lane
    that ran out of cases must not end while another lane may use the worker it started."""

    class Pool:
        def run_case(self, spec, payload, timeout):
            return threading.current_thread().name

    ahead = isolate.Ahead(Pool(), jobs=2)
    for n in range(3):
        ahead.submit(("s", n), "s", {}, None)
    ahead.start()
    lanes = {ahead.take(("s", n)).result(timeout=30) for n in range(3)}
    alive = {t.name for t in threading.enumerate()}
    ahead.close()
    assert lanes <= alive, f"lanes ended before the session: {lanes - alive}"


@pytest.mark.once
def test_a_collect_only_session_writes_no_report_nor_baseline(pytester):
    """~0.5 s: the probe that counted sessions start (launch.py) is a --collect-only of the user's
    command line, and it once wrote the user's report, empty, which a Ctrl-C then left behind."""
    pytester.makepyfile(test_b="def test_b(benchmark):\n    benchmark(sum, range(10))\n")
    result = pytester.runpytest_inprocess(
        "--collect-only",
        "-p",
        "no:cacheprovider",
        "--concurrency-report-md=r.md",
        "--concurrency-save-baseline=b.json",
    )
    assert result.ret == 0
    assert not (pytester.path / "r.md").exists() and not (pytester.path / "b.json").exists()


@pytest.mark.once
def test_an_interrupted_session_writes_no_history_and_says_which_test_it_stopped_in(pytester):
    """~2 s: pytest-benchmark's --benchmark-autosave and --benchmark-json once saved a run the user had stopped."""
    pytester.makepyfile(
        test_b="""
        def test_a(benchmark):
            benchmark(sum, range(10))

        def test_stop(benchmark):  # not skipped by --benchmark-only
            raise KeyboardInterrupt
    """
    )
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "--benchmark-autosave",
        f"--benchmark-storage=file://{pytester.path / 'history'}",
        "--concurrency-save-baseline=b.json",
        "--benchmark-json=run.json",
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (
        "pytest-concurrency: interrupted in test_b.py::test_stop: no baseline"
        in result.stdout.str()
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (
        not list((pytester.path / "history").rglob("*.json"))
        and not (pytester.path / "b.json").exists()
    )
    assert not (pytester.path / "run.json").exists()


CTRL_C_IN_A_TEST = """
import os, signal, time

def test_a(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)

def test_ctrl_c(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)
    os.killpg(os.getpgrp(), signal.SIGINT)  # a terminal's Ctrl-C: to the watcher too
    time.sleep(30)

def test_ctrl_c_then_exit(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)
    try:
        os.killpg(os.getpgrp(), signal.SIGINT)
        time.sleep(30)
    except KeyboardInterrupt:
        time.sleep(0.5)  # the watcher has had the Ctrl-C as well
        os._exit(3)
"""


@pytest.mark.once
def test_a_ctrl_c_in_a_test_is_the_sessions_line_and_not_its_watchers(pytester, watched_session):
    """~3 s: the watcher (roles/watcher.py) shares the session's process group, so a Ctrl-C at a
    terminal reaches it too; it must not say the session's process ended."""
    pytester.makepyfile(test_b=CTRL_C_IN_A_TEST)
    ended = watched_session("--benchmark-only", "--concurrency-report-md=r.md", "-k", "not exit")
    assert ended.status == pytest.ExitCode.INTERRUPTED, ended
    said = [line for line in ended.err.splitlines() if line.startswith("pytest-concurrency")]
    assert said == [], ended  # the session's own line is on stdout, in its summary
    assert "pytest-concurrency: interrupted in test_b.py::test_ctrl_c: no baseline" in ended.out
    assert ended.watcher is not None and not ended.watcher_alive, ended
    assert "Traceback" not in ended.out + ended.err, ended
    assert not (pytester.path / "r.md").exists()


@pytest.mark.once
def test_a_watcher_outlives_a_ctrl_c_to_name_a_test_that_then_ended_the_process(
    pytester, watched_session
):
    """~3 s: a test that answers the Ctrl-C by ending its process is still named: the watcher
    ignores Ctrl-C (the session's own end tells it to go)."""
    pytester.makepyfile(test_b=CTRL_C_IN_A_TEST)
    ended = watched_session("--benchmark-only", "--concurrency-report-md=r.md", "-k", "then_exit")
    assert ended.status == 3, ended
    assert (
        "pytest-concurrency: test_b.py::test_ctrl_c_then_exit ended the session's process"
        in ended.err
    ), ended
    assert not (pytester.path / "r.md").exists()


@pytest.mark.once
def test_any_session_sweeps_what_killed_sessions_left_in_tmpdir(pytester, monkeypatch):
    """~1 s: only a counted session made (and so swept) a directory; a killed counted session's
    stayed until the next counted one."""
    tmp = pytester.mkdir("tmp")
    dead = tmp / f"{scratch.PREFIX}99999999-abc"
    dead.mkdir()
    (dead / ".alive").touch()  # nobody holds its lock
    (dead / "callgrind.1").write_bytes(b"x" * 1000)
    monkeypatch.setenv("TMPDIR", str(tmp))
    pytester.makepyfile(test_t="def test_t():\n    pass\n")
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == 0
    assert not dead.exists()


@pytest.mark.once
def test_a_relaunched_counted_session_takes_ctrl_c_only_once_started():
    """~0.5 s: under valgrind, Python's start-up takes 10-20 s, and a Ctrl-C in it was a traceback."""
    code = (
        "import signal; from pytest_concurrency import lifetime; "
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN); lifetime.take_ctrl_c(); "
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lifetime.with_parent(
            also=lifetime.ctrl_c_ignored
        ),  # as child_sessions starts it
    )
    assert done.stdout.split() == ["True", "True"]


@pytest.mark.once
def test_a_socket_path_too_long_is_one_line_naming_tmpdir(tmp_path):
    """~0 s: a deep TMPDIR made --concurrency-against end in a traceback (AF_UNIX path too long)."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    with pytest.raises(
        pytest.UsageError, match="at most 107 bytes; set TMPDIR to a shorter directory"
    ):
        lockstep.Coordinator(str(deep / "turns.sock"))


@pytest.mark.once
def test_a_fork_server_whose_first_child_failed_is_a_worker_that_did_not_start():
    """~0.2 s: with TMPDIR nearly full, the first child's failure was read as "ready", and every
    reply after it as the one before: a KeyError traceback in each test."""

    class FirstChildFails:  # a fork server as worker.py writes it when its first fork dies
        def worker_command(self, argv, env):
            script = (
                'import sys; print(\'{"ok": false, "error": "the case process ended with status 1"}\'); '
                "print('{\"ready\": true}', flush=True); sys.stdin.read()"
            )
            return [sys.executable, "-c", script], env

    worker = isolate.Worker("asyncio", fork_each=True, instrument=FirstChildFails())
    try:
        with pytest.raises(
            isolate.WorkerFailure, match="did not start: the case process ended with status 1"
        ):
            worker.request({"workload": "spawn"}, 30)
    finally:
        worker.kill()


@pytest.mark.once
def test_counting_with_no_room_in_tmpdir_is_one_line_naming_it(monkeypatch):
    """~0 s: with 64 KiB free, every counted case failed on a cut dump, each with a traceback."""
    monkeypatch.setattr(callgrind, "MIN_FREE_MB", 2**40)
    with pytest.raises(
        pytest.UsageError, match="MB free; counting writes callgrind's dumps there .* set TMPDIR"
    ):
        callgrind._check_room()


ONE_SLOW_LAYOUT = """
    import os, sys, time

    def in_a_layout_pass():  # started as one, or forked by the counted session
        if '"kind":"layout-pass"' in " ".join(sys.argv):
            return True
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            return b'"kind":"counted"' in fh.read()

    def test_plain(benchmark, concurrency_backend):
        def work():
            if in_a_layout_pass():  # hold it here
                open(os.environ["LAYOUT_STARTED"], "w").close()
                time.sleep(600)
            return sum(range(1000))

        benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=1)
"""


def _waiting_on_a_pipe(marker: str) -> bool:
    """Whether a process forked by the counted session (one of ours whose parent's command line is
    the counted role's) is blocked reading a pipe: the third layout, waiting to be told. Where the
    kernel hides what a process waits in (wchan "0" for all), whether one was forked and sleeps."""
    for pid in _ours(marker):
        try:
            with open(f"/proc/{pid}/status") as fh:
                fields = dict(x.split(":", 1) for x in fh if ":" in x)
            with open(f"/proc/{fields['PPid'].strip()}/cmdline", "rb") as fh:
                forked = b'"kind":"counted"' in fh.read()
            with open(f"/proc/{pid}/wchan") as fh:
                wchan = fh.read()
        except (OSError, KeyError):
            continue
        hidden = wchan in ("", "0") and fields["State"].split()[0] == "S"
        if forked and ("pipe" in wchan or hidden):  # pipe_wait, pipe_read, anon_pipe_read (6.x)
            return True
    return False


# 28 s here quiet; the third waiting 80 s beside two counted sessions: the passes start under
# valgrind, run their test, are interrupted
@pytest.mark.slow
@needs("valgrind", callgrind.unavailable_reason())
@pytest.mark.parametrize(
    "layouts_from, layouts",
    [
        pytest.param("fork", 2, id="fork"),
        pytest.param("start", 2, id="start"),
        # of three forked layouts the third waits on a pipe for layout 1's end (forked_layouts.py)
        pytest.param("fork", 3, id="fork-the-third-waiting"),
    ],
)
def test_ctrl_c_in_the_layout_passes_writes_nothing_and_leaves_nothing_running(
    pytester, layouts_from, layouts
):
    pytester.makepyfile(test_plain=ONE_SLOW_LAYOUT)
    marker, started, base = (
        f"{MARKER}={os.getpid()}-{time.monotonic_ns()}",
        pytester.path / "started",
        pytester.path / "b.json",
    )
    name, _, value = marker.partition("=")
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--benchmark-only",
            "--concurrency-backends=greenlet",
            "--concurrency-measure=instructions",
            f"--concurrency-layouts={layouts}",
            f"--concurrency-layouts-from={layouts_from}",
            f"--concurrency-save-baseline={base}",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, name: value, "LAYOUT_STARTED": str(started)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # as in a terminal: a background job ignores it
    try:
        deadline = time.monotonic() + 300
        while not started.exists():
            assert time.monotonic() < deadline and launcher.poll() is None, (
                "the layout pass never ran its test"
            )
            time.sleep(0.2)
        while layouts == 3 and not _waiting_on_a_pipe(marker):  # layout 1 holds: it waits
            assert time.monotonic() < deadline and launcher.poll() is None, (
                "the third layout never waited on its pipe"
            )
            time.sleep(0.2)
        launcher.send_signal(signal.SIGINT)  # as a terminal's Ctrl-C reaches the launcher
        out, _ = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 2, out
    # the layout passes run beside the counted session: it says where the Ctrl-C found it (in
    # its test, or waiting for them at its end), or the launcher says it had to kill it
    assert "interrupted" in out and "no baseline, report, verdict or rounds written" in out, out
    assert "Traceback" not in out and not base.exists()
    assert _ours(marker) == [], "a layout pass outlived the interrupted launcher"


# -- Ctrl-C at every moment of a session: one line, pytest's status 2, no traceback ------------------

#: A conftest that sends this process a Ctrl-C at one moment of its session (PATCHED: a function of
#: the plugin the Ctrl-C lands just before or just after), as a terminal would.
CTRL_C_AT = """
import os, signal

import {module} as where

signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job ignores it
_original = where.{function}


def _ctrl_c_{when}(*args, **kwargs):
    if "{when}" == "before":
        os.kill(os.getpid(), signal.SIGINT)
    result = _original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)
    return result


where.{function} = _ctrl_c_{when}
"""

CTRL_C_IN_CONFIGURE = """
import os, signal

signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    os.kill(os.getpid(), signal.SIGINT)
"""


@pytest.mark.once
@pytest.mark.parametrize(
    "conftest, said, baseline_written",
    [
        pytest.param(
            CTRL_C_IN_CONFIGURE,
            "pytest-concurrency: interrupted at start-up: no baseline, report, verdict or rounds written",
            False,
            id="start-up",  # exit 2 and not a word
        ),
        pytest.param(
            CTRL_C_AT.format(
                module="pytest_concurrency.measure.records", function="from_session", when="before"
            ),
            "pytest-concurrency: interrupted at the session's end: no baseline, report, verdict or "
            "rounds written",
            False,
            id="end",  # a KeyboardInterrupt traceback, and exit -2
        ),
        pytest.param(
            CTRL_C_AT.format(
                module="pytest_concurrency.store.baseline", function="save", when="after"
            ),
            "pytest-concurrency: interrupted after the baseline was saved to b.json\n",
            True,
            id="after-the-save",  # an ~80-line traceback, and exit -2
            marks=pytest.mark.slow,  # 14 s: a save first
        ),
    ],
)
def test_a_ctrl_c_at_start_up_or_at_the_end_is_one_line_and_status_2(
    pytester, conftest, said, baseline_written
):
    """~1.5 s each: one of them once said nothing, the others ended in a traceback."""
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_b="def test_b(benchmark):\n    benchmark(sum, range(10))\n")
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "--concurrency-save-baseline=b.json",
        "--concurrency-report-md=r.md",
    )
    out = result.stdout.str() + "\n" + result.stderr.str() + "\n"
    assert result.ret == pytest.ExitCode.INTERRUPTED, out
    assert said in out and out.count("pytest-concurrency: interrupted") == 1, out
    assert "Traceback" not in out
    assert (pytester.path / "b.json").exists() == baseline_written
    assert not (pytester.path / "r.md").exists()


@pytest.mark.once
def test_child_sessions_killed_after_a_ctrl_c_are_one_line(capsys):
    """~1 s: each counted process that had not ended (under valgrind, a start-up ignores Ctrl-C)
    once said the same line."""
    ignoring = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"
    procs = [
        subprocess.Popen([sys.executable, "-c", ignoring], start_new_session=True) for _ in range(3)
    ]
    time.sleep(0.5)  # each has started ignoring it (Python's start-up here is ~20 ms)
    child_sessions.stop([(proc, 0.5) for proc in procs])
    err = capsys.readouterr().err
    assert all(proc.returncode == -signal.SIGKILL for proc in procs)
    assert err.count("pytest-concurrency: interrupted") == 1, err
    assert "3 child sessions had not ended" in err, err


PROBE_CTRL_C = """
import os, signal, sys

if '"kind":"probe"' in " ".join(sys.argv):  # the launcher is collecting this command line
    os.kill(os.getppid(), signal.SIGINT)
"""


@pytest.mark.once
@needs("valgrind", callgrind.unavailable_reason())
def test_ctrl_c_while_a_counted_run_collects_its_tests_is_one_line(pytester):
    """~3 s: the launcher's probe (a --collect-only of the command line) once ended in a traceback."""
    pytester.makeconftest(PROBE_CTRL_C)
    pytester.makepyfile(test_b="def test_b(benchmark):\n    benchmark(sum, range(10))\n")
    launcher = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only"]
        + ["--concurrency-measure=instructions", "--concurrency-save-baseline=b.json"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    out = launcher.stdout + launcher.stderr
    assert launcher.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "pytest-concurrency: interrupted at start-up: no baseline" in out, out
    assert "Traceback" not in out and not (pytester.path / "b.json").exists()


BASE_LIB = "def work():\n    return sum(i * i for i in range(20000))\n"
USES_LIB = """
import mylib

def test_work(benchmark):
    benchmark(mylib.work)
"""


def _two_sided_project(pytester) -> None:
    """mylib at 1.0 here and in ``base/``, and a test that uses it: a run against ``base``."""
    pyproject = (Path(__file__).parent / "data" / "mylib.pyproject.toml").read_text()
    for root in (pytester.path, pytester.path / "base"):
        (root / "mylib").mkdir(parents=True, exist_ok=True)
        (root / "mylib" / "__init__.py").write_text(BASE_LIB)
        (root / "pyproject.toml").write_text(pyproject.format(version="1.0"))
    pytester.makepyfile(test_mylib=USES_LIB)


@pytest.mark.slow  # 122 s here (load 8): the base installed, its counted run started, the Ctrl-C
@needs("valgrind", callgrind.unavailable_reason())
def test_ctrl_c_in_the_base_sides_counted_run_leaves_nothing_in_tmpdir(pytester):
    """The base side's counted run was terminated at once, and left its directory in TMPDIR."""
    _two_sided_project(pytester)
    tmp = pytester.mkdir("tmp")
    marker = f"{MARKER}={os.getpid()}-{time.monotonic_ns()}"
    name, _, value = marker.partition("=")
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only"]
        + ["--concurrency-measure=instructions", "--concurrency-against=base", "test_mylib.py"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, name: value, "TMPDIR": str(tmp)},
        start_new_session=True,  # a terminal's Ctrl-C reaches the whole group: killpg below
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not list(tmp.glob("pytest-concurrency-*/passes-*")):  # the base side counts
            assert time.monotonic() < deadline and run.poll() is None, "the base never counted"
            time.sleep(0.2)
        os.killpg(run.pid, signal.SIGINT)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 2, out
    assert out.count("pytest-concurrency: interrupted") == 1 and "Traceback" not in out, out
    assert _ours(marker) == [] and not list(tmp.iterdir()), list(tmp.iterdir())


@pytest.mark.slow  # ~12 s: pip started on the base side, then the Ctrl-C
def test_ctrl_c_while_the_base_side_installs_leaves_nothing_in_tmpdir(pytester):
    """pip, killed by the Ctrl-C, once left its build directories in TMPDIR (pip-target-*)."""
    _two_sided_project(pytester)
    tmp = pytester.mkdir("tmp")
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only"]
        + ["--concurrency-against=base", "test_mylib.py"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
        start_new_session=True,  # a terminal's Ctrl-C reaches the whole group: killpg below
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not list(tmp.glob("pytest-concurrency-*/against-*/installer-tmp/*")):  # pip works
            assert time.monotonic() < deadline and run.poll() is None, "pip never started"
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGINT)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 2, out
    assert out.count("pytest-concurrency: interrupted") == 1 and "Traceback" not in out, out
    assert not list(tmp.iterdir()), list(tmp.rglob("*"))[:10]


# -- two Ctrl-Cs: the second lands while pytest reports the first -------------------------------

SLEEPING_BENCHMARK = """
import os, time

def test_sleeps(benchmark):
    def nap():
        open("started", "w").close()
        time.sleep(0.05)

    benchmark.pedantic(nap, rounds=400)
"""


@pytest.mark.once
@pytest.mark.parametrize(
    "mode, gap",
    [(["--benchmark-only"], 0.2), (["--benchmark-only"], 0.5), (["--concurrency-isolate"], 0.3)],
    ids=["time-0.2s", "time-0.5s", "isolate-0.3s"],
)
def test_two_ctrl_cs_write_no_baseline_nor_report(pytester, mode, gap):
    """~5-15 s each here (a real session, stopped in its benchmark; load 3-10 on 2 cores): a second
    Ctrl-C 0.2-1 s after the first landed while pytest formatted the first, whose end then saw exit
    status 0 and saved the stopped session as the baseline, and wrote its report."""
    pytester.makepyfile(test_s=SLEEPING_BENCHMARK)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *mode, "test_s.py"]
        + [
            "--benchmark-only",
            "--concurrency-save-baseline=b.json",
            "--concurrency-report-md=r.md",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C reaches the whole group: killpg below
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not (pytester.path / "started").exists():
            assert time.monotonic() < deadline and run.poll() is None, "it never measured"
            time.sleep(0.05)
        time.sleep(0.3)  # into its rounds
        os.killpg(run.pid, signal.SIGINT)
        time.sleep(gap)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    # -2: the second Ctrl-C reached Python after pytest had returned (on a loaded machine, 0.5 s
    # apart too); nothing written either way
    assert run.returncode in (pytest.ExitCode.INTERRUPTED, -signal.SIGINT), out
    assert not (pytester.path / "b.json").exists() and not (pytester.path / "r.md").exists(), out
    assert out.count("pytest-concurrency: interrupted") == 1, out
    assert "no baseline, report, verdict or rounds written" in out and "Traceback" not in out, out


@pytest.fixture
def pythons_handler():
    """Python's own SIGINT handler while the test runs (a background job's is SIG_IGN)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_the_stop_flag_is_set_by_the_first_signal_and_hands_it_on(pythons_handler):
    """~0 s: the flag a session's end reads (``watchdog.StopFlag``); Python's handler still raises."""
    from pytest_concurrency.backends import watchdog

    told = []
    before = signal.getsignal(signal.SIGINT)
    flag = watchdog.StopFlag(lambda: told.append(1))
    flag.arm()
    try:
        for _ in range(2):
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
    finally:
        flag.disarm()
    assert flag.signum == signal.SIGINT and told == [1]
    assert signal.getsignal(signal.SIGINT) is before


def test_set_aside_the_stop_flag_puts_the_handler_back_and_notes_a_ctrl_c_out_of_it(
    pythons_handler,
):
    """~0 s: around a test, Python's handler (an event loop's Ctrl-C); after it, the flag's."""
    from pytest_concurrency.backends import watchdog

    before = signal.getsignal(signal.SIGINT)
    flag = watchdog.StopFlag()
    flag.arm()
    try:
        with flag.set_aside():
            assert signal.getsignal(signal.SIGINT) is before
        assert signal.getsignal(signal.SIGINT) is not before and flag.signum is None
        with pytest.raises(KeyboardInterrupt), flag.set_aside():
            raise KeyboardInterrupt
        assert flag.signum == signal.SIGINT
    finally:
        flag.disarm()
    assert signal.getsignal(signal.SIGINT) is before


PYTHONS_HANDLER_IN_TESTS = """
import asyncio, signal

def test_sees_pythons_handler(benchmark):
    def work():  # asyncio.run (and trio.run) cancel cleanly on a Ctrl-C only under this handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        asyncio.run(asyncio.sleep(0))

    benchmark.pedantic(work, rounds=2)
"""


def test_a_tests_event_loop_sees_pythons_own_ctrl_c_handler(pytester):
    """~3-9 s: with the session's flag handler in place during tests, trio.run took a Ctrl-C without
    its protection and ended in "Exception ignored" tracebacks from its closed loop."""
    pytester.makeconftest(
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n\n"
        "def pytest_sessionfinish(session):\n"
        "    armed = signal.getsignal(signal.SIGINT) is not signal.default_int_handler\n"
        "    print('armed at the end:', armed)\n"
    )
    pytester.makepyfile(test_h=PYTHONS_HANDLER_IN_TESTS)
    result = pytester.runpytest_subprocess("--benchmark-only", "-p", "no:cacheprovider", "-s")
    assert result.ret == 0, result.stdout.str()
    assert "armed at the end: True" in result.stdout.str()
