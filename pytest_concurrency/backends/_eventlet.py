"""eventlet green threads on eventlet's hub, with ``eventlet.queue`` and green sockets.

eventlet warns on import (``EventletDeprecationWarning``); the import is silenced here so
users who run ``-W error`` are not broken by merely having eventlet installed.
``LightQueue`` is eventlet's queue without ``task_done`` bookkeeping: the fastest of its
queues on a ring and a ping-pong, and with ``maxsize=0`` a true rendezvous (``put``
returns only after a ``get`` took the item; tests/test_backends.py checks it).
Waiting putters are kept in a set, so with several *blocked* senders their order is not
FIFO; items from one sender always arrive in order.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import eventlet
    import eventlet.green.socket
    import eventlet.queue

import greenlet

from . import base
from ._sockets import SocketStream


class EventletTask(base.CapturedTask):
    # Catching in _body keeps the hub from printing the traceback; join() or run() report it.
    def __init__(self, backend: "Backend", fn, args):
        super().__init__(backend, fn, backend._live)
        self._gt = eventlet.spawn(self._body, *args)

    def kill(self) -> None:
        self._gt.kill()

    def join(self):
        return self._outcome(self._gt.wait())


class Backend(base.SyncBackend):
    library = "eventlet"

    def __init__(self, variant: str = ""):
        if variant not in ("", "patched"):
            raise ValueError(f"eventlet variant must be '' or 'patched', got {variant!r}")
        self.variant = variant
        self.name = "eventlet[patched]" if variant else "eventlet"
        self.isolation_only = variant == "patched"
        self._failures = base.FailureTracker(self.name)
        self._live: set[EventletTask] = set()  # spawned and not finished
        self._socket_module = eventlet.green.socket

    def run(self, main, *args):
        if greenlet.getcurrent().parent is not None:
            raise base.ConcurrencyError(
                f"[{self.name}] run() must be entered from the main greenlet, not from a task"
            )
        if self.variant == "patched":
            self._patch()
        self._failures = base.FailureTracker(self.name)
        try:
            result = main(*args)
        finally:
            self._kill_remaining()
        self._failures.raise_first()
        return result

    def _patch(self) -> None:
        if not eventlet.patcher.is_monkey_patched("socket"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eventlet.monkey_patch()
        import socket

        self._socket_module = socket  # patched: the stdlib module is eventlet's now

    def _kill_remaining(self) -> None:
        # Leftover green threads would otherwise wake in the next run on this hub.
        for task in list(self._live):
            task.kill()
        self._live.clear()

    def spawn(self, fn, *args):
        return EventletTask(self, fn, args)

    def channel(self, capacity=None):
        if capacity is not None and capacity < 0:
            raise ValueError(f"channel capacity must be None or >= 0, got {capacity}")
        return eventlet.queue.LightQueue(capacity)

    def sleep(self, seconds):
        eventlet.sleep(seconds)

    def open_connection(self, host, port):
        return SocketStream.connect(self._socket_module, host, port)
