"""The contract every concurrency model implements.

Two families, because sync and async code cannot share one function body:

* ``SyncBackend`` (threading, multiprocessing, greenlet, gevent, eventlet): every
  primitive is a plain call that blocks the calling task.
* ``AsyncBackend`` (asyncio, uvloop): ``put``/``get``/``join``/``sleep`` and the IO calls
  are coroutines; ``spawn`` is a plain call.

Primitives (same names in both families):

``run(main, *args)``
    Enter the model's runtime, call ``main(*args)`` in it and return its result.
    Tasks still alive when ``main`` returns are not waited for (threads and processes get
    up to a second to end first, so that a failure just after main's return is not lost);
    a task that raised and was never joined makes ``run`` raise ``TaskFailed`` after
    ``main`` returns.
``spawn(fn, *args)``
    Start ``fn(*args)`` as a new task of the model; returns a ``Task``.
``Task.join()``
    Wait for the task; return its result, or raise ``TaskFailed`` (chained from the
    task's own exception) naming the backend and the task, or ``TaskCancelled`` when it
    was cancelled before it returned.
``Task.cancel()``
    A plain call in both families: ends the task the way a timeout does, by raising the
    model's own cancellation at the point where the task is blocked (or as soon as it
    blocks), so its ``finally`` blocks run; ``join`` then waits until it ended. asyncio and
    uvloop: ``Task.cancel`` (``CancelledError``); gevent: ``kill`` and eventlet: ``kill``
    (``GreenletExit``); raw greenlet: ``throw`` of ``Cancel``; multiprocessing: ``terminate``
    (SIGTERM, which the task's process turns into ``Cancel``); trio and anyio: the task's own
    cancel scope. Models without it (``can_cancel = False``: threading, since the stdlib
    cannot stop a thread from outside) raise ``Unsupported``.
``channel(capacity)``
    FIFO channel. ``0``: rendezvous, ``put`` returns only once a ``get`` took the item
    (Stackless/Go unbuffered). ``N > 0``: bounded, ``put`` blocks while N items wait.
    ``None``: unbounded.
``sleep(seconds)``
    Suspend the calling task; other tasks run.
``open_connection(host, port)``
    A connected TCP stream on the model's own IO path, with ``sendall(data)``,
    ``recv_exactly(n)`` and ``close()``. Backends without sockets (raw greenlet) raise
    ``Unsupported``.

Attributes: ``name`` (the id used on the command line and in records), ``family``,
``library`` and ``version`` (what produced the numbers), ``max_parallel`` (``None`` when
tasks are cheap enough to start one per job, else the stdlib pool default the IO workload
should cap concurrency at), ``task_kind`` (``"light"``, ``"thread"`` or ``"process"``: what
one task costs the machine), ``has_sockets``, ``can_cancel`` and ``isolation_only``
(monkey-patching variants).
"""

from __future__ import annotations

import functools
import os


class ConcurrencyError(Exception):
    """Base class of the plugin's own errors."""


class Unsupported(ConcurrencyError):
    """The model has no such primitive (e.g. sockets on raw greenlets)."""


class TaskFailed(ConcurrencyError):
    """A spawned task raised; the message names backend and task, ``__cause__`` is the error."""

    def __init__(self, backend: str, task: str, error: BaseException):
        super().__init__(f"[{backend}] task {task} raised {type(error).__name__}: {error}")
        self.backend = backend
        self.task = task
        self.error = error


class TaskCancelled(ConcurrencyError):
    """``join`` of a task that ``cancel`` ended before it returned."""

    def __init__(self, backend: str, task: str):
        super().__init__(f"[{backend}] task {task} was cancelled")
        self.backend = backend
        self.task = task


class Cancel(BaseException):
    """Raised inside a task by ``cancel`` on models without a cancellation of their own (raw
    greenlet, a task's process). A ``BaseException``, like ``asyncio.CancelledError``, so an
    ``except Exception`` in the task does not swallow it."""


class Deadlock(ConcurrencyError):
    """Every task is blocked and nothing can wake them (raised where the model can tell)."""


