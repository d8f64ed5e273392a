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
from ._hub import HubBackend


class EventletTask(base.CapturedTask):
    # Catching in _body keeps the hub from printing the traceback; join() or run() report it.
    def __init__(self, backend: Backend, fn, args):
        super().__init__(backend, fn, backend._live)
        self._gt = eventlet.spawn(self._body, *args)

    def kill(self) -> None:
        self._gt.kill()

    def cancel(self) -> None:
        self._cancelled = True
        self.kill()  # eventlet throws GreenletExit into it at once, then resumes the caller

    def join(self):
        try:
            result = self._gt.wait()
        except greenlet.GreenletExit:  # wait() re-raises how a killed green thread ended
            if not self._cancelled:
                raise
            result = None
        return self._outcome(result)


class Backend(HubBackend):
    library = "eventlet"

    def _green_socket_module(self):
        return eventlet.green.socket

    def _monkey_patch(self) -> None:
        if not eventlet.patcher.is_monkey_patched("socket"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eventlet.monkey_patch()

    def _kill_remaining(self) -> None:
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
