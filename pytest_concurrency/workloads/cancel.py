"""Cancellation, the way timeouts end tasks: ``tasks`` tasks block, then every one is ended.

Each task says on ``ready`` that it is about to block, then blocks: on a channel ``get``
that nothing will answer (``wait=get``) or on a sleep far longer than any round
(``wait=sleep``). Then:

* ``end=cancel``: main cancels every task (``Task.cancel()``, oldest first) and joins each,
  which must raise ``TaskCancelled``;
* ``end=abandon``: main returns with all of them still blocked; ``backend.run`` must tear
  them down (their ``finally`` blocks run) before it returns.

Checks, every round: every task ended (cancel: each join raised ``TaskCancelled``; abandon:
each one's ``finally`` ran before ``run`` returned), none ran past its cancel point (a task
that wakes up marks it; for ``get``, main then puts an item per task on the channel, which a
task that was not really cancelled would take), and every ``finally`` ran, once.

One op is one task spawned, blocked and cancelled: compare with spawn's per-task cost for
what the cancel adds. Memory per blocked task is measured like spawn's (``memory``), and what
a cancelled task leaves behind by the plugin's memory pass (``retained_b_per_task_round``).
Threads cannot be cancelled (the stdlib has no way), so threading is skipped, not faked.
"""

from __future__ import annotations

import queue

from ..backends.base import TaskCancelled
from . import Outcome
from ._base import TableWorkload, too_many_tasks
from ._live_memory import per_live_task, traced_bytes

#: Longer than any round may take (the stall timeout ends one before): a task that
#: wakes from it was not cancelled.
LONG_SLEEP_S = 3600.0
WAITS = ("get", "sleep")
ENDS = ("cancel", "abandon")


class Marks(list):
    """Task ids a task records from where it runs (``put``), for tasks in this process."""

    put = list.append

    def drain(self, expected: int) -> list:
        return list(self)


class ProcessMarks:
    """The same for tasks in processes of their own: a multiprocessing queue."""

    def __init__(self, backend):
        self._queue = backend.channel(None)

    def put(self, ident) -> None:
        self._queue.put(ident)

    def drain(self, expected: int) -> list:
        # A task's process flushes its puts before it ends, and every one has ended here: what
        # it put is in the pipe already, so past the expected count nothing is waited for (a
        # wait of 50 ms, twice a round, was a sixth of a smoke-scale round of ten tasks).
        got: list = []
        try:
            while True:
                got.append(self._queue.get(timeout=0.0 if len(got) >= expected else 5.0))
        except queue.Empty:
            return got


class Traces:
    """What a round's tasks leave, each mark a task id: ``ran_past`` (a task that woke was not
    cancelled: never) and ``cleaned`` (each task's ``finally``, once). Made in the round, as the
    two were, with no more work: a plain class, not a frozen one."""

    ran_past: Marks | ProcessMarks
    cleaned: Marks | ProcessMarks

    def __init__(self, backend):
        if backend.task_kind == "process":
            self.ran_past, self.cleaned = ProcessMarks(backend), ProcessMarks(backend)
        else:
            self.ran_past, self.cleaned = Marks(), Marks()


def _blocked(backend, wait, ready, gate, left: Traces, ident):
    try:
        ready.put(ident)
        if wait == "get":
            gate.get()
        else:
            backend.sleep(LONG_SLEEP_S)
        left.ran_past.put(ident)  # never reached: it was cancelled while blocked
        return ident
    finally:
        left.cleaned.put(ident)


async def _ablocked(backend, wait, ready, gate, left: Traces, ident):
    try:
        await ready.put(ident)
        if wait == "get":
            await gate.get()
        else:
            await backend.sleep(LONG_SLEEP_S)
        left.ran_past.put(ident)
        return ident
    finally:
        left.cleaned.put(ident)  # Marks: a plain call (a checkpoint here would be cancelled too)


