"""Seeds 003/004, IO-bound fan-out: ``tasks`` operations that each wait ``latency``.

Transports: ``timer`` waits with the model's own ``sleep``; ``tcp`` connects to the
loopback latency server (``latency_server``), sends a request naming the task's id and
the latency, and waits for the reply, which must carry that id.

Concurrency is what the model's users would use: one task per job when tasks are cheap
(``backend.max_parallel is None``), else a pool of ``max_parallel`` workers (the stdlib
executor's default size) pulling jobs from a channel. The ideal wall time is one latency
(everything at once); the figure is the overhead above it. One op is one task (job).
"""

from __future__ import annotations

import time

from . import Outcome, latency_server
from ._base import TableWorkload

TRANSPORTS = ("timer", "tcp")
REQUEST = latency_server.REQUEST


def _job(backend, job, latency, address):
    """Return (id the job got back, seconds it waited)."""
    start = time.monotonic()
    if address is None:
        backend.sleep(latency)
        return job, time.monotonic() - start
    conn = backend.open_connection(*address)
    try:
        conn.sendall(REQUEST.pack(job, round(latency * 1e6)))
        reply = conn.recv_exactly(REQUEST.size)
    finally:
        conn.close()
    return REQUEST.unpack(reply)[0], time.monotonic() - start


def _worker(backend, jobs, latency, address):
    done: list[tuple[int, float]] = []
    while True:
        job = jobs.get()
        if job is None:
            return done
        done.append(_job(backend, job, latency, address))


async def _ajob(backend, job, latency, address):
    start = time.monotonic()
    if address is None:
        await backend.sleep(latency)
        return job, time.monotonic() - start
    conn = await backend.open_connection(*address)
    try:
        await conn.sendall(REQUEST.pack(job, round(latency * 1e6)))
        reply = await conn.recv_exactly(REQUEST.size)
    finally:
        await conn.close()
    return REQUEST.unpack(reply)[0], time.monotonic() - start


async def _aworker(backend, jobs, latency, address):
    done: list[tuple[int, float]] = []
    while True:
        job = await jobs.get()
        if job is None:
            return done
        done.append(await _ajob(backend, job, latency, address))


class IO(TableWorkload):
    name = "io"
    unit = "task"
    waits = True
    PARAMS = ("tasks", "latency", "transport")
    #: the smoke case's 20 tasks: what a task keeps reads per task, what a round keeps larger
    LEAK_SIZES = {"tasks": 20}
    CASES = {
        "smoke": [
            {"tasks": 20, "latency": 0.005, "transport": "timer"},
            {"tasks": 20, "latency": 0.005, "transport": "tcp"},
        ],
        "default": [
            {"tasks": 100, "latency": 0.01, "transport": "timer"},
            {"tasks": 100, "latency": 0.01, "transport": "tcp"},
        ],
        "seed": [
            {"tasks": 500, "latency": 0.1, "transport": "timer"},
            {"tasks": 500, "latency": 0.1, "transport": "tcp"},
        ],
    }

    def unsupported(self, backend, params):
        if params["transport"] == "tcp" and not backend.has_sockets:
            return f"{backend.name} has no sockets: the tcp transport needs real IO"
        return None

    def prepare(self, params):
        if params["transport"] == "tcp":
            latency_server.shared_address()

    def run(self, backend, params):
        self.check_params(params)
        address = latency_server.shared_address() if params["transport"] == "tcp" else None
        main = self.async_main if backend.family == "async" else self.sync_main
        result = backend.run(main, backend, params["tasks"], params["latency"], address)
        return self.check(params, result)

    def sync_main(self, backend, tasks, latency, address):
        if backend.max_parallel is None:
            jobs = [backend.spawn(_job, backend, job, latency, address) for job in range(tasks)]
            return [job.join() for job in jobs]
        queue = backend.channel(None)
        for job in range(tasks):
            queue.put(job)
        workers = min(backend.max_parallel, tasks)
        for _ in range(workers):
            queue.put(None)
        pool = [backend.spawn(_worker, backend, queue, latency, address) for _ in range(workers)]
        return [done for worker in pool for done in worker.join()]

    async def async_main(self, backend, tasks, latency, address):
        if backend.max_parallel is None:
            jobs = [backend.spawn(_ajob, backend, job, latency, address) for job in range(tasks)]
            return [await job.join() for job in jobs]
        queue = backend.channel(None)
        for job in range(tasks):
            await queue.put(job)
        workers = min(backend.max_parallel, tasks)
        for _ in range(workers):
            await queue.put(None)
        pool = [backend.spawn(_aworker, backend, queue, latency, address) for _ in range(workers)]
        return [done for worker in pool for done in await worker.join()]

    def check_params(self, params):
        super().check_params(params)
        if params["transport"] not in TRANSPORTS:
            raise ValueError(
                f"io transport {params['transport']!r} unknown; valid: {', '.join(TRANSPORTS)}"
            )
        if params["tasks"] < 1 or not params["latency"] > 0:
            raise ValueError(f"io needs tasks >= 1 and latency > 0; got {params}")

    def check(self, params, result):
        tasks, latency = params["tasks"], params["latency"]
        ids = sorted(job for job, _ in result)
        if ids != list(range(tasks)):
            missing = sorted(set(range(tasks)) - set(ids))
            extra = sorted(set(ids) - set(range(tasks)))
            raise self.fail(
                params,
                f"{len(ids)} replies for {tasks} tasks; missing ids {missing[:5]}, "
                f"unexpected ids {extra[:5]}",
            )
        # Half the latency, not all of it: libev-style loops (gevent) start timers from a
        # cached clock. This still catches a sleep or reply that did not wait at all.
        early = [(job, waited) for job, waited in result if waited < latency / 2]
        if early:
            job, waited = early[0]
            raise self.fail(
                params,
                f"{len(early)} task(s) finished before the latency, e.g. task {job} "
                f"after {waited * 1e3:.2f} ms of {latency * 1e3:.2f} ms",
            )
        return Outcome(ops=tasks, extra={"ideal_s": latency}, tasks=tasks)


WORKLOAD = IO()
