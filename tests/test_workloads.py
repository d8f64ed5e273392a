"""Every workload runs and verifies on every model, and its check catches a wrong run.

The wrong runs come from ``Faulty``, a test-only wrapper around a real backend that
drops, swaps or changes one message on one channel, changes one task's result, skips
sleeping, or changes one reply from the latency server. Each must make ``run`` raise
``WorkloadError``: a workload that can be fast and wrong would be worthless.
"""

from __future__ import annotations

import itertools
import re

import pytest

from pytest_concurrency import backends, workloads
from pytest_concurrency.measure import driver, memory
from pytest_concurrency.workloads import WorkloadError, latency_server

pytestmark = pytest.mark.timeout(120)  # a broken fault would hang, not fail

_LOADED: dict = {}


def backend(spec: str):
    reason = backends.unavailable_reason(spec)
    if reason:
        pytest.skip(reason)
    if spec not in _LOADED:
        _LOADED[spec] = backends.load(spec)
    return _LOADED[spec]


def _smoke_cases():
    for name in workloads.names():
        for i, params in enumerate(workloads.get(name).cases("smoke")):
            yield pytest.param(name, params, id=f"{name}{i}")


@pytest.mark.parametrize("spec", backends.DEFAULT_SPECS + backends.EXTRA_SPECS)
@pytest.mark.parametrize(("name", "params"), list(_smoke_cases()))
def test_workload_runs_and_verifies(spec, name, params):
    wl = workloads.get(name)
    be = backend(spec)
    reason = wl.unsupported(be, params)
    if reason:
        pytest.skip(reason)
    outcome = wl.run(be, params)
    expected_ops = {
        "ring": lambda p: p["n"] * p["m"],
        "chain": lambda p: p["workers"] * p["events"],
        "io": lambda p: p["tasks"],
        "spawn": lambda p: p["count"],
        "switch": lambda p: 2 * p["rounds"],
        "cancel": lambda p: p["tasks"],
    }[name](params)
    assert outcome.ops == expected_ops
    if name == "io":
        assert outcome.extra == {"ideal_s": params["latency"]}
    if name in ("spawn", "cancel"):
        assert outcome.extra == {}  # memory is measured apart, untimed (test_spawn_memory_*)


# -- the wrong runs ------------------------------------------------------------------


class Faulty:
    """A real backend with one fault injected; everything else is delegated.

    ``channel``: which created channel (by creation order) gets ``put_fault``.
    ``put_fault(k, item)``: the items to really put for the k-th put (k from 0).
    ``join_fault``: (task index, new result) for one spawned task's join.
    """

    def __init__(
        self, inner, *, channel=0, put_fault=None, join_fault=None, no_sleep=False, reply_fault=None
    ):
        self._inner = inner
        self._channel = channel
        self._put_fault = put_fault
        self._join_fault = join_fault
        self._no_sleep = no_sleep
        self._reply_fault = reply_fault  # the job whose reply comes back with another id
        # next() on a count is atomic under the GIL: threads may create and call at once
        self._channels, self._spawned = itertools.count(), itertools.count()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def channel(self, capacity=None):
        inner = self._inner.channel(capacity)
        if next(self._channels) != self._channel or self._put_fault is None:
            return inner
        return (AsyncFaultyChannel if self.family == "async" else FaultyChannel)(
            inner, self._put_fault
        )

    def spawn(self, fn, *args):
        task = self._inner.spawn(fn, *args)
        if next(self._spawned) == (self._join_fault or (None,))[0]:
            return (AsyncWrongResult if self.family == "async" else WrongResult)(
                task, self._join_fault[1]
            )
        return task

    def sleep(self, seconds):  # returns the coroutine for async backends
        return self._inner.sleep(0 if self._no_sleep else seconds)

    def open_connection(self, host, port):
        conn = self._inner.open_connection(host, port)
        if self._reply_fault is None:
            return conn
        if self.family == "async":
            return _async_wrong_reply(conn, self._reply_fault)
        return WrongReply(conn, self._reply_fault)


class FaultyChannel:
    def __init__(self, inner, fault):
        self._inner, self._fault, self._puts = inner, fault, itertools.count()

    def put(self, item):
        for real in self._fault(next(self._puts), item):
            self._inner.put(real)

    def get(self):
        return self._inner.get()


class AsyncFaultyChannel(FaultyChannel):
    async def put(self, item):
        for real in self._fault(next(self._puts), item):
            await self._inner.put(real)

    async def get(self):
        return await self._inner.get()


class WrongResult:
    def __init__(self, task, result):
        self._task, self._result = task, result

    def join(self):
        self._task.join()
        return self._result


class AsyncWrongResult(WrongResult):
    async def join(self):
        await self._task.join()
        return self._result