class Cancel(TableWorkload):
    name = "cancel"
    unit = "cancel"
    PARAMS = ("tasks", "wait", "end")
    _KINDS = (("get", "cancel"), ("sleep", "cancel"), ("get", "abandon"))
    #: the smoke case's 10 tasks: what a task keeps reads per task, what a round keeps larger
    LEAK_SIZES = {"tasks": 10}
    CASES = {
        "smoke": [{"tasks": 10, "wait": w, "end": e} for w, e in _KINDS],
        # 30 of each kind, which every model runs (processes too), and 1000 for how it scales
        "default": [
            *({"tasks": 30, "wait": w, "end": e} for w, e in _KINDS),
            {"tasks": 1_000, "wait": "get", "end": "cancel"},
        ],
        "seed": [{"tasks": 10_000, "wait": w, "end": e} for w, e in _KINDS],
    }
    #: the task functions (module level: a process model pickles them); a subclass may wrap them
    sync_task = staticmethod(_blocked)
    async_task = staticmethod(_ablocked)

    def unsupported(self, backend, params):
        if not backend.can_cancel:
            return (
                f"{backend.name} has no way to cancel a task (the stdlib cannot stop a thread "
                f"from outside), so cancellation is not measured there rather than faked"
            )
        return too_many_tasks(
            backend,
            params["tasks"],
            {"process": 100, "thread": 5_000},
            "one process per task, all blocked at once: starting them is the round",
        )

    def run(self, backend, params) -> Outcome:
        self.check_params(params)
        left = Traces(backend)
        main = self.async_main if backend.family == "async" else self.sync_main
        result = backend.run(main, backend, params["tasks"], params["wait"], params["end"], left)
        return self.check(params, result, left)

    def memory(self, backend, params, heap: int | None = None) -> dict:
        """KiB per blocked task (see ``_live_memory``), measured on the ``cancel`` end;
        ``heap``: read by ``heap_round``."""
        return per_live_task(
            lambda probe: self._probed(backend, params, probe).extra["grown"], params["tasks"], heap
        )

    def heap_round(self, backend, params):
        """A round of the case that reads its blocked tasks' traced heap (under tracemalloc):
        on the ``cancel`` end only, where the memory figure's round is the case's own."""
        if params.get("end") != "cancel":
            return None
        return lambda: self._probed(backend, params, traced_bytes)

    def _probed(self, backend, params, probe) -> Outcome:
        """A round on the ``cancel`` end whose ``grown`` is what ``probe`` read grow while every
        task was blocked."""
        self.check_params(params)
        main = self.async_main if backend.family == "async" else self.sync_main
        left = Traces(backend)
        result = backend.run(main, backend, params["tasks"], params["wait"], "cancel", left, probe)
        return self.check(dict(params, end="cancel"), result, left)

    def sync_main(self, backend, count, wait, end, left: Traces, memory=None):
        ready, gate = backend.channel(None), backend.channel(None)
        before = memory() if memory else 0
        tasks = [
            backend.spawn(self.sync_task, backend, wait, ready, gate, left, i) for i in range(count)
        ]
        alive = {ready.get() for _ in range(count)}
        grown = memory() - before if memory else None
        if end == "abandon":
            return alive, None, grown
        for task in tasks:
            task.cancel()
        ended = sum(_cancelled(task.join) for task in tasks)
        if wait == "get" and backend.task_kind != "process":  # (processes: each join saw it end)
            for i in range(count):
                gate.put(i)  # a task still alive would take one and mark ran_past
            backend.sleep(0)
        return alive, ended, grown

    async def async_main(self, backend, count, wait, end, left: Traces, memory=None):
        ready, gate = backend.channel(None), backend.channel(None)
        before = memory() if memory else 0
        tasks = [
            backend.spawn(self.async_task, backend, wait, ready, gate, left, i)
            for i in range(count)
        ]
        alive = {await ready.get() for _ in range(count)}
        grown = memory() - before if memory else None
        if end == "abandon":
            return alive, None, grown
        for task in tasks:
            task.cancel()
        ended = 0
        for task in tasks:
            ended += await _acancelled(task.join)
        if wait == "get":
            for i in range(count):
                await gate.put(i)
            await backend.sleep(0)
        return alive, ended, grown

    def check_params(self, params):
        super().check_params(params)
        if not isinstance(params["tasks"], int) or params["tasks"] < 1:
            raise ValueError(f"cancel needs tasks >= 1, got {params['tasks']!r}")
        if params["wait"] not in WAITS:
            raise ValueError(
                f"cancel: wait {params['wait']!r} unknown; use one of {', '.join(WAITS)}"
            )
        if params["end"] not in ENDS:
            raise ValueError(f"cancel: end {params['end']!r} unknown; use one of {', '.join(ENDS)}")

    def check(self, params, result, left: Traces):
        alive, ended, grown = result
        count = params["tasks"]
        if alive != set(range(count)):
            raise self.fail(params, f"{len(alive)} distinct tasks of {count} reported blocked")
        if ended is not None and ended != count:
            raise self.fail(
                params,
                f"{count - ended} of {count} cancelled tasks returned instead of ending cancelled",
            )
        past = sorted(left.ran_past.drain(0))
        if past:
            raise self.fail(
                params, f"{len(past)} task(s) ran past their cancel point, first {past[:3]}"
            )
        done = sorted(left.cleaned.drain(count))
        if done != list(range(count)):
            missing = sorted(set(range(count)) - set(done))
            twice = len(done) - len(set(done))
            raise self.fail(
                params,
                f"cleanup (finally) ran for {len(set(done))} of {count} tasks"
                + (f", missing {missing[:3]}" if missing else "")
                + (f", {twice} ran twice" if twice else "")
                + (" after run() returned" if params["end"] == "abandon" else ""),
            )
        return Outcome(ops=count, extra={} if grown is None else {"grown": grown}, tasks=count)


def _cancelled(join) -> bool:
    try:
        join()
    except TaskCancelled:
        return True
    return False


async def _acancelled(join) -> bool:
    try:
        await join()
    except TaskCancelled:
        return True
    return False


WORKLOAD = Cancel()
