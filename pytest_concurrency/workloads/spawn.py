"""Seed 003, tasks as light threads: create and join ``count`` tasks, and memory per live task.

Each task reports itself on a ``ready`` channel and parks on a ``release`` channel, so
all ``count`` are alive at once when memory is read; then main releases them all and
joins each, checking it returned its own id. One op is one task (spawn + park + join).

Memory per live task is measured once per benchmark, untimed, after the timed rounds
(``memory``; how: see ``_live_memory``), its traced heap in the memory pass's first round
(``heap_round``).
"""

from __future__ import annotations

from . import Outcome
from ._base import TableWorkload, too_many_tasks
from ._live_memory import per_live_task, traced_bytes


def _parked(ready, release, ident):
    ready.put(ident)
    release.get()
    return ident


async def _aparked(ready, release, ident):
    await ready.put(ident)
    await release.get()
    return ident


class Spawn(TableWorkload):
    name = "spawn"
    unit = "task"
    PARAMS = ("count",)
    #: the smoke case's 10 tasks: what a task keeps reads per task, what a round keeps larger
    LEAK_SIZES = {"count": 10}
    CASES = {
        "smoke": [{"count": 10}],
        # Two counts: how the cost per task grows with the number alive (seed 001).
        "default": [{"count": 30}, {"count": 3_000}],
        "seed": [{"count": 100_000}],
    }

    def unsupported(self, backend, params):
        return too_many_tasks(
            backend,
            params["count"],
            {"process": 100, "thread": 5_000},
            "all alive at once: beyond that the round measures the kernel's memory and "
            "process limits, and takes minutes",
        )

    def memory(self, backend, params, heap: int | None = None) -> dict:
        """KiB per live task (see ``_live_memory``); ``heap``: read by ``heap_round``."""
        return per_live_task(
            lambda probe: self._probed(backend, params, probe).extra["grown"], params["count"], heap
        )

    def heap_round(self, backend, params):
        """A round of the case that reads its live tasks' traced heap (under tracemalloc)."""
        return lambda: self._probed(backend, params, traced_bytes)

    def _probed(self, backend, params, probe) -> Outcome:
        """A round whose ``grown`` is what ``probe`` read grow while every task was alive."""
        self.check_params(params)
        main = self.async_main if backend.family == "async" else self.sync_main
        return self.check(params, backend.run(main, backend, params["count"], probe))

    def sync_main(self, backend, count, memory=None):
        ready, release = backend.channel(None), backend.channel(None)
        before = memory() if memory else 0
        tasks = [backend.spawn(_parked, ready, release, i) for i in range(count)]
        seen = {ready.get() for _ in range(count)}
        grown = memory() - before if memory else None
        for _ in range(count):
            release.put(True)
        return [task.join() for task in tasks], seen, grown

    async def async_main(self, backend, count, memory=None):
        ready, release = backend.channel(None), backend.channel(None)
        before = memory() if memory else 0
        tasks = [backend.spawn(_aparked, ready, release, i) for i in range(count)]
        seen = {await ready.get() for _ in range(count)}
        grown = memory() - before if memory else None
        for _ in range(count):
            await release.put(True)
        return [await task.join() for task in tasks], seen, grown

    def check_params(self, params):
        super().check_params(params)
        if params["count"] < 1:
            raise ValueError(f"spawn needs count >= 1, got {params['count']}")

    def check(self, params, result):
        returned, seen, grown = result
        count = params["count"]
        if seen != set(range(count)):
            raise self.fail(params, f"{len(seen)} distinct tasks of {count} reported alive")
        wrong = [(i, r) for i, r in enumerate(returned) if r != i]
        if len(returned) != count or wrong:
            raise self.fail(params, f"{len(wrong)} task(s) returned another id, first {wrong[:1]}")
        return Outcome(ops=count, extra={} if grown is None else {"grown": grown}, tasks=count)


WORKLOAD = Spawn()
