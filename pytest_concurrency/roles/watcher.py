"""A time session's watcher: the line that names the test that ended the session's process.

A user's test that calls ``os._exit`` or segfaults ends the process it runs in, and nothing in
that process can say so: measured in the session's own process (time mode, without
``--concurrency-isolate``, or with it the body of a ``concurrency_benchmark`` test, which it does
not fork), the session ends with the test's exit status and not a word. So the
user's session starts a watcher: a few lines of Python in a child of its own, its stdin a pipe
from the session, its stderr the session's. At each test's start the session writes it the line
to say should the process end now (crash.py's wording, naming the test), another when the test
is done, and ``E`` when the session ends as sessions end (passed, failed, ``-x``, ``pytest.exit``
and Ctrl-C alike: pytest's config cleanup). When the pipe closes without that ``E``, the process
is gone, and the watcher prints its last line and exits; after an ``E`` it exits without a word.

It dies with its parent (the pipe's end), ignores Ctrl-C (the session's own end tells it) and
starts with ``-I -S`` (no site, nothing of the user's imported). It costs ~0.6 ms to start (its
Python's start-up is not waited for), a write to the pipe at each test's start and end (none per
round), and ~3.5 ms at the session's end, to reap it (docs/security.md, "Nothing lost").
"""

import os
import signal
import subprocess
import sys

import pytest

from . import crash

#: The watcher: the last line before the pipe's end is what it says; ``E`` says nothing.
CODE = r"""import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # blocked until now: see start()
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
say = b""
for line in sys.stdin.buffer:
    if line.startswith(b"E"):
        os._exit(0)  # at once: the session waits for it (to reap it)
    say = line[1:]
if say:
    try:
        os.write(2, b"\n" + say)  # the terminal may be mid-line (the progress dots)
    except OSError:
        pass
"""

#: How long the session's end waits for the watcher to read its ``E`` and exit (it is reaped,
#: not left a zombie); a watcher slower than that is left to exit by itself.
REAP_S = 1.0

_OPEN: set[int] = set()  # the pipes' ends this process writes to: none of a forked child's


def _forked() -> None:
    """In a child forked from the session (a test's multiprocessing pool, say): its copy of the
    pipe's end must not keep the pipe open once the session's process is gone."""
    if _OPEN:
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in _OPEN:
            os.dup2(null, fd, inheritable=False)
        os.close(null)
        _OPEN.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class Watcher:
    """The session's end of the pipe, and the hooks that say what is in progress."""

    def __init__(self, proc: subprocess.Popen, fd: int, isolated: bool = False):
        self.proc = proc
        self.isolated = isolated  # --concurrency-isolate: the test was not one it forks
        self.fd: int | None = fd
        self.owner = os.getpid()
        _OPEN.add(fd)
        self._say(crash.outside_tests("before its first test"))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self._say(crash.in_session(nodeid, self.isolated))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self._say(crash.outside_tests(f"after {nodeid}, before the next test"))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session) -> None:
        self._say(
            crash.outside_tests(
                "at its end, after its tests (judging them, timing benchmarks again, writing "
                "its files)",
                "what it had not written by then is not written",
            )
        )

    def end(self) -> None:
        """The session ended as sessions end: the watcher exits without a word."""
        if os.getpid() != self.owner:  # a forked child's copy: the session's own says it
            return
        self._write(b"E\n")
        self._close()
        try:
            self.proc.wait(REAP_S)
        except subprocess.TimeoutExpired:
            pass

    def _say(self, line: str) -> None:
        text = line.replace("\r", "\\r").replace("\n", "\\n")
        self._write(b"S" + text.encode("utf-8", "backslashreplace") + b"\n")

    def _write(self, data: bytes) -> None:
        if self.fd is None or os.getpid() != self.owner:
            return
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:  # the watcher is gone (killed): the session goes on without it
            self._close()

    def _close(self) -> None:
        if self.fd is not None:
            _OPEN.discard(self.fd)
            os.close(self.fd)
            self.fd = None


def start(config, isolated: bool = False) -> Watcher | None:
    """Start the watcher of this session, registered for its hooks; None when it cannot start
    (no interpreter to run, no process or pipe to spare): the session goes on without it."""
    if not sys.executable or not hasattr(signal, "pthread_sigmask"):  # POSIX only
        return None
    try:
        read, write = os.pipe()
    except OSError:
        return None
    # Ctrl-C blocked while it starts: a Ctrl-C to the terminal's process group in its start-up,
    # before it ignores one, would end it; here, it is delivered once the watcher has started
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", CODE], stdin=read)
    except OSError:
        os.close(write)
        return None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(read)
    watcher = Watcher(proc, write, isolated)
    config.pluginmanager.register(watcher, "concurrency-watcher")
    config.add_cleanup(watcher.end)
    return watcher
