"""A user's plain benchmark test, run in a child forked for it (``--concurrency-isolate``).

Why: a user's test can do what no guard inside the session survives: ``os._exit``, a segfault in
C code, a hang outside ``backend.run`` or in C code (where SIGALRM does not reach), non-daemon
threads that keep the interpreter from ever exiting. Forked once its fixtures are set up, the
child runs only the test's call and what the plugin reads around it (kernel figures, the memory
pass), sends back the outcome and pytest-benchmark's record, and ends with ``os._exit``; the
session takes the record as if measured here. The child leads a process group of its own, dies
with the session (PDEATHSIG), and is killed with everything it started when it stops reporting:
each ``backend.run`` call that ends (a test with ``benchmark`` alone: each round) counts one in a
word of memory both processes share (inside the timed call: a store, not a syscall that wakes the
session, which the kernel figures would count), and ``--concurrency-timeout`` (plus a grace, so
that the child's own watchdog names where a stalled run waited: ``watchdog.silence``) is the
longest it may go without one.
"""

import faulthandler
import json
import mmap
import os
import selectors
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable

from .. import lifetime
from ..backends import watchdog

DUMP_S = 1.0  # a silent child's time to write its threads' stacks (SIGUSR1) before it is killed
EXIT_S = 5.0  # after its reply, the child's time to flush its output and exit before it is killed
POLL_S = 0.1  # how often the child's end is looked for while it runs


def run(
    call: Callable[[], dict], signs: Callable[[Callable[[], None]], None], timeout: float | None
) -> tuple[dict | None, bool, str | None]:
    """Run ``call`` in a child forked for it, after ``signs(tick)`` (there) made ``tick()`` follow
    each sign of life (a ``backend.run`` call that ends: ``after_each_run``; a round). Returns the
    child's reply (``call``'s dict, with ``threads``: the non-daemon threads it left) or None,
    whether it was killed for going silent, and how it ended (None: exit status 0). Raises
    ``OSError`` when no child could be started."""
    arm = lifetime.with_parent(signal.SIGKILL)
    runs = memoryview(mmap.mmap(-1, 8)).cast("Q")  # shared (MAP_SHARED): the child's signs of life
    readable, writable = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # or what is buffered would be written twice
        stream.flush()
    with warnings.catch_warnings():
        # Python 3.12+ warns on fork with threads alive (the session's may drain a worker's pipe):
        # the child only runs the test's call and never takes a lock those threads use.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            pid = os.fork()
        except OSError as exc:
            pid, refused = -1, exc.strerror
    if pid < 0:
        os.close(readable)
        os.close(writable)
        raise OSError(refused)
    if pid == 0:
        os.close(readable)
        _child(call, signs, writable, arm, runs)  # never returns
    os.close(writable)
    try:
        # the child does too: whichever runs first, a kill below reaches its group
        os.setpgid(pid, pid)
    except OSError:
        pass
    try:
        reply, silent = _wait(pid, readable, runs, timeout)
    finally:  # a Ctrl-C while it runs included: nothing of it may run on
        os.close(readable)
        how = _end(pid)
    return reply, silent, how


def _wait(pid: int, fd: int, runs, timeout: float | None) -> tuple[dict | None, bool]:
    """(the child's reply or None, whether it went silent) once it has ended or sent its reply.

    The end of the pipe is no sign: a process the test started may hold it open."""
    limit = None if not timeout else watchdog.silence(timeout)
    data = bytearray()
    last, seen = time.monotonic(), 0
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not data.endswith(b"\n"):  # its reply is one line
            if _exited(pid):
                data += _read(fd)
                break
            if runs[0] != seen:
                last, seen = time.monotonic(), runs[0]
            if limit is not None and time.monotonic() - last > limit:
                _dump_stacks(pid)
                return None, True
            if sel.select(POLL_S):
                chunk = _read(fd)
                if chunk:
                    data += chunk
                else:  # closed: only its end is left to see
                    sel.unregister(fd)
        else:
            _await_exit(pid)
    try:
        return (json.loads(data) if data.endswith(b"\n") else None), False
    except ValueError:  # cut short by its end
        return None, False


def _read(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _exited(pid: int) -> bool:
    """Whether the child has ended (left unreaped, so its pid and group id stay its own)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _await_exit(pid: int) -> None:
    """After its reply the child only flushes its output and exits."""
    until = time.monotonic() + EXIT_S
    while not _exited(pid) and time.monotonic() < until:
        time.sleep(POLL_S / 10)


def _dump_stacks(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(DUMP_S)


def _end(pid: int) -> str | None:
    """Kill the child's group (what the test left running; the child, if it still runs), reap the
    child; how it ended, or None if it exited with 0."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not _exited(pid):  # not in its group after all (both setpgid calls failed)
        os.kill(pid, signal.SIGKILL)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    code = os.waitstatus_to_exitcode(status)
    return lifetime.how_it_ended(code) if code else None


# -- in the child --------------------------------------------------------------------------------------


def _child(call: Callable[[], dict], signs, fd: int, arm, runs) -> None:
    try:
        try:
            os.setpgid(0, 0)
        except OSError:  # the session made it so first
            pass
        arm()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # the session stops it, not a Ctrl-C
        try:
            faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        except (AttributeError, ValueError, OSError):  # sys.stderr without a descriptor
            faulthandler.register(signal.SIGUSR1, file=sys.__stderr__ or 2, all_threads=True)
        signs(lambda: runs.__setitem__(0, runs[0] + 1))
        reply = call()
        reply["threads"] = [t.name for t in watchdog.threads_left()]
        _send(fd, json.dumps(reply, default=repr).encode() + b"\n")
        code = 0
    except BaseException:
        traceback.print_exc()
        code = 70  # EX_SOFTWARE: ours, not the test's (whose failures are in the reply)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    os._exit(code)


def after_each_run(backend, then: Callable[[], None]) -> None:
    """``then()`` after each ``backend.run`` call ends."""
    uncounted = backend.run

    def run(main, *args):
        try:
            return uncounted(main, *args)
        finally:
            then()

    backend.run = run


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
