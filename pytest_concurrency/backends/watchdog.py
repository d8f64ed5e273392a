"""Bound how long one round (or one ``backend.run``) may take, so a deadlock cannot hang the session.

In-process this is SIGALRM, whose handler always runs in the main thread, in whatever
greenlet and event loop happen to be running there. So the handler interrupts the code
that entered the deadline, wherever it waits:

* an asyncio/uvloop loop is stopped (uvloop swallows exceptions raised by signal
  handlers); if the loop does not stop within ``GRACE_S`` (a coroutine blocked it with a
  synchronous call), the next alarm raises in place;
* a trio or anyio run registered a ``Stopper`` (``stoppable``): it cancels the run's task
  group from inside the loop, with the same grace. Raised in place instead, the error
  would land in trio's scheduler, which reports it as a ``TrioInternalError`` and
  abandons its tasks;
* a greenlet other than the one that entered the deadline (gevent's hub, a task) throws
  the timeout into the entering greenlet: raised in a task, the task's own error handling
  would swallow it, and gevent's hub prints and ignores errors (eventlet's hub is the
  exception, see ``_is_eventlet_hub``);
* otherwise (threads, processes, our greenlet scheduler) it raises right there: blocking
  lock and queue waits are interruptible by signals.

Threads stuck elsewhere cannot be stopped; they are daemon threads and die with the process.
Isolated runs get the hard guarantee: the parent kills the worker process (see ``isolate``).
Deadlines do not nest: an inner one (``backend.run`` inside a timed round) leaves the outer
one in charge, and an alarm set by someone else (pytest-timeout) is restored on exit. The
exception is a user's test's silence watch (``deadline(..., silence_watch=True)``), which bounds
what no ``run`` call covers: each run's own deadline takes over while it runs, and starts the
watch again when it ends. A watch may also be told of signs of life another way (``alive``: a
round of a test with ``benchmark`` alone ended), and does not count a wait another process bounds
(``excused``: a side's turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable, Collection

from .base import ConcurrencyError

GRACE_S = 1.0  # how long a stopped event loop gets to return before the timeout is raised in place
FRAMES = 6  # frames of a blocked stack shown, innermost first up to the first one of user code
TASKS = 5  # asyncio tasks listed

_active = False  # a deadline is armed (main thread only, so no lock)
_rearm: float | None = None  # a test's silence watch is armed: for how long, each time a run ends
_stoppers: list[Stopper] = []  # runs of trio/anyio in progress, innermost last
_excused = 0  # waits in progress that another process bounds (``excused``)
_excused_until = 0.0  # when the last one ended (monotonic)


@dataclasses.dataclass(frozen=True)
class Stopper:
    """How the watchdog ends a run whose loop is not asyncio's own (trio, anyio).

    ``stop()`` must be safe in a signal handler (it only schedules the cancellation);
    ``waits()`` lists (who, stack) of the run's tasks, or is None where the running asyncio
    loop's tasks already tell (anyio on asyncio).
    """

    stop: Callable[[], None]
    waits: Callable[[], list] | None = None


@contextlib.contextmanager
def stoppable(stopper: Stopper):
    """Register a run's stopper for as long as its loop runs."""
    _stoppers.append(stopper)
    try:
        yield
    finally:
        _stoppers.remove(stopper)


class WorkloadTimeout(ConcurrencyError):
    pass


def silence(timeout: float) -> float:
    """How long a user's test may go without a ``backend.run`` call ending: ``timeout`` bounds each
    call, which then fails the test naming where it waited; this is for what it does not reach
    (code outside ``run``), with a grace so that a stalled run is the one to report."""
    return timeout + 2.0 + timeout / 10


def threads_left(besides: Collection[threading.Thread] = ()) -> list[threading.Thread]:
    """Non-daemon threads besides this one (and ``besides``): Python waits for them before the
    process exits (an executor's workers, which it first tells to stop, left out)."""
    from concurrent.futures import thread as executor

    told = set(getattr(executor, "_threads_queues", ()))
    here = threading.current_thread()
    return [
        t
        for t in threading.enumerate()
        if t is not here and t.is_alive() and not t.daemon and t not in told and t not in besides
    ]


