"""The pytest sessions the plugin starts itself: launched, watched and stopped in one way.

Every child pytest process (a counted run's probe, passes and counted session, the two sides
against a base, the suspects' second session, the arbiter's counted run, a bisection's steps) is
started here: ``sys.executable -m pytest`` with this interpreter's flags (``command``; a layout
pass's pads its heap first; under valgrind, ``callgrind.command`` wraps it), in a session (process
group) of its own that dies with this process (PR_SET_PDEATHSIG: a ``kill -9`` of a run leaves
nothing running on, nor writing results afterwards), its output in a log (``tail`` reads it back)
or on this terminal.

One Ctrl-C policy, for all of them (``Children``): a Ctrl-C at the terminal reaches this process
alone (a SIGTERM while it waits is taken as one); it forwards one SIGINT to each child still
running, which ends as an interrupted pytest session does (its line, nothing written, status 2),
kills the group of any child not ended ``lifetime.INTERRUPT_GRACE_S`` later (saying so once), and
the KeyboardInterrupt goes on to the caller, whose line says what was not written. A child that
runs child sessions itself gets their grace on top of its own (``depth``).
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Protocol

from .. import lifetime
from ..exit_codes import Exit
from ..measure import layouts
from .argv import own_coverage_data


def command(args: list[str], layout: int = 0) -> list[str]:
    """The command line of a child pytest session with pytest's arguments ``args``, its heap moved
    to ``layout`` before pytest is imported (measure/layouts.py); -W, -X, -O... as given here."""
    from subprocess import _args_from_interpreter_flags  # type: ignore[attr-defined]

    start = ["-m", "pytest"]
    if layout:
        start = ["-c", f"{layouts.padding(layout)}\n{_RUN_PYTEST}"]
    return [sys.executable, *_args_from_interpreter_flags(), *start, *args]


_RUN_PYTEST = "import runpy\nrunpy.run_module('pytest', run_name='__main__', alter_sys=True)"


class Process(Protocol):
    """A child session as this module handles it: a ``subprocess.Popen``, or a session another
    process forked for this one (shared_start.py's ``Forked``)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...


class Children:
    """The child sessions started in a ``with`` block (a SIGTERM in it taken as a Ctrl-C, unless
    this process handles SIGTERM itself: a bisection does). Those still running when it ends are
    stopped by the one policy (``stop``); after a Ctrl-C, a child on this terminal that ended as
    interrupted has said where, and this process exits 2 without a line of its own."""

    def __init__(self) -> None:
        self.procs: list[tuple[Process, float, bool]] = []  # grace, on this terminal
        self._logs = contextlib.ExitStack()
        self._took_sigterm = False

    def start(
        self,
        argv: list[str],
        *,
        cwd: str | Path | None = None,
        env: dict | None = None,
        log: str | Path | None = None,
        fds: tuple[int, ...] = (),
        quiet_start: bool = False,
        same_layout: bool = False,
        depth: int = 0,
        **popen,
    ) -> subprocess.Popen:
        """Start ``argv`` in ``cwd`` with ``env`` (this process's by default), its output in ``log``
        (None: this terminal, or ``popen``'s pipes). ``fds``: handed to the child alone (closed
        here once it started); ``quiet_start``: it ignores Ctrl-C until its session has started
        (``lifetime.take_ctrl_c``); ``same_layout``: no address-space randomization; ``depth``:
        how many levels of child sessions it runs itself, each with its grace."""
        out = self._logs.enter_context(open(log, "wb")) if log is not None else None

        def also() -> None:  # after the death signal, in the child
            if same_layout:
                lifetime.no_address_randomization()
            if quiet_start:
                lifetime.ctrl_c_ignored()

        if out is not None:
            popen.update(stdout=out, stderr=subprocess.STDOUT)
        proc = subprocess.Popen(
            argv,
            cwd=None if cwd is None else str(cwd),
            env=env if env is not None else dict(os.environ),
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal is this process's to forward
            preexec_fn=lifetime.with_parent(also=also),
            pass_fds=fds,
            **popen,
        )
        for fd in fds:  # the child's alone now: a lock it holds ends with it
            os.close(fd)
        terminal = out is None and "stdout" not in popen
        self.procs.append((proc, lifetime.INTERRUPT_GRACE_S * (1 + depth), terminal))
        return proc

    def adopt(self, proc: Process, *, on_terminal: bool) -> Process:
        """A session started for this process elsewhere, in a group of its own, stopped as
        those ``start`` started."""
        self.procs.append((proc, lifetime.INTERRUPT_GRACE_S, on_terminal))
        return proc

    def stop(self) -> None:
        """Those still running, stopped by the one policy (``stop``)."""
        stop([(proc, grace) for proc, grace, _ in self.procs if proc.poll() is None])

    def __enter__(self) -> "Children":
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            self._took_sigterm = True
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            self.stop()
        finally:
            self._logs.close()
            if self._took_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        said = any(on and p.returncode == Exit.INTERRUPTED for p, _, on in self.procs)
        if kind is KeyboardInterrupt and said:
            raise SystemExit(Exit.INTERRUPTED) from None


def run(argv: list[str], *, timeout: float | None = None, **start) -> int:
    """One child session, waited for (``Children.start``'s arguments); its exit status. A Ctrl-C
    stops it and goes on; past ``timeout`` its group is killed (hung: no grace) and
    ``subprocess.TimeoutExpired`` raised."""
    with Children() as children:
        proc = children.start(argv, **start)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            lifetime.kill_group(proc)
            raise


def run_apart(
    config, args: list[str], where: str, name: str, added: dict | None = None, **kw
) -> int:
    """``run`` of a session of the user's tests (pytest's ``args``) in the user's directory, its
    coverage data its own (``argv.own_coverage_data(where, name)``), with ``added`` to this
    process's environment."""
    env = {**os.environ, **own_coverage_data(where, name), **(added or {})}
    return run(command(args), cwd=config.invocation_params.dir, env=env, **kw)


def stop(procs: list[tuple[Process, float]]) -> None:
    """The one policy: a SIGINT to each (child, grace), and its group killed if it has not ended
    within its grace; one line for those killed."""
    for proc, _ in procs:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    killed = 0
    for proc, grace in procs:
        try:
            proc.wait(max(0.0, started + grace - time.monotonic()))
        except subprocess.TimeoutExpired:
            lifetime.kill_group(proc)
            killed += 1
    if killed:  # those killed say nothing: this is the line that does, once
        them = f"{killed} child sessions" if killed > 1 else "a child session"
        print(
            f"\npytest-concurrency: interrupted: {them} had not ended "
            f"{lifetime.INTERRUPT_GRACE_S:g} s after the Ctrl-C (a start-up ignores it) and "
            f"{'were' if killed > 1 else 'was'} killed; no baseline, report, verdict or rounds written",
            file=sys.stderr,
            flush=True,
        )


def tail(text: str, lines: int = 20, sep: str = "\n") -> str:
    """The last ``lines`` lines of a child's output that are not blank, joined by ``sep``."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return sep.join(kept[-lines:])


def log_tail(log: str | Path, lines: int = 20, sep: str = "\n") -> str:
    """``tail`` of a child's log; what stands in for it when there is none."""
    try:
        return tail(Path(log).read_text(errors="replace"), lines, sep) or "(no output)"
    except OSError:
        return "(no log)"


def first_error(log: str | Path, lines: int = 200) -> str:
    """What a child that ended early said of why: the first error line (pytest's ``E   `` or an
    ``ERROR``) of its log's last ``lines``, else its last line."""
    kept = log_tail(log, lines).splitlines()
    said = [line for line in kept if line.startswith(("E   ", "ERROR"))] or kept[-1:]
    return said[0].removeprefix("E   ").strip() if said else "no output"