def _request_id(request: bytes) -> int:
    return latency_server.REQUEST.unpack(request)[0]


def _bad_id(reply: bytes) -> bytes:
    job, delay = latency_server.REQUEST.unpack(reply)
    return latency_server.REQUEST.pack(job + 1000, delay)


class WrongReply:
    """The reply to job ``target`` comes back carrying another id."""

    def __init__(self, conn, target):
        self._conn, self._target, self._job = conn, target, None
        self.close = conn.close

    def sendall(self, data):
        self._job = _request_id(data)
        return self._conn.sendall(data)

    def recv_exactly(self, n):
        reply = self._conn.recv_exactly(n)
        return _bad_id(reply) if self._job == self._target else reply


async def _async_wrong_reply(connecting, target):
    conn = await connecting

    class AsyncWrongReply(WrongReply):
        async def recv_exactly(self, n):
            reply = await self._conn.recv_exactly(n)
            return _bad_id(reply) if self._job == self._target else reply

    return AsyncWrongReply(conn, target)


def drop(at):
    return lambda k, item: [] if k == at else [item]


def swap(at):
    held = []

    def fault(k, item):
        if k == at:
            held.append(item)
            return []
        return [item, *held] if k == at + 1 else [item]

    return fault


def change(at, how):
    return lambda k, item: [how(item)] if k == at else [item]


def _zeroed(event):
    seq, payload = event
    return seq, bytes(len(payload))


RING = {"n": 5, "m": 20, "capacity": 0}
CHAIN_BYTES = {"workers": 3, "events": 50, "capacity": 4, "payload": "bytes", "size": 64}
CHAIN_STR = dict(CHAIN_BYTES, payload="str")
CHAIN_INT = dict(CHAIN_BYTES, payload="int", size=0)
SWITCH = {"rounds": 30}
SPAWN = {"count": 12}
TIMER = {"tasks": 10, "latency": 0.002, "transport": "timer"}
TCP = dict(TIMER, transport="tcp")

WRONG_RUNS = [
    # (workload, params, fault kwargs (built fresh per run: swap keeps state), the error says)
    ("ring", RING, lambda: dict(put_fault=drop(1)), "received 19 of 20"),
    ("ring", RING, lambda: dict(put_fault=swap(1)), "message #1 was 17, expected 18"),
    (
        "ring",
        dict(RING, capacity=10),
        lambda: dict(channel=4, put_fault=drop(3)),
        "received 19 of 20",
    ),
    ("chain", CHAIN_INT, lambda: dict(put_fault=drop(1)), "got 49 of 50"),
    (
        "chain",
        CHAIN_INT,
        lambda: dict(channel=2, put_fault=swap(7)),
        "event #7 had sequence number 8",
    ),
    (
        "chain",
        CHAIN_BYTES,
        lambda: dict(channel=1, put_fault=change(1, _zeroed)),
        "receiver 1 got 50 of 50 events, checksum",
    ),
    (
        "chain",
        CHAIN_STR,
        lambda: dict(put_fault=change(3, lambda e: (e[0], e[1][:-1]))),
        "receiver 0 got 50 of 50 events, checksum",
    ),
    (
        "switch",
        SWITCH,
        lambda: dict(channel=1, put_fault=change(4, lambda v: v + 1)),
        "round 4 was answered 6",
    ),
    (
        "switch",
        SWITCH,
        lambda: dict(channel=0, put_fault=change(9, lambda v: v + 1)),
        "round 9 was answered 11",
    ),
    (
        "spawn",
        SPAWN,
        lambda: dict(put_fault=change(2, lambda i: (i + 1) % 12)),
        "11 distinct tasks of 12",
    ),
    (
        "spawn",
        SPAWN,
        lambda: dict(join_fault=(5, 4)),
        "1 task(s) returned another id, first [(5, 4)]",
    ),
    # a latency that a task which does not sleep cannot reach on a loaded machine (trio, 3.13, CI:
    # 10 tasks without a sleep took over 1 ms, half of 2 ms)
    (
        "io",
        dict(TIMER, latency=0.05),
        lambda: dict(no_sleep=True),
        "task(s) finished before the latency",
    ),
    ("io", TCP, lambda: dict(reply_fault=3), "missing ids [3], unexpected ids [1003]"),
]


@pytest.mark.parametrize("spec", ["threading", "asyncio", "trio"])
@pytest.mark.parametrize(
    ("name", "params", "fault", "message"),
    WRONG_RUNS,
    ids=[f"{w[0]}{i}" for i, w in enumerate(WRONG_RUNS)],
)
def test_wrong_run_is_caught(spec, name, params, fault, message):
    be = backend(spec)
    wl = workloads.get(name)
    wl.run(be, params)  # the same case is right without the fault
    with pytest.raises(WorkloadError, match=re.escape(message)):
        wl.run(Faulty(be, **fault()), params)


