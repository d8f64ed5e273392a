"""How long a child process lives: it dies with its parent, ends with its group, and takes a Ctrl-C
only when it can end cleanly. Imports nothing of the package, so every layer may use it: the
backends' workers, the runners' fork servers, the native programs and the child pytest sessions
(child_sessions.py)."""

import os
import signal
import subprocess
import sys
from collections.abc import Callable

#: How long a child pytest session gets to end by itself after a Ctrl-C forwarded to it (a counted
#: session under valgrind, tens of times slower, included) before its group is killed.
INTERRUPT_GRACE_S = 10.0

#: libc's functions a child calls between fork and exec, looked up here: in a child forked from a
#: process with threads, looking one up could wait forever on a lock a vanished thread held.
_PRCTL = _PERSONALITY = None
if sys.platform.startswith("linux"):
    import ctypes

    _LIBC = ctypes.CDLL(None)
    _PRCTL, _PERSONALITY = _LIBC.prctl, _LIBC.personality


def how_it_ended(code: int | None) -> str:
    """A child's exit code (``Popen.returncode``, ``os.waitstatus_to_exitcode``) in words."""
    if code is None or code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"killed by signal {-code}"


def with_parent(
    sig: int = signal.SIGKILL, also: Callable[[], object] | None = None
) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets ``sig`` when the thread that started it ends, even by
    ``kill -9`` of this process (PR_SET_PDEATHSIG, Linux), and exits at once if this process died
    before that; then ``also``. A ``kill -9`` of a run so leaves nothing running on, nor writing
    results afterwards."""
    parent = os.getpid()

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(1, sig)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)
        if also is not None:
            also()

    return preexec


def ctrl_c_ignored() -> None:
    """In a ``preexec_fn`` of a pytest session its launcher forwards a Ctrl-C to: the child ignores
    one until its session has started (``take_ctrl_c``). Python's start-up and pytest's take seconds
    (tens under valgrind), and an interrupt in them is a traceback of whatever import it hit; the
    launcher kills a child that has not ended soon after it forwarded the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def take_ctrl_c() -> None:
    """In such a session, once pytest's session has started: Ctrl-C ends it, with pytest's summary
    and the plugin's line."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def no_address_randomization() -> None:
    """In a ``preexec_fn``: the child's address layout is the same in every run (Linux)."""
    if _PERSONALITY is not None:
        _PERSONALITY(0x0040000)  # ADDR_NO_RANDOMIZE


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a child started in a group of its own, and whatever it started there; reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
