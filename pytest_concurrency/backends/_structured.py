"""What trio and anyio share: structured concurrency under the plain ``spawn``/``join`` contract.

Both libraries only start a task inside a nursery (trio) or task group (anyio), and a task
that raises there cancels its siblings and re-raises from the group as an exception group.
The contract wants Go-style tasks instead: ``spawn`` is a plain call, a failed task fails
its ``join`` (or ``run``, if never joined) as ``TaskFailed`` naming the backend, and tasks
still alive when ``main`` returns are not waited for. So ``run`` opens one group around
``main``; ``spawn`` starts a task in it whose body catches the task's exception for
``join``; when ``main`` returns the group is cancelled, which ends the tasks left.

Channels are memory object streams with both ends on one object; ``put``/``get`` are the
library's own ``send``/``receive`` bound methods, so a hop costs what the library costs
and no wrapper coroutine of ours. Capacity maps to ``max_buffer_size``: 0 stays 0 (a true
rendezvous: ``send`` returns once a receiver took the item), N is N, None is ``math.inf``.
A channel lives for one ``run``, as an asyncio queue does (it binds to its loop): its ends
are closed when the run that created it ends (or the next one, if made outside a run),
because anyio warns (``ResourceWarning``, an error under ``-W error``) about ends
garbage-collected open.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from . import base, watchdog

if sys.version_info < (3, 11):  # trio and anyio depend on the backport there
    from exceptiongroup import BaseExceptionGroup


class Stopped(base.ConcurrencyError):
    """The stall watchdog cancelled the run (turned into its ``WorkloadTimeout`` by ``deadline``)."""


class Channel:
    __slots__ = ("put", "get", "_send", "_receive")

    def __init__(self, send, receive):
        self._send, self._receive = send, receive
        self.put = send.send
        self.get = receive.receive

    def close(self) -> None:
        self._send.close()
        self._receive.close()


class StructuredTask:
    __slots__ = ("_backend", "name", "_done", "_result", "_error", "_scope", "_returned")

    def __init__(self, backend: StructuredBackend, fn, args):
        group = backend._group
        if group is None:
            raise RuntimeError(
                f"{backend.name}: spawn() must be called inside {backend.name} run()"
            )
        self._backend = backend
        self.name = base.task_name(fn)
        self._done = backend._event()
        self._result: Any = None
        self._error: Exception | None = None
        self._returned = False
        # Its own cancel scope, made now (a scope can be cancelled before it is entered), so
        # cancel() ends this task alone, not the run's group.
        self._scope = backend._cancel_scope()
        # Named after the user's function, so the watchdog's stall report says whose wait it is.
        group.start_soon(self._body, fn, args, name=self.name)

    async def _body(self, fn, args):
        try:
            with self._scope:
                self._result = await fn(*args)
                self._returned = True
        except Exception as exc:
            self._error = exc
            self._backend._failures.failed(
                self, base.TaskFailed(self._backend.name, self.name, exc)
            )
        finally:
            self._done.set()

    def cancel(self) -> None:
        self._scope.cancel()

    async def join(self):
        await self._done.wait()
        self._backend._failures.joined(self)
        if self._error is not None:
            raise base.TaskFailed(self._backend.name, self.name, self._error) from self._error
        if self._scope.cancel_called and not self._returned:
            raise base.TaskCancelled(self._backend.name, self.name)
        return self._result


class StructuredBackend(base.AsyncBackend):
    """Subclasses give the library: ``_start`` (enter the loop), ``_task_group``, ``_event``,
    ``_memory_channel``, ``_cancel_scope``, ``_call_soon_signal_safe``, ``_connect``, ``_task_lister`` and
    ``_name_current_task``."""

    # the library's part, each given by the subclass (declared here for the type checker)
    _start: Callable[..., Any]  # (entry, *args): run entry(*args) in a new event loop
    _task_group: Callable[[], Any]  # an async context manager: a nursery or task group
    _event: Callable[[], Any]
    _cancel_scope: Callable[[], Any]
    _memory_channel: Callable[[float], tuple[Any, Any]]  # (send end, receive end)
    _call_soon_signal_safe: Callable[[], Callable[[Callable[[], None]], None]]
    _name_current_task: Callable[[str], None]
    _task_lister: Callable[[], Callable[[], list] | None]  # None: the watchdog's own (asyncio)
    _connect: Callable[[str, int], Awaitable[ByteStream]]

    def __init__(self):
        self._failures = base.FailureTracker(self.name)
        self._group = None
        self._channels: list[Channel] = []
        self._stopped = False

    def run(self, main, *args):
        if self._group is not None:  # checked here: the cleanup below would break the outer run
            raise RuntimeError(
                f"{self.name}: run() called inside a running {self.name} run(); await main instead"
            )
        self._failures = base.FailureTracker(self.name)
        self._stopped = False
        try:
            return self._start(self._entry, main, args)
        except BaseExceptionGroup as group:
            # Only a BaseException (KeyboardInterrupt, SystemExit) escaping a task gets here:
            # show it as itself, as the other models do.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self._group = None
            channels, self._channels = self._channels, []
            for channel in channels:
                channel.close()

    async def _entry(self, main, args):
        outcome: dict = {}
        self._name_current_task(base.task_name(main))  # the stall report names main, not _entry
        # The stopper stays registered until the group has exited, which waits for its
        # cancelled tasks: a task stuck there is still this run's stall.
        with contextlib.ExitStack() as registered:
            async with self._task_group() as group:
                self._group = group
                registered.enter_context(watchdog.stoppable(self._stopper(group)))
                try:
                    outcome["result"] = await main(*args)
                except Exception as exc:
                    outcome["error"] = (
                        exc  # (inside, the group would wrap it in an exception group)
                    )
                finally:
                    group.cancel_scope.cancel()  # tasks still alive are not waited for
        if self._stopped:
            raise Stopped(f"{self.name} run stopped by the stall watchdog")
        if "error" in outcome:
            raise outcome["error"]
        self._failures.raise_first()
        return outcome["result"]

    def _stopper(self, group) -> watchdog.Stopper:
        def stop():  # runs in the loop, scheduled from the SIGALRM handler
            self._stopped = True
            group.cancel_scope.cancel()

        call_soon = self._call_soon_signal_safe()
        return watchdog.Stopper(stop=lambda: call_soon(stop), waits=self._task_lister())

    def spawn(self, fn, *args):
        return StructuredTask(self, fn, args)

    def channel(self, capacity=None):
        if capacity is not None and (not isinstance(capacity, int) or capacity < 0):
            raise ValueError(f"channel capacity must be None or an int >= 0, got {capacity!r}")
        channel = Channel(*self._memory_channel(math.inf if capacity is None else capacity))
        self._channels.append(channel)
        return channel

    async def open_connection(self, host, port):
        return await self._connect(host, port)


class ByteStream:
    """A connected TCP stream of trio or anyio: ``send``, ``receive`` (one chunk) and ``aclose``."""

    __slots__ = ("_send", "_receive", "_aclose", "_eof")

    def __init__(self, send, receive, aclose, eof: type[BaseException] | None = None):
        self._send, self._receive, self._aclose = send, receive, aclose
        self._eof = eof  # anyio raises EndOfStream at EOF; trio returns b""

    async def sendall(self, data: bytes) -> None:
        await self._send(data)

    async def recv_exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            try:
                chunk = await self._receive(n - got)
            except self._eof or ():  # noqa: B030 (a tuple of classes, or none)
                chunk = b""
            if not chunk:
                raise ConnectionError(f"peer closed after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        await self._aclose()


def name_trio_task(name: str) -> None:
    import trio

    trio.lowlevel.current_task().name = name


def name_asyncio_task(name: str) -> None:
    import asyncio

    task = asyncio.current_task()
    assert task is not None  # called by the task itself
    task.set_name(name)


def trio_tasks_blocked() -> list:
    """(who, stack) for every task of the running trio loop, the user's own tasks first.

    Called from the watchdog's SIGALRM handler, which runs in the loop's thread while the
    loop waits; trio's introspection (``current_root_task``) works there.
    """
    import trio

    root = trio.lowlevel.current_root_task()
    found, todo = [], [root] if root is not None else []
    while todo:
        task = todo.pop()
        found.append((f"task {task.name}", watchdog.coro_stack(task.coro)))
        todo.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return sorted(found, key=lambda wait: watchdog.users_function(wait[1]) is None)
