"""How long a child process lives: it dies with its parent, ends with its group, and takes a Ctrl-C
only when it can end cleanly. Imports nothing of the package, so every layer may use it: the
backends' workers, the runners' fork servers, the native programs, the child pytest sessions
(child_sessions.py), and every other command the package runs (``run``: pip, git, tar, the native
toolchains, a bisection's steps)."""

import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

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


class Child(Protocol):
    """What ``kill_group`` needs of a child: a ``subprocess.Popen`` or alike."""

    pid: int

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...


def kill_group(proc: Child) -> None:
    """Kill a child started in a group of its own, and whatever it started there; reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


#: The keeper of a command ``run`` starts: a few lines of Python (``-I -S``: nothing of the user's
#: imported) in a session of its own, which get SIGTERM when this process dies (``with_parent``).
#: It runs the command in a process group of its own, and kills that group when it gets SIGTERM
#: (this process died, or ``run`` was stopped) and when the command ends: PR_SET_PDEATHSIG alone
#: reaches only its child, and pip's build backend, the compiler it starts, cargo's rustc ran on.
#: SIGTERM is blocked from before the fork until the group exists and the handler is in place; a
#: command ended by a signal ends its keeper by the same one, so the caller reads its status.
_KEEPER = r"""import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as exc:
        os.write(2, f"{sys.argv[1]}: {exc}\n".encode(errors="replace"))
    os._exit(127)
try:
    os.setpgid(pid, pid)  # as the child does: whichever runs first, the group exists
except OSError:
    pass  # the child made it and has run the command already
def end(*_):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
def ended(signum, _):
    end()
    os._exit(128 + signum)
signal.signal(signal.SIGTERM, ended)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
end()  # what the command left running in its group
if code < 0:
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run(
    cmd: Sequence[str] | str,
    *,
    input: str | bytes | None = None,
    timeout: float | None = None,
    capture_output: bool = False,
    shell: bool = False,
    **popen,
) -> subprocess.CompletedProcess:
    """``subprocess.run`` for a command that starts processes of its own: it and all it starts
    (in its process group) die with this process, even by ``kill -9`` (Linux), and end with the
    call, whatever ends it (a Ctrl-C, a SIGTERM taken as one, ``timeout``: then
    ``subprocess.TimeoutExpired`` is raised). A Ctrl-C at the terminal reaches this process alone.
    A command not found raises ``FileNotFoundError``, as ``subprocess.run`` does."""
    argv = [cmd] if isinstance(cmd, str) else list(cmd)
    if shell:
        argv = ["/bin/sh", "-c", *argv]
    env = popen.get("env")
    if shutil.which(argv[0], path=(os.environ if env is None else env).get("PATH")) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    if capture_output:
        popen.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _KEEPER, *argv],
        start_new_session=True,
        preexec_fn=with_parent(signal.SIGTERM),
        **popen,
    ) as keeper:
        try:
            out, err = keeper.communicate(input, timeout)
        except BaseException:  # a Ctrl-C, an interrupted bisection, the timeout
            if keeper.poll() is None:
                keeper.send_signal(signal.SIGTERM)  # it kills the command's group, then ends
            keeper.wait()
            raise
    return subprocess.CompletedProcess(argv, keeper.returncode, out, err)
