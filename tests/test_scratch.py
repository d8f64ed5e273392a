"""The process's own temporary directory: 0700, gone at exit, and swept after a SIGKILL."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys

from pytest_concurrency.backends import scratch

HOLD = (
    "import sys, time; from pytest_concurrency.backends import scratch; "
    "print(scratch.subdir('callgrind-'), flush=True); " + "time.sleep(60)"
)


def _child(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    inner = proc.stdout.readline().strip()
    return proc, os.path.dirname(inner)


def test_a_live_sessions_directory_is_kept_and_a_killed_ones_is_swept(tmp_path):
    proc, own = _child(tmp_path)
    try:
        assert os.path.basename(own).startswith(f"{scratch.PREFIX}{proc.pid}-")
        assert stat.S_IMODE(os.stat(own).st_mode) == 0o700
        other = (
            tmp_path / "pytest-concurrency-callgrind-old"
        )  # not one of ours by name: never touched
        other.mkdir()
        assert scratch.sweep(str(tmp_path)) == [] and os.path.isdir(own)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert os.path.isdir(own)  # nothing runs at a SIGKILL
    assert scratch.sweep(str(tmp_path)) == [own]
    assert sorted(os.listdir(tmp_path)) == ["pytest-concurrency-callgrind-old"]


def test_a_session_that_ends_removes_its_directory(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", HOLD.replace("time.sleep(60)", "pass")],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        check=True,
    )
    assert done.stdout.strip() and os.listdir(tmp_path) == []


def test_a_sweep_while_a_directory_is_being_made_leaves_it(tmp_path, monkeypatch):
    """~0 s: a sweep (another session's) that looks between the lock file's making and its lock
    must leave the directory: it used to find ``.alive`` unlocked, take the lock and remove it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scratch.tempfile, "tempdir", None)  # gettempdir reads TMPDIR again
    monkeypatch.setattr(scratch, "_own", None)
    monkeypatch.setattr(scratch, "_lock_fd", None)
    monkeypatch.setattr(scratch, "_owner", None)
    real, swept = scratch.fcntl.flock, []

    def sweep_first(fd, how):
        if not swept:  # the directory's own lock, about to be taken: another sweep looks first
            swept.append(scratch.sweep(str(tmp_path)))
        return real(fd, how)

    monkeypatch.setattr(scratch.fcntl, "flock", sweep_first)
    own = scratch.directory()
    try:
        assert swept == [[]] and os.path.isdir(own)
        assert os.listdir(own) == [".alive"]
        monkeypatch.setattr(scratch.fcntl, "flock", real)
        assert scratch.sweep(str(tmp_path)) == []  # locked: alive
    finally:
        scratch.remove()
