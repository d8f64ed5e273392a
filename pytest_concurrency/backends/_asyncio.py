"""asyncio tasks and queues on the stdlib event loop."""

from __future__ import annotations

import asyncio
from collections import deque

from . import base


class Rendezvous:
    """Unbuffered channel for coroutines: ``put`` waits until a getter has the item."""

    def __init__(self):
        self._getters: deque[asyncio.Future] = deque()
        self._putters: deque[tuple[object, asyncio.Future]] = deque()

    async def put(self, item) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(item)
                return
        done = asyncio.get_running_loop().create_future()
        self._putters.append((item, done))
        await done

    async def get(self):
        while self._putters:
            item, done = self._putters.popleft()
            if not done.done():
                done.set_result(None)
                return item
        getter = asyncio.get_running_loop().create_future()
        self._getters.append(getter)
        return await getter


class AsyncTask:
    def __init__(self, backend: Backend, fn, args):
        self._backend = backend
        self._name = base.task_name(fn)
        self._task = asyncio.get_running_loop().create_task(fn(*args))
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self._backend._failures.failed(
                self, base.TaskFailed(self._backend.name, self._name, error)
            )

    def cancel(self) -> None:
        self._task.cancel()

    async def join(self):
        try:
            return await self._task
        except asyncio.CancelledError:
            if not self._task.cancelled():  # the joiner itself is being cancelled
                raise
            raise base.TaskCancelled(self._backend.name, self._name) from None
        except Exception as exc:
            raise base.TaskFailed(self._backend.name, self._name, exc) from exc
        finally:
            self._backend._failures.joined(self)


class StreamConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer

    async def sendall(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def recv_exactly(self, n: int) -> bytes:
        return await self._reader.readexactly(n)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


class Backend(base.AsyncBackend):
    name = "asyncio"
    library = ""

    def __init__(self):
        self._failures = base.FailureTracker(self.name)

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()

    def run(self, main, *args):
        self._failures = base.FailureTracker(self.name)
        loop = self.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            result = loop.run_until_complete(main(*args))
            self._failures.raise_first()
            return result
        finally:
            _cancel_remaining(loop)
            asyncio.set_event_loop(None)
            loop.close()

    def spawn(self, fn, *args):
        return AsyncTask(self, fn, args)

    def channel(self, capacity=None):
        if capacity == 0:
            return Rendezvous()
        return asyncio.Queue(maxsize=capacity or 0)

    async def sleep(self, seconds):
        await asyncio.sleep(seconds)

    async def open_connection(self, host, port):
        reader, writer = await asyncio.open_connection(host, port)
        return StreamConnection(reader, writer)


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    # What asyncio.run does on exit, so a workload that failed midway leaves no task behind.
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