@contextlib.contextmanager
def excused():
    """A wait another process bounds (a side's turn, which the other side's round holds up): a
    silence watch with ``alive`` does not count it, and its end is a sign of life."""
    global _excused, _excused_until
    _excused += 1
    try:
        yield
    finally:
        _excused -= 1
        _excused_until = time.monotonic()


def deadline(
    seconds: float | None,
    what: str,
    doing: str = "finish a round",
    *,
    silence_watch: bool = False,
    alive: Callable[[], float] | None = None,
):
    """Context manager factory: ``with deadline(5, "ring on gevent")(): ...``.

    The timeout's message reads "{what} did not {doing} within {seconds} s", then where the
    code was blocked. With ``silence_watch``, the ``seconds`` start again each time a deadline inside
    it ends (a test's ``run`` calls), and at the last sign of life ``alive()`` returns (a
    ``time.monotonic()``: read when the alarm comes, so a sign costs no system call); it stands
    aside for an alarm someone else set.
    """

    @contextlib.contextmanager
    def guard():
        global _active, _rearm
        usable = (
            seconds
            and not _active
            and not (silence_watch and (_rearm or signal.getitimer(signal.ITIMER_REAL)[0]))
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )
        if not usable:
            yield
            return
        assert seconds  # usable says so

        entry = _current_greenlet()
        older_threads = set(threading.enumerate())  # left by earlier code: not this one's waits
        fired: list[str] = []  # the message, once the alarm went off

        def on_alarm(signum, frame):
            if alive is not None and not fired:
                quiet = time.monotonic() - max(alive(), _excused_until)
                if _excused or quiet < seconds:  # alive since: the watch goes on from then
                    signal.setitimer(signal.ITIMER_REAL, seconds if _excused else seconds - quiet)
                    return
            loop = asyncio.events._get_running_loop()
            stopper = _stoppers[-1] if _stoppers else None
            if not fired:
                blocked = _blocked(frame, entry, loop, older_threads, stopper)
                fired.append(_message(seconds, what, doing, blocked))
                if stopper is not None:
                    # The run then raises (Stopped), which becomes the timeout below.
                    stopper.stop()
                    signal.setitimer(signal.ITIMER_REAL, GRACE_S)
                    return
                if loop is not None:
                    # The loop's exit (RuntimeError "Event loop stopped before Future
                    # completed") becomes the timeout below. Threadsafe: it must wake a
                    # selector blocked forever.
                    loop.call_soon_threadsafe(loop.stop)
                    signal.setitimer(signal.ITIMER_REAL, GRACE_S)
                    return
            error = WorkloadTimeout(fired[0])
            current = _current_greenlet()
            if (
                entry is not None
                and current is not entry
                and not entry.dead
                and not (current.parent is entry and _is_eventlet_hub(current))
            ):
                entry.throw(error)  # resumes here when the hub or task is next switched to
                return
            raise error

        if silence_watch:
            _rearm = seconds
        else:
            _active = True
        started = time.monotonic()
        previous = signal.signal(signal.SIGALRM, on_alarm)
        outer_left, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        except WorkloadTimeout:
            raise
        except BaseException:
            if fired:  # what stopping the loop caused: the stall is the news, not the symptom
                raise WorkloadTimeout(fired[0]) from None
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if silence_watch:
                _rearm = None
            else:
                _active = False
                if _rearm:  # a run inside a test's silence watch ended: the watch starts again
                    signal.setitimer(signal.ITIMER_REAL, _rearm)
                elif outer_left:
                    left = max(outer_left - (time.monotonic() - started), 1e-3)
                    signal.setitimer(signal.ITIMER_REAL, left, outer_interval)

    return guard


def _current_greenlet():
    greenlet = sys.modules.get("greenlet")  # never imported for models that do not use it
    return greenlet.getcurrent() if greenlet is not None else None


