"""OS threads with the stdlib's ``queue`` module: the model most Python code already uses."""

from __future__ import annotations

import queue
import socket
import threading
import time

from . import base
from ._sockets import SocketStream


class Rendezvous:
    """Unbuffered channel: ``put`` returns only after a ``get`` has taken the item.

    Senders take turns (``_send_lock``), so the single ``_taken`` release always belongs to
    the sender currently waiting on it.
    """

    def __init__(self):
        self._items = queue.SimpleQueue()
        self._taken = threading.Semaphore(0)
        self._send_lock = threading.Lock()

    def put(self, item) -> None:
        with self._send_lock:
            self._items.put(item)
            self._taken.acquire()

    def get(self):
        item = self._items.get()
        self._taken.release()
        return item


class ThreadTask:
    def __init__(self, backend: "Backend", fn, args):
        self._backend = backend
        self._fn = fn
        self._result = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, args=args, name=base.task_name(fn), daemon=True
        )
        self._thread.start()

    def _main(self, *args):
        try:
            self._result = self._fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to join()
            self._error = exc
            self._backend._failures.failed(self, base.TaskFailed(self._backend.name, self._thread.name, exc))

    def join(self):
        self._thread.join()
        self._backend._failures.joined(self)
        if self._error is not None:
            raise base.TaskFailed(self._backend.name, self._thread.name, self._error) from self._error
        return self._result


class Backend(base.SyncBackend):
    name = "threading"
    library = ""  # part of CPython: the Python version is what matters
    max_parallel = base.stdlib_pool_size()

    def __init__(self):
        self._failures = base.FailureTracker(self.name)

    def run(self, main, *args):
        self._failures = base.FailureTracker(self.name)
        result = main(*args)
        self._failures.raise_first()
        return result

    def spawn(self, fn, *args):
        return ThreadTask(self, fn, args)

    def channel(self, capacity=None):
        if capacity == 0:
            return Rendezvous()
        if capacity is None:
            return queue.SimpleQueue()
        return queue.Queue(maxsize=capacity)

    def sleep(self, seconds):
        time.sleep(seconds)

    def open_connection(self, host, port):
        return SocketStream.connect(socket, host, port)
