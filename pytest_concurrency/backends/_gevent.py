"""gevent greenlets on the libev/libuv hub, with gevent's own queues and sockets.

Channel choice (measured with a 100-node ring and a ping-pong, see the issue 2 note):
``Channel`` is the only gevent type with rendezvous semantics (gevent's ``Queue(0)`` is
*unbounded*, like the stdlib's). On a ring it is ~25x slower per hop than a buffered
queue, not because it is badly made but because a rendezvous forces one switch through the
hub per message per hop, while a buffered queue lets each node drain a batch per switch;
on a ping-pong, where every hand-off must switch anyway, all gevent queues cost the same.
``SimpleQueue`` (no ``task_done`` bookkeeping) was the fastest for bounded and unbounded.
"""

from __future__ import annotations

import gevent
import gevent.queue
import gevent.socket
from gevent.exceptions import LoopExit

from . import base
from ._hub import HubBackend


class GeventTask(base.CapturedTask):
    # Catching in _body (not in gevent) keeps the hub from printing the traceback: the
    # failure is reported once, by join() or run(), naming the backend.
    def __init__(self, backend: Backend, fn, args):
        super().__init__(backend, fn, backend._live)
        self._glet = gevent.spawn(self._body, *args)

    @property
    def alive(self) -> bool:
        return not self._glet.dead

    def kill(self) -> None:
        self._glet.kill(block=False)

    def cancel(self) -> None:
        self._cancelled = True
        self.kill()  # GreenletExit where it blocks; join() waits for it to end

    def join(self):
        self._glet.join()
        return self._outcome(self._glet.value)


class Backend(HubBackend):
    library = "gevent"

    def _green_socket_module(self):
        return gevent.socket

    def _monkey_patch(self) -> None:
        from gevent import monkey

        if not monkey.is_module_patched("socket"):
            monkey.patch_all()

    def _call_main(self, main, args):
        try:
            return main(*args)
        except LoopExit as exc:
            try:
                raise base.Deadlock(
                    f"[{self.name}] deadlock: every greenlet is blocked and the hub has "
                    f"nothing left to wait for"
                ) from exc
            except base.Deadlock:
                self._failures.raise_first()  # a crashed task is the likelier cause: name it
                raise

    def _kill_remaining(self) -> None:
        alive = [t for t in self._live if t.alive]
        for task in alive:
            task.kill()
        if alive:
            gevent.joinall([t._glet for t in alive])
        self._live.clear()

    def spawn(self, fn, *args):
        return GeventTask(self, fn, args)

    def channel(self, capacity=None):
        if capacity == 0:
            return gevent.queue.Channel()
        if capacity is not None and capacity < 0:
            raise ValueError(f"channel capacity must be None or >= 0, got {capacity}")
        return gevent.queue.SimpleQueue(capacity)

    def sleep(self, seconds):
        gevent.sleep(seconds)