def _is_eventlet_hub(glet) -> bool:
    # Resumed later, eventlet's hub would first finish the wait it was in (up to a minute
    # with no timer pending). Raised in instead, the error ends the hub and reaches its
    # parent, the caller, and eventlet starts a fresh hub on next use.
    hubs = sys.modules.get("eventlet.hubs")
    return hubs is not None and hubs.get_hub().greenlet is glet


def _message(seconds: float, what: str, doing: str, blocked: str) -> str:
    return (
        f"{what} did not {doing} within {seconds:g} s (deadlock or stall?). Blocked at:\n"
        f"{blocked}\n"
        "Fix the wait that never ends, or raise --concurrency-timeout if the code is just slow."
    )


def _blocked(frame, entry, loop, older_threads, stopper=None) -> str:
    """Where the code under the deadline waits: the caller's stack, then every other thread,
    greenlet or asyncio task that is waiting in the user's own code."""
    if stopper is not None and stopper.waits is not None:
        waits = _running(frame) + stopper.waits()
    elif loop is not None:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        waits = _running(frame) + [
            (f"task {t.get_name()} ({_coro_name(t)})", coro_stack(t.get_coro())) for t in tasks
        ]
    else:
        if entry is not None and entry is not _current_greenlet() and entry.gr_frame is not None:
            frame = entry.gr_frame  # the signal arrived in a hub or a task: show the caller's wait
        waits = [("caller", traceback.extract_stack(frame))]
        frames = sys._current_frames()
        waits += [
            (f"thread {t.name}", traceback.extract_stack(frames[t.ident]))
            for t in threading.enumerate()
            if t not in older_threads and t.ident in frames
        ]
        waits += [(f"greenlet {users_function(stack)}", stack) for stack in _greenlet_stacks(entry)]
    shown = [
        (who, stack) for i, (who, stack) in enumerate(waits) if i == 0 or users_function(stack)
    ]
    lines = [f"  {who}:\n{_format(stack)}" for who, stack in shown[:TASKS]]
    if len(shown) > TASKS:
        lines.append(f"  ... and {len(shown) - TASKS} more")
    return "\n".join(lines)


_LOOPS = ("asyncio", "trio", "anyio", "uvloop")  # packages whose frames run tasks, not user code


def _running(frame) -> list:
    """The task holding the event loop when the alarm came (a synchronous call that never
    returns), if it is the user's code: a running coroutine has no ``cr_await`` chain to
    list, so its frames are read from the interrupted stack, down to the loop's own."""
    inside = []
    for fs in reversed(traceback.extract_stack(frame)):
        parts = os.path.normpath(fs.filename).split(os.sep)
        if os.path.abspath(fs.filename).startswith(_PACKAGE) or any(
            p in _LOOPS for p in parts[-3:-1]
        ):
            break
        inside.append(fs)
    if not any(_users(fs.filename) for fs in inside):
        return []
    return [("running (holding the loop)", list(reversed(inside)))]


def _greenlet_stacks(entry) -> list:
    """Stacks of the suspended greenlets of this thread, other than the caller's."""
    greenlet = sys.modules.get("greenlet")
    if greenlet is None:
        return []
    import gc

    current = greenlet.getcurrent()
    return [
        traceback.extract_stack(g.gr_frame)
        for g in gc.get_objects()
        if isinstance(g, greenlet.greenlet)
        and g.gr_frame is not None
        and g is not entry
        and g is not current
    ]


def users_function(stack) -> str | None:
    """The innermost function of the user's own code in ``stack``, if any."""
    return next((fs.name for fs in reversed(stack) if _users(fs.filename)), None)


def _coro_name(task) -> str:
    coro = task.get_coro()
    return getattr(coro, "__qualname__", None) or repr(coro)


