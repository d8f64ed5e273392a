"""One OS process per task, with ``multiprocessing`` queues between them.

The start method is always explicit (``get_context(method)``): the global default differs
across Python versions and platforms (3.14 moved Linux to forkserver), and a benchmark
must say what it measured. Tasks run ``fn(*args)`` in a child, so ``fn`` and its
arguments must be picklable (module-level functions). Each child sends back its result
together with its own ``getrusage`` figures: forkserver/spawn children are not our
direct children, so ``RUSAGE_CHILDREN`` would miss their CPU time.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import resource
import signal
import socket
import threading
import time
import traceback
import warnings
from multiprocessing.connection import wait
from typing import Any

import psutil

from . import base, child_env
from ._sockets import SocketStream

#: How long ``run`` lets still-running children finish after ``main`` returned, before
#: terminating them. Terminating a child mid-``put`` can corrupt a queue; a short grace
#: also lets a task that failed just after main's last get report its failure.
EXIT_GRACE_S = 1.0
#: The grace ends early once every child left is blocked: asleep, and spending no CPU and
#: switching no context between two looks this far apart. It would only wait to kill them: a
#: cancel workload's abandoned tasks waited out the whole second, every round.
IDLE_LOOK_S = 0.05

#: What forking the test process itself warns about. ``[fork]`` is chosen to measure exactly
#: that, and the child only runs the task: silenced so that ``-W error`` runs work.
_FORK_WARNINGS = (
    r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks",  # CPython 3.12+
    # eventlet's at-fork hook, once eventlet was imported (after an eventlet benchmark): under
    # -W error it failed every [fork] benchmark that followed
    r"Using fork\(\) is a bad idea",
)

#: What a task process would otherwise import itself, each one: the seed workloads' modules (their
#: task functions; the package alone imports none of them) and this backend (a task gets a fresh
#: one). Imported once by the fork server instead, so that a task's start is the model's cost, not
#: this package's imports: a cancel task spent ~100 ms of CPU importing cancel and psutil, 10-30
#: tasks a round (a string, not an import: workloads is a layer above backends).
_PRELOAD = ("pytest_concurrency.workloads.all_seeds", __name__)

#: Runs the main script in the fork server, which CPython's own preload of ``__main__`` does not
#: before 3.13.8 (the module says why); its path goes there in ``child_env.FORK_SERVER_MAIN``.
_MAIN_LOADER = f"{__package__}._fork_server_main"

_USAGE_KEYS = ("cpu_user_s", "cpu_sys_s", "ctx_voluntary", "ctx_involuntary")


class ChildDied(base.ConcurrencyError):
    """The child process ended (``os._exit``, a signal) without sending a result."""


class NotPicklable(base.ConcurrencyError, TypeError):
    """A task's function or arguments cannot be pickled into its process (forkserver, spawn)."""

    def __init__(self, backend: str, task: str, error: BaseException):
        super().__init__(
            f"[{backend}] spawn({task}): a task runs in a new process, which receives its function "
            f"and arguments by pickling, which failed: {error}. Define the task "
            f"function at module level (not inside a test or another function, not a lambda) and "
            f"pass picklable arguments (this backend's channels are fine)"
        )


class RemoteTraceback(Exception):
    """Carries the child's formatted traceback as the cause of its re-raised error."""

    def __str__(self) -> str:
        return self.args[0]


def _own_usage() -> tuple[float, float, int, int]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime, ru.ru_stime, ru.ru_nvcsw, ru.ru_nivcsw)


_RAISED = threading.Event()  # in a task's process: the main thread has raised Cancel


def _cancelled(signum, frame):
    if not _RAISED.is_set():
        _RAISED.set()
        raise base.Cancel()


def _cancel_on_sigterm() -> None:
    """Make SIGTERM (``cancel``, or the teardown of a task left running) raise ``Cancel`` in
    the task, where it is blocked, so its ``finally`` blocks run.

    A process-directed signal goes to any thread that does not block it, and only the main
    thread runs Python's handlers: delivered to a queue's feeder thread, it would leave the
    task asleep (seen: a cancelled ``sleep`` that never woke). So SIGTERM is blocked here,
    before the task starts threads (they inherit the mask), and one thread waits for it and
    sends SIGUSR1 to the main thread alone, whose handler raises ``Cancel``.
    """
    main = threading.get_ident()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGUSR1, _cancelled)

    def forward():
        signal.sigwait({signal.SIGTERM})
        while not _RAISED.is_set():  # one SIGUSR1 was seen to get lost: repeat until it raised
            signal.pthread_kill(main, signal.SIGUSR1)
            _RAISED.wait(0.05)

    threading.Thread(target=forward, name="cancel-on-sigterm", daemon=True).start()


