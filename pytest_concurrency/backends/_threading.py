"""OS threads with the stdlib's ``queue`` module: the model most Python code already uses."""

from __future__ import annotations

import queue
import socket
import threading
import time

from . import base
from ._sockets import SocketStream

#: How long ``run`` lets tasks still running after ``main`` returned end before it reports
#: failures: a task that raises just after main's last ``get`` is reported, not lost (the
#: same grace as multiprocessing's). Tasks still running after it are left as daemons.
EXIT_GRACE_S = 1.0


class ThreadTask(base.CapturedTask):
    def __init__(self, backend: Backend, fn, args):
        super().__init__(backend, fn, backend._live)
        self._result = None
        self._thread = threading.Thread(target=self._run, args=args, name=self.name, daemon=True)
        self._thread.start()

    def _run(self, *args):
        self._result = self._body(*args)

    def join(self):
        self._thread.join()
        return self._outcome(self._result)

    def cancel(self) -> None:
        raise base.Unsupported(
            "threading cannot cancel a task: the stdlib has no way to stop a thread from outside "
            "(only code the thread runs can decide to return)"
        )


class Backend(base.SyncBackend):
    name = "threading"
    library = ""  # part of CPython: the Python version is what matters
    max_parallel = base.stdlib_pool_size()
    task_kind = "thread"
    can_cancel = False  # see ThreadTask.cancel

    def __init__(self):
        self._failures = base.FailureTracker(self.name)
        self._live: set = set()  # spawned and not finished (see base.CapturedTask)

    def run(self, main, *args):
        self._failures = base.FailureTracker(self.name)
        self._live = set()
        result = main(*args)
        self._let_running_tasks_end(EXIT_GRACE_S)
        self._failures.raise_first()
        return result

    def _let_running_tasks_end(self, grace: float) -> None:
        if not self._live:
            return
        deadline = time.monotonic() + grace
        for task in list(self._live):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            task._thread.join(left)

    def spawn(self, fn, *args):
        return ThreadTask(self, fn, args)

    def channel(self, capacity=None):
        if capacity == 0:
            return base.Handoff(queue.SimpleQueue(), threading.Semaphore(0), threading.Lock())
        if capacity is None:
            return queue.SimpleQueue()
        return queue.Queue(maxsize=capacity)

    def sleep(self, seconds):
        time.sleep(seconds)

    def open_connection(self, host, port):
        return SocketStream.connect(socket, host, port)
