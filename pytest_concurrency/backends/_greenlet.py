"""Raw greenlets with the smallest scheduler that gives them channels and sleep.

This is the Stackless-style floor: no event loop, no IO, just switching. A task that
blocks switches straight to the next ready task (one switch per hand-off); only when
nothing is ready does control go back to the hub in ``run``, which fires timers or, when
nothing can ever wake, raises ``Deadlock`` instead of hanging.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque

import greenlet

from . import base

_NEW = object()  # the value a task's greenlet is first switched into with
_CANCEL = object()  # a ready entry that throws base.Cancel into the task instead of switching


class Scheduler:
    def __init__(self, backend: Backend):
        self.backend = backend
        self.hub = greenlet.getcurrent()
        self.ready: deque = deque()  # (greenlet, value to switch in with)
        self.timers: list = []  # heap of (deadline, seq, greenlet)
        self._seq = itertools.count()
        self.tasks: set[greenlet.greenlet] = set()  # started or ready, not finished
        # What cancel() must unhook a task from, so that nothing wakes it where it no longer waits:
        self.sleeping: dict = {}  # greenlet -> seq of its live timer (older heap entries are stale)
        self.joining: dict = {}  # greenlet -> the GreenletTask whose end it waits for
        self.channels: list = []  # this run's channels (their waiter queues)

    def new(self, fn) -> greenlet.greenlet:
        glet = greenlet.greenlet(fn, parent=self.hub)
        self.tasks.add(glet)
        self.ready.append((glet, _NEW))
        return glet

    def wake(self, glet, value=None) -> None:
        self.ready.append((glet, value))

    def block(self):
        """Suspend the current task until ``wake`` names it; return the value it was given."""
        if greenlet.getcurrent() is self.hub:
            raise base.ConcurrencyError(
                f"[{self.backend.name}] a blocking call ran outside run(); call it from a task"
            )
        if self.timers:
            self._fire_due(time.monotonic())
        # Only running tasks are switched to directly: a new greenlet takes on the stack
        # depth of whoever starts it, so starting one from a task would nest task in task
        # until RecursionError (3000 spawned tasks do it). The hub starts new ones.
        if self.ready and self.ready[0][1] is not _NEW and self.ready[0][1] is not _CANCEL:
            glet, value = self.ready.popleft()
            return glet.switch(value)
        return self.hub.switch()

    def cancel(self, glet) -> None:
        """Unhook ``glet`` from whatever it waits on and queue the throw of ``Cancel`` into it."""
        self._forget(glet)
        self.ready.append((glet, _CANCEL))

    def _forget(self, glet) -> None:
        self.sleeping.pop(glet, None)
        task = self.joining.pop(glet, None)
        if task is not None and glet in task._joiners:
            task._joiners.remove(glet)
        for channel in self.channels:
            channel.forget(glet)

    def _throw_cancel(self, glet) -> None:
        # Queued by cancel(); run from the hub. The task may have ended, or blocked
        # elsewhere since it was cancelled: unhook it again before the throw.
        if glet.dead:
            return
        self._forget(glet)
        if glet:
            glet.throw(base.Cancel())
        else:  # never started: it starts, sees the value and ends through its finally
            glet.switch(_CANCEL)

    def sleep(self, seconds: float):
        current = greenlet.getcurrent()
        if seconds <= 0:  # yield: go to the back of the ready queue
            self.ready.append((current, None))
        else:
            seq = next(self._seq)
            self.sleeping[current] = seq
            heapq.heappush(self.timers, (time.monotonic() + seconds, seq, current))
        return self.block()

    def _fire_due(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, seq, glet = heapq.heappop(self.timers)
            if self.sleeping.get(glet) == seq:  # else a cancelled task's timer
                del self.sleeping[glet]
                self.wake(glet)

    def loop(self, main_glet: greenlet.greenlet) -> None:
        while not main_glet.dead:
            if self.ready:
                glet, value = self.ready.popleft()
                if value is _CANCEL:
                    self._throw_cancel(glet)
                else:
                    glet.switch(value)
            elif self.timers:
                delay = self.timers[0][0] - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self._fire_due(time.monotonic())
            else:
                raise base.Deadlock(
                    f"[{self.backend.name}] deadlock: main and {len(self.tasks) - 1} other "
                    f"task(s) are blocked on channels or joins and no timer is pending"
                )

    def kill_remaining(self) -> None:
        # Unwinds tasks left suspended so their finally blocks run now, not at GC.
        for glet in list(self.tasks):
            if glet:  # started and not dead
                glet.throw(greenlet.GreenletExit)
        self.tasks.clear()


class GreenletTask:
    def __init__(self, backend: Backend, sched: Scheduler, fn, args):
        self._backend = backend
        self._sched = sched
        self._fn = fn
        self._args = args
        self.name = base.task_name(fn)
        self.done = False
        self._result = None
        self._error: BaseException | None = None
        self._cancelled = False  # ended by cancel() before it returned
        self._joiners: list[greenlet.greenlet] = []
        self.glet = sched.new(self._main)

    def _main(self, first):
        try:
            if first is _CANCEL:
                raise base.Cancel()
            self._result = self._fn(*self._args)
        except base.Cancel:
            self._cancelled = True
        except Exception as exc:
            self._error = exc
            self._backend._failures.failed(
                self, base.TaskFailed(self._backend.name, self.name, exc)
            )
        finally:
            self.done = True
            self._sched.tasks.discard(self.glet)
            for joiner in self._joiners:
                self._sched.wake(joiner)
            self._joiners.clear()

    def join(self):
        if not self.done:
            current = greenlet.getcurrent()
            self._joiners.append(current)
            self._sched.joining[current] = self
            try:
                self._sched.block()
            finally:
                self._sched.joining.pop(current, None)
        self._backend._failures.joined(self)
        if self._error is not None:
            raise base.TaskFailed(self._backend.name, self.name, self._error) from self._error
        if self._cancelled:
            raise base.TaskCancelled(self._backend.name, self.name)
        return self._result

    def cancel(self) -> None:
        if not self.done:
            self._sched.cancel(self.glet)


class Channel:
    """FIFO channel; a waiting getter receives the item directly from the putter."""

    def __init__(self, sched: Scheduler, capacity: int | None):
        self._sched = sched
        self._capacity = capacity
        self._items: deque = deque()
        self._getters: deque = deque()  # greenlets waiting for an item
        self._putters: deque = deque()  # (greenlet, item) waiting for room / a taker
        sched.channels.append(self)

    def forget(self, glet) -> None:
        """A cancelled task no longer waits here (tasks are cancelled oldest first, so the
        removal usually finds it at the front)."""
        if glet in self._getters:
            self._getters.remove(glet)
        if self._putters and any(g is glet for g, _ in self._putters):
            self._putters = deque(p for p in self._putters if p[0] is not glet)

    def put(self, item) -> None:
        if self._getters:
            self._sched.wake(self._getters.popleft(), item)
            return
        if self._capacity is None or len(self._items) < self._capacity:
            self._items.append(item)
            return
        self._putters.append((greenlet.getcurrent(), item))
        self._sched.block()

    def get(self):
        if self._items:
            item = self._items.popleft()
            if self._putters:  # room freed: the oldest waiting putter's item moves in
                putter, waiting = self._putters.popleft()
                self._items.append(waiting)
                self._sched.wake(putter)
            return item
        if self._putters:  # rendezvous: take straight from the putter, release it
            putter, item = self._putters.popleft()
            self._sched.wake(putter)
            return item
        self._getters.append(greenlet.getcurrent())
        return self._sched.block()

    def __len__(self) -> int:
        return len(self._items)


class Backend(base.SyncBackend):
    name = "greenlet"
    library = "greenlet"
    has_sockets = False

    def __init__(self):
        self._failures = base.FailureTracker(self.name)
        self._sched: Scheduler | None = None

    def _scheduler(self) -> Scheduler:
        if self._sched is None:
            raise base.ConcurrencyError(f"[{self.name}] call spawn/channel/sleep inside run()")
        return self._sched

    def run(self, main, *args):
        if self._sched is not None:
            raise base.ConcurrencyError(f"[{self.name}] run() is not reentrant")
        self._failures = base.FailureTracker(self.name)
        self._sched = sched = Scheduler(self)
        outcome: dict = {}

        def main_task(_first):
            try:
                outcome["result"] = main(*args)
            except Exception as exc:
                outcome["error"] = exc
            finally:
                sched.tasks.discard(main_glet)

        main_glet = sched.new(main_task)
        try:
            sched.loop(main_glet)
        except base.Deadlock:
            self._failures.raise_first()  # a crashed task is the likelier cause: name it
            raise
        finally:
            sched.kill_remaining()
            self._sched = None
        if "error" in outcome:
            raise outcome["error"]
        self._failures.raise_first()
        return outcome["result"]

    def spawn(self, fn, *args):
        return GreenletTask(self, self._scheduler(), fn, args)

    def channel(self, capacity=None):
        if capacity is not None and capacity < 0:
            raise ValueError(f"channel capacity must be None or >= 0, got {capacity}")
        return Channel(self._scheduler(), capacity)

    def sleep(self, seconds):
        self._scheduler().sleep(seconds)

    def open_connection(self, host, port):
        raise base.Unsupported(
            "greenlet has no sockets: raw greenlets only switch; use gevent or eventlet for IO"
        )