def _child_main(conn, fn, args) -> None:
    """Runs in the child: call ``fn``, send ``(ok, value, usage)`` once, exit."""
    try:
        _cancel_on_sigterm()
        try:
            message = (True, fn(*args))
        finally:
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # a late cancel must not break the send
    except BaseException as exc:
        message = (False, (exc, traceback.format_exc()))
    try:
        conn.send((*message, _own_usage()))
    except Exception as exc:
        ok, value = message
        what, shown, remote_tb = ("result", value, "") if ok else ("exception", *value)
        error = TypeError(f"the task's {what} {shown!r} cannot be sent to the parent: {exc}")
        conn.send((False, (error, remote_tb), _own_usage()))
    finally:
        conn.close()


def _blocked_state(tasks) -> dict | None:
    """Each child's CPU time and context switches if every one is asleep, else None."""
    state = {}
    for task in tasks:
        try:
            proc = psutil.Process(task.process.pid)
            with proc.oneshot():
                if proc.status() != psutil.STATUS_SLEEPING:
                    return None
                state[task] = (proc.cpu_times()[:2], tuple(proc.num_ctx_switches()))
        except psutil.Error:  # it ended meanwhile: its result is the next look's
            return None
    return state


def _left_the_os(thread: threading.Thread, timeout: float) -> None:
    """Wait until a joined thread has left the OS too: ``join`` returns while the thread still
    frees its state, and under ``tracemalloc`` (the memory pass) that free holds the tracer's lock.
    A fork at that moment makes a child that blocks on the lock at its first allocation, forever
    (CPython 3.11, seen under load: a ``[fork]`` round that never finished)."""
    where = f"/proc/self/task/{thread.native_id}"  # no /proc (macOS): nothing to wait for
    deadline = time.monotonic() + timeout
    while os.path.exists(where) and time.monotonic() < deadline:
        time.sleep(0.0002)


class ProcessTask:
    def __init__(self, backend: Backend, fn, args):
        self._backend = backend
        self.name = base.task_name(fn)
        self._outcome: tuple | None = None  # (ok, value) once received
        self._cancelled = False  # cancel() was called
        reader, writer = backend._ctx.Pipe(duplex=False)
        self._conn = reader
        # typeshed types get_context(a str) as BaseContext, which has no Process; each real one has
        self.process = backend._ctx.Process(  # type: ignore[attr-defined]
            target=_child_main, args=(writer, fn, args), name=self.name, daemon=True
        )
        try:
            self._start(backend.variant)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            reader.close()
            writer.close()
            if "pickle" not in str(exc).lower():
                raise
            raise NotPicklable(backend.name, self.name, exc) from exc
        writer.close()  # the child holds the only write end: its death means EOF here

    def _start(self, method: str) -> None:
        if method != "fork":
            self.process.start()
            return
        with warnings.catch_warnings():
            for message in _FORK_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
            self.process.start()

    def _receive(self) -> tuple:
        if self._outcome is None:
            try:
                ok, value, usage = self._conn.recv()
            except EOFError:
                self.process.join()
                ok, value = False, (ChildDied(self._death()), "")
            except Exception as exc:
                self.process.join()
                error = TypeError(f"the task's outcome cannot be unpickled in the parent: {exc!r}")
                ok, value = False, (error, "")
            else:
                self._backend._add_usage(usage)
                self.process.join()
            self._conn.close()
            self._outcome = (ok, value)
        return self._outcome

    def _death(self) -> str:
        code = self.process.exitcode
        how = f"exit code {code}" if code is None or code >= 0 else f"signal {-code}"
        return f"process {self.process.pid} ended with {how} before sending a result"

    def _error(self) -> base.TaskFailed | None:
        ok, value = self._receive()
        if ok:
            return None
        error, remote_tb = value
        if remote_tb:
            error.__cause__ = RemoteTraceback(remote_tb)
        return base.TaskFailed(self._backend.name, self.name, error)

    def settle(self) -> None:
        """After main returned and the child ended: note its failure, if any."""
        failure = self._error()
        if failure is not None:
            self._backend._failures.failed(self, failure)

    def cancel(self) -> None:
        self._cancelled = True
        if self._outcome is None and self.process.exitcode is None:
            self.process.terminate()

    def join(self):
        failure = self._error()
        self._backend._failures.joined(self)
        self._backend._tasks.discard(self)
        if (
            self._cancelled
            and failure is not None
            and isinstance(failure.error, (base.Cancel, ChildDied))
        ):
            raise base.TaskCancelled(self._backend.name, self.name)
        if failure is not None:
            raise failure from failure.error
        return self._receive()[1]  # received by _error() above


def _preload_in_fork_server(ctx) -> None:
    """Add ``_PRELOAD`` to what the fork server imports when it starts (after what the process
    asked for already, ``__main__`` by default; a server already running is left as it is)."""
    from multiprocessing import forkserver

    asked = getattr(forkserver._forkserver, "_preload_modules", ["__main__"])  # CPython's
    main = [_MAIN_LOADER] if "__main__" in asked else []
    ctx.set_forkserver_preload(list(dict.fromkeys([*asked, *main, *_PRELOAD])))


