"""What gevent and eventlet share: green tasks on a hub entered from the main greenlet.

Both libraries come in two variants: plain (their own green socket module) and
``patched`` (the process is monkey-patched first, so the stdlib ``socket`` is green;
only valid in a worker process of its own, hence ``isolation_only``). Tasks still alive
when ``main`` returns are killed, or they would wake in the next run on the same hub.
"""

from __future__ import annotations

import greenlet

from . import base
from ._sockets import SocketStream


class HubBackend(base.SyncBackend):
    def __init__(self, variant: str = ""):
        if variant not in ("", "patched"):
            raise ValueError(f"{self.library} variant must be '' or 'patched', got {variant!r}")
        self.variant = variant
        self.name = f"{self.library}[patched]" if variant else self.library
        self.isolation_only = variant == "patched"
        self._failures = base.FailureTracker(self.name)
        self._live: set = set()  # spawned and not finished (see base.CapturedTask)
        self._socket_module = self._green_socket_module()

    def run(self, main, *args):
        if greenlet.getcurrent().parent is not None:
            raise base.ConcurrencyError(
                f"[{self.name}] run() must be entered from the main greenlet, not from a task"
            )
        if self.variant == "patched":
            self._monkey_patch()
            import socket

            self._socket_module = socket  # patched: the stdlib module is the library's now
        self._failures = base.FailureTracker(self.name)
        try:
            result = self._call_main(main, args)
        finally:
            self._kill_remaining()
        self._failures.raise_first()
        return result

    def open_connection(self, host, port):
        return SocketStream.connect(self._socket_module, host, port)

    # -- what each library does its own way ---------------------------------------------
    def _green_socket_module(self):
        raise NotImplementedError

    def _monkey_patch(self) -> None:
        raise NotImplementedError

    def _call_main(self, main, args):
        return main(*args)

    def _kill_remaining(self) -> None:
        raise NotImplementedError
