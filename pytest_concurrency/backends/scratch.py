"""The process's own temporary directory: everything the plugin writes to TMPDIR goes in it.

One per process that needs one, named ``pytest-concurrency-<pid>-<random>`` in the system's
temporary directory, readable by its owner alone (0700), removed when the process exits.
A process killed with SIGKILL cannot remove its own: each one holds an ``flock`` on its
``.alive`` file while it lives (the kernel lets go of it when the process dies, whatever
killed it), and the next session to make one removes every directory of that prefix whose
lock it can take. A lock, not a pid, so that another container sharing /tmp, whose pids
mean nothing here, never loses a live directory.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import tempfile
import time

PREFIX = "pytest-concurrency-"
_NAME = re.compile(re.escape(PREFIX) + r"\d+-[\w]+")
_LOCK = ".alive"
_UNLOCKED_GRACE_S = 60.0  # a directory without its lock file yet may be one being made right now

_own: str | None = None
_lock_fd: int | None = None
_owner: int | None = None  # the pid that made it: a forked child that exits must not remove it


def directory() -> str:
    """This process's directory, made (after sweeping dead sessions') on first use."""
    global _own, _lock_fd, _owner
    if _own is None or _owner != os.getpid():
        sweep()
        path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")  # mode 0700
        # locked before it is named: a sweep that opened ``.alive`` between its making and its
        # lock took the lock and removed this live directory
        making = os.path.join(path, _LOCK + "-making")
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(making, os.path.join(path, _LOCK))
        _own, _lock_fd, _owner = path, fd, os.getpid()
        atexit.register(remove)
    return _own


def subdir(prefix: str) -> str:
    """A fresh directory inside this process's own (removed with it)."""
    return tempfile.mkdtemp(prefix=prefix, dir=directory())


def remove() -> None:
    global _own, _lock_fd
    if _own is None or _owner != os.getpid():
        return
    shutil.rmtree(_own, ignore_errors=True)
    if _lock_fd is not None:
        os.close(_lock_fd)
    _own = _lock_fd = None


def sweep(root: str | None = None) -> list[str]:
    """Remove the directories of this user's sessions that died without removing their own;
    returns them. One whose lock is held, or that is not ours, or not one of ours, is left."""
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not _NAME.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or not _dead(entry.path):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _dead(path: str) -> bool:
    """Whether the session that made ``path`` is gone: its lock can be taken (or it never made one)."""
    try:
        fd = os.open(os.path.join(path, _LOCK), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:  # killed between making it and locking, or being made right now
        return time.time() - os.stat(path).st_mtime > _UNLOCKED_GRACE_S
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True