def _start_fork_server() -> None:
    """Start the fork server, if it is not running, with the main script's path for
    ``_MAIN_LOADER`` in its environment (in this process's for that moment only)."""
    from multiprocessing import forkserver, spawn

    # None under python -m pytest: a package's __main__, which tasks do not run
    main_path = spawn.get_preparation_data("main").get("init_main_from_path")
    os.environ.pop(child_env.FORK_SERVER_MAIN, None)  # a user's value is no script to run
    if main_path is not None and _MAIN_LOADER in getattr(
        forkserver._forkserver, "_preload_modules", ()
    ):
        os.environ[child_env.FORK_SERVER_MAIN] = main_path
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(child_env.FORK_SERVER_MAIN, None)


class Backend(base.SyncBackend):
    library = ""  # part of CPython
    task_kind = "process"

    def __init__(self, variant: str = "forkserver"):
        methods = ("forkserver", "fork", "spawn")
        if variant not in methods:
            raise ValueError(
                f"multiprocessing start method must be one of {methods}, got {variant!r}"
            )
        self.variant = variant
        self.name = f"multiprocessing[{variant}]"
        self.max_parallel = os.cpu_count() or 1  # ProcessPoolExecutor's default
        self._ctx = multiprocessing.get_context(variant)
        if variant == "forkserver":
            _preload_in_fork_server(self._ctx)
        self._failures = base.FailureTracker(self.name)
        self._tasks: set[ProcessTask] = set()  # spawned in this run, not joined
        self._usage = dict.fromkeys(_USAGE_KEYS, 0)
        self._queues: list | None = None  # the channels made within run()
        self._server_started = variant != "forkserver"  # the server is started at the first spawn

    def __reduce__(self):
        # Children get a fresh backend (sleep, channel, open_connection work there).
        return (type(self), (self.variant,))

    def run(self, main, *args):
        self._failures = base.FailureTracker(self.name)
        self._queues = []
        try:
            result = main(*args)
        except BaseException:
            self._stop_children(grace=0.0)
            self._close_queues(grace=0.0)
            raise
        self._stop_children(grace=EXIT_GRACE_S)
        self._close_queues(grace=EXIT_GRACE_S)
        self._failures.raise_first()
        return result

    def _close_queues(self, grace: float) -> None:
        """End the feeder threads of the queues this run made. Left to the garbage collector, a
        queue's thread outlives its round by a moment, longer on a busy machine: the memory pass
        read one more thread alive after every round as a leak (multiprocessing[fork] ring, CI)."""
        queues, self._queues = self._queues, None
        for q in queues or ():
            q.close()  # the thread flushes what it holds into the pipe, then ends
            thread = getattr(q, "_thread", None)  # CPython's; join_thread() has no timeout
            if thread is not None:
                thread.join(grace)  # a pipe nobody reads stays full: never wait on it for long
                _left_the_os(thread, grace)

    def _stop_children(self, grace: float) -> None:
        tasks, self._tasks = self._tasks, set()
        pending: dict[Any, ProcessTask] = {task._conn: task for task in tasks}
        deadline = time.monotonic() + grace
        last_look: dict | None = None
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # readable = a result arrived or the child died (EOF): either way it ended
            ended = wait(list(pending), min(remaining, IDLE_LOOK_S))
            for conn in ended:
                pending.pop(conn).settle()
            look = None if ended else _blocked_state(pending.values())
            if look is not None and look == last_look:
                break  # none of them moved: blocked for good, not finishing
            last_look = look
        # All at once, against one deadline: told one after the other, each child's exit (its
        # finally blocks, its queues' flush) was waited for before the next one was told.
        left = list(pending.values())
        for task in left:
            task.process.terminate()  # Cancel in the task: its finally blocks run
        deadline = time.monotonic() + EXIT_GRACE_S
        running = {task.process.sentinel: task for task in left}
        while running and (remaining := deadline - time.monotonic()) > 0:
            for sentinel in wait(list(running), remaining):
                running.pop(sentinel)
        for task in running.values():  # its cleanup blocked: end it for good
            task.process.kill()
        for task in left:
            task.process.join()
            task._conn.close()

    def spawn(self, fn, *args):
        if not self._server_started:
            _start_fork_server()
            self._server_started = True
        task = ProcessTask(self, fn, args)
        self._tasks.add(task)
        return task

    def channel(self, capacity=None):
        if capacity is not None and capacity < 0:
            raise ValueError(f"channel capacity must be None or >= 0, got {capacity}")
        queue = self._ctx.Queue(capacity or 0)
        if (
            self._queues is not None
        ):  # made within run(): it ends with the run (one made before is the caller's)
            self._queues.append(queue)
        return (
            base.Handoff(queue, self._ctx.Semaphore(0), self._ctx.Lock())
            if capacity == 0
            else queue
        )

    def sleep(self, seconds):
        time.sleep(seconds)

    def open_connection(self, host, port):
        return SocketStream.connect(socket, host, port)

    def _add_usage(self, usage) -> None:
        for key, value in zip(_USAGE_KEYS, usage):
            self._usage[key] += value

    def take_child_usage(self) -> dict:
        """CPU and context switches of the children joined since the last call; resets."""
        usage, self._usage = self._usage, dict.fromkeys(_USAGE_KEYS, 0)
        return usage