@pytest.mark.parametrize("spec", ["threading", "asyncio", "trio"])
def test_io_lost_job_is_caught(spec):
    be = backend(spec)
    # How a job goes missing depends on the shape: a pool (threading sets max_parallel)
    # loses a job from its queue; one task per job (asyncio) loses a task's result.
    fault = dict(put_fault=drop(4)) if be.max_parallel else dict(join_fault=(4, (1004, 1.0)))
    with pytest.raises(WorkloadError, match=re.escape("missing ids [4]")):
        workloads.get("io").run(Faulty(be, **fault), TIMER)


# -- bad input and limits ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("chain", dict(CHAIN_INT, payload="float"), "payload 'float' unknown"),
        ("ring", {"n": 5, "m": 20}, "missing \\['capacity'\\]"),
        ("io", dict(TIMER, transport="udp"), "transport 'udp' unknown"),
        ("switch", {"rounds": 3, "depth": 2}, "unknown \\['depth'\\]"),
    ],
)
def test_bad_params_are_named(name, params, message):
    with pytest.raises(ValueError, match=message):
        workloads.get(name).run(backend("threading"), params)


def test_limits_are_reasons_not_shrinking():
    assert "no sockets" in workloads.get("io").unsupported(backend("greenlet"), TCP)
    assert workloads.get("io").unsupported(backend("threading"), TCP) is None
    mp = backend("multiprocessing[forkserver]")
    assert "300 live process tasks" in workloads.get("ring").unsupported(
        mp, workloads.get("ring").cases("seed")[0]
    )
    assert workloads.get("ring").unsupported(mp, RING) is None
    assert "100000 live thread tasks" in workloads.get("spawn").unsupported(
        backend("threading"), {"count": 100_000}
    )


def test_case_tables_are_json_scalars_for_every_scale():
    for name in workloads.names():
        wl = workloads.get(name)
        assert wl.name == name and wl.unit
        for scale in workloads.SCALES:
            rounds, warmup = wl.rounds(scale)
            assert rounds >= 3 and warmup >= 0
            cases = wl.cases(scale)
            assert cases
            for params in cases:
                assert set(params) == set(wl.PARAMS)
                assert all(v is None or isinstance(v, (int, float, str)) for v in params.values())


@pytest.mark.parametrize("spec", ["asyncio", "greenlet", "threading", "trio", "anyio[asyncio]"])
def test_spawn_memory_per_live_task_is_seen_however_the_model_allocates(spec):
    # asyncio/greenlet tasks live in Python's heap (arena reuse hides them from RSS),
    # threads mostly in their stacks (invisible to tracemalloc): both must show.
    if backends.unavailable_reason(spec):
        pytest.skip(backends.unavailable_reason(spec))
    be = backends.load(spec)
    wl = workloads.get("spawn")
    wl.run(be, {"count": 300})  # a round first: its freed memory is what later rounds reuse
    figures = wl.memory(be, {"count": 300})
    assert figures["kib_per_task"] == max(figures["rss_kib_per_task"], figures["heap_kib_per_task"])
    assert figures["kib_per_task"] > 0.25  # no model keeps a live task in under 256 bytes
    assert figures["heap_kib_per_task"] > 0.1  # every model allocates Python objects per task


@pytest.mark.parametrize("spec", ["asyncio", "threading"])
def test_the_memory_pass_reads_the_heap_per_live_task_in_its_first_round_of_the_case(
    spec, monkeypatch
):
    # spawn's traced heap per live task is read in the memory pass's first round of the case
    # (the second reads its peak; its leaks are read in rounds of a lighter case:
    # workloads.leak_params), not in a traced run of its own: one run of the case beyond them
    # (the RSS one), with the figure a run of its own reads
    be, wl, params = backends.load(spec), workloads.get("spawn"), {"count": 300}
    light = workloads.leak_params(wl, params)
    assert light == {"count": wl.LEAK_SIZES["count"]}
    wl.run(be, params)
    runs, run = [], be.run
    monkeypatch.setattr(be, "run", lambda *a: runs.append(a[2]) or run(*a))  # a[2]: the count
    figures = driver.memory_figures(wl, be, params)
    assert runs.count(300) == 3
    assert runs.count(light["count"]) == memory.WARMUP + figures["memory_rounds"]
    assert figures["tasks_per_round"] == 300
    assert figures["leak_tasks_per_round"] == light["count"]
    assert figures["leak_params"] == light
    monkeypatch.undo()
    alone = wl.memory(be, params)
    assert figures["heap_kib_per_task"] == pytest.approx(alone["heap_kib_per_task"], rel=0.1)