def coro_stack(coro) -> list:
    """The frames a suspended coroutine waits in, outermost first (for ``Stopper.waits``)."""
    frames = []
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        frames.append(coro.cr_frame)
        coro = coro.cr_await
    return [
        traceback.FrameSummary(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in frames
    ]


def _format(summary, indent: str = "    ") -> str:
    """Innermost frames, outermost first, cut after the first frame of the user's own code."""
    shown = []
    for fs in reversed(summary):
        if fs.filename == __file__:
            continue
        shown.append(fs)
        if len(shown) == FRAMES or _users(fs.filename):
            break
    return (
        "\n".join(
            f"{indent}{_short(fs.filename)}:{fs.lineno} in {fs.name}: {(fs.line or '').strip()}"
            for fs in reversed(shown)
        )
        or f"{indent}(no Python frame)"
    )


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pytest_concurrency/
_LIBRARIES = {
    os.path.abspath(sysconfig.get_paths()[k])
    for k in ("stdlib", "platstdlib", "purelib", "platlib")
}


def _users(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (
        not path.startswith(_PACKAGE)
        and not any(path.startswith(lib) for lib in _LIBRARIES)
        and not filename.startswith("<")
    )


def _short(filename: str) -> str:
    for root in sorted(_LIBRARIES | {os.path.dirname(_PACKAGE)}, key=len, reverse=True):
        if filename.startswith(root + os.sep):
            return os.path.relpath(filename, root)
    return filename


def bound_run(backend, seconds: float | None, what: str, on_timeout=None) -> None:
    """Make ``backend.run`` (as a test calls it) end with ``WorkloadTimeout`` after ``seconds``.

    ``what`` names the test; the message adds the backend and the function run.
    ``on_timeout(error)``, if given, may raise something else instead (pytest's failure).
    """
    from .base import task_name

    unbounded = backend.run

    def run(main, *args):
        if _active:  # inside a timed round, whose deadline is in charge
            return unbounded(main, *args)
        guard = deadline(seconds, f"{what}: {backend.name} run({task_name(main)})", "return")
        try:
            with guard():
                return unbounded(main, *args)
        except WorkloadTimeout as exc:
            if on_timeout is None:
                raise
            on_timeout(exc)
            raise

    backend.run = run


class StopFlag:
    """Set by the first SIGINT or SIGTERM after ``arm()``, which then goes on to the handler that
    was there (Python's, a KeyboardInterrupt). pytest's exit status alone misses a second Ctrl-C
    that lands while pytest handles the first: its session then ends with status 0 and the
    KeyboardInterrupt pending, and what it measured would be saved as a result.

    Around code that may run an event loop (a test, a suspect's second session in it) the handler is set
    aside (``set_aside``): asyncio and trio turn a Ctrl-C into a clean cancellation only when
    Python's own handler is the one installed, and a KeyboardInterrupt out of it is noted."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, on_stop: Callable[[], object] | None = None):
        self.signum: int | None = None
        self._on_stop = on_stop  # told once, maybe in the handler: keep it to setting attributes
        self._previous: dict[int, Callable] = {}

    def arm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread sets handlers
        for signum in self.SIGNALS:
            current = signal.getsignal(signum)
            # SIG_DFL ends the process (nothing is saved then), SIG_IGN means it is not to stop
            if callable(current) and current != self._received:
                self._previous[signum] = current
                signal.signal(signum, self._received)

    def disarm(self) -> None:
        """The handlers as they were, unless another has replaced this one since."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._received:
                signal.signal(signum, previous)

    @contextlib.contextmanager
    def set_aside(self):
        self.disarm()
        try:
            yield
        except KeyboardInterrupt:
            self.note(signal.SIGINT)
            raise
        finally:
            self.arm()

    def note(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            if self._on_stop is not None:
                self._on_stop()

    def _received(self, signum, frame) -> None:
        __tracebackhide__ = True  # pytest's "KeyboardInterrupt" line names where the code was
        self.note(signum)
        self._previous[signum](signum, frame)


@contextlib.contextmanager
def ctrl_c_after():
    """A Ctrl-C in this block lands when it ends: a write and the record that it was done are one
    step for what the interrupted session says. (Not a blocked signal: another thread would take it
    and the main thread would still raise at once.)"""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread takes signals
        return
    caught: list = []
    previous = signal.signal(signal.SIGINT, lambda *received: caught.append(received))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(*caught[0])  # Python's own: KeyboardInterrupt