def task_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def stdlib_pool_size() -> int:
    """``concurrent.futures.ThreadPoolExecutor``'s default worker count."""
    return min(32, (os.cpu_count() or 1) + 4)


class Backend:
    name: str = ""
    family: str = ""  # "sync" or "async"
    library: str = ""  # the distribution whose version is recorded
    max_parallel: int | None = None
    task_kind: str = "light"
    has_sockets: bool = True
    can_cancel: bool = True
    isolation_only: bool = False

    @functools.cached_property  # read once: importing importlib.metadata took 2.4 s a case under valgrind
    def version(self) -> str:
        from importlib import metadata

        if not self.library:
            import platform

            return platform.python_version()
        try:
            return metadata.version(self.library)
        except metadata.PackageNotFoundError:
            return "unknown"

    def unsupported_measure(self, instrument) -> str | None:
        """Why ``instrument`` cannot measure this model, beyond what the instrument itself says."""
        return None

    def run(self, main, *args):
        raise NotImplementedError

    def spawn(self, fn, *args):
        raise NotImplementedError

    def channel(self, capacity: int | None = None):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __str__(self) -> str:
        return self.name


class SyncBackend(Backend):
    family = "sync"

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def open_connection(self, host: str, port: int):
        raise Unsupported(f"{self.name} has no sockets")


class AsyncBackend(Backend):
    family = "async"

    async def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    async def open_connection(self, host: str, port: int):
        raise Unsupported(f"{self.name} has no sockets")


class Handoff:
    """Unbuffered channel for blocking primitives: ``put`` returns after a ``get`` took the item.

    Built from the model's own FIFO queue, counting semaphore (starting at 0) and lock,
    so threads and processes share the algorithm. Senders take turns (``send_lock``), so
    the single ``taken`` release always answers the sender currently waiting on it.
    """

    def __init__(self, items, taken, send_lock):
        self._items = items
        self._taken = taken
        self._send_lock = send_lock

    def put(self, item) -> None:
        with self._send_lock:
            self._items.put(item)
            self._taken.acquire()

    def get(self):
        item = self._items.get()
        self._taken.release()
        return item


class CapturedTask:
    """What tasks run by a library (threads, gevent, eventlet) share: a task's exception is
    kept for ``join`` and, until joined, reported to ``run`` through the FailureTracker,
    instead of being printed and lost by the library. Subclasses start ``self._body``; with
    ``live`` (the backend's set of running tasks) the task leaves it when it ends.
    """

    def __init__(self, backend, fn, live: set | None = None):
        self._backend = backend
        self._fn = fn
        self._live = live
        self.name = task_name(fn)
        self._error: BaseException | None = None
        self._returned = False
        self._cancelled = False  # cancel() was called
        if live is not None:
            live.add(self)

    def _body(self, *args):
        try:
            result = self._fn(*args)
            self._returned = True
            return result
        except Exception as exc:
            self._error = exc
            self._backend._failures.failed(self, TaskFailed(self._backend.name, self.name, exc))
            return None
        finally:
            if self._live is not None:
                self._live.discard(self)

    def _outcome(self, result):
        """Call once the task ended: its result, or its error as ``TaskFailed``."""
        self._backend._failures.joined(self)
        if self._error is not None:
            raise TaskFailed(self._backend.name, self.name, self._error) from self._error
        if self._cancelled and not self._returned:
            raise TaskCancelled(self._backend.name, self.name)
        return result


class FailureTracker:
    """Remembers tasks that raised and were never joined, so ``run`` can report them.

    Models that print and swallow a task's exception (gevent, eventlet, threads) would
    otherwise turn a crashed task into a silent hang or a wrong result.
    """

    def __init__(self, backend: str):
        self.backend = backend
        self._unjoined: dict[int, TaskFailed] = {}

    def failed(self, task, error: TaskFailed) -> None:
        self._unjoined[id(task)] = error

    def joined(self, task) -> None:
        self._unjoined.pop(id(task), None)

    def raise_first(self) -> None:
        if self._unjoined:
            error = next(iter(self._unjoined.values()))
            self._unjoined.clear()
            raise error from error.error
