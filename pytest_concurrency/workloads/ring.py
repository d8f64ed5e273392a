"""Seed 000, the Erlang-vs-Stackless ring: m messages forwarded along a chain of n nodes.

Main sends m messages, values m-1 down to 0, one by one into channel 1; nodes 1..n-1
each forward to the next channel; node n consumes and checks it got all m, in order.
Value 0 is also the stop signal: each node forwards it, then ends.

One op is a hop: one message put into one channel and taken out by the next task. A
message crosses n channels (main -> node 1 -> ... -> node n), so a round is n*m hops.
"""

from __future__ import annotations

from . import Outcome
from ._base import TableWorkload, too_many_tasks


def _forward(inbox, outbox):
    while True:
        value = inbox.get()
        outbox.put(value)
        if value == 0:
            return


def _consume(inbox, m):
    """Return (messages received, first out-of-order message or None)."""
    received, error = 0, None
    while True:
        value = inbox.get()
        expected = m - 1 - received
        if value != expected and error is None:
            error = f"message #{received} was {value!r}, expected {expected}"
        received += 1
        if value == 0:
            return received, error


async def _aforward(inbox, outbox):
    while True:
        value = await inbox.get()
        await outbox.put(value)
        if value == 0:
            return


async def _aconsume(inbox, m):
    received, error = 0, None
    while True:
        value = await inbox.get()
        expected = m - 1 - received
        if value != expected and error is None:
            error = f"message #{received} was {value!r}, expected {expected}"
        received += 1
        if value == 0:
            return received, error


class Ring(TableWorkload):
    name = "ring"
    unit = "hop"
    PARAMS = ("n", "m", "capacity")
    #: the smoke case: 10 tasks passing 50 messages each (20 processes a round cost multiprocessing
    #: most of a round of 1,000 messages); a leak per message reads 20 times smaller
    LEAK_SIZES = {"n": 10, "m": 50}
    CASES = {
        "smoke": [
            {"n": 10, "m": 50, "capacity": 0},
            {"n": 10, "m": 50, "capacity": 10},
        ],
        "default": [
            {"n": 20, "m": 1000, "capacity": 0},
            {"n": 20, "m": 1000, "capacity": 10},
        ],
        "seed": [
            {"n": 300, "m": 10_000, "capacity": 0},
            {"n": 300, "m": 10_000, "capacity": 10},
            {"n": 300, "m": 10_000, "capacity": None},
        ],
    }

    def unsupported(self, backend, params):
        return too_many_tasks(
            backend,
            params["n"],
            {"process": 64},
            "one process per node: starting them dominates the round",
        )

    def sync_main(self, backend, n, m, capacity):
        channels = [backend.channel(capacity) for _ in range(n)]
        nodes = [backend.spawn(_forward, channels[i], channels[i + 1]) for i in range(n - 1)]
        last = backend.spawn(_consume, channels[-1], m)
        first = channels[0]
        for value in range(m - 1, -1, -1):
            first.put(value)
        for node in nodes:
            node.join()
        return last.join()

    async def async_main(self, backend, n, m, capacity):
        channels = [backend.channel(capacity) for _ in range(n)]
        nodes = [backend.spawn(_aforward, channels[i], channels[i + 1]) for i in range(n - 1)]
        last = backend.spawn(_aconsume, channels[-1], m)
        first = channels[0]
        for value in range(m - 1, -1, -1):
            await first.put(value)
        for node in nodes:
            await node.join()
        return await last.join()

    def check_params(self, params):
        super().check_params(params)
        if params["n"] < 1 or params["m"] < 1:
            raise ValueError(f"ring needs n >= 1 and m >= 1, got n={params['n']}, m={params['m']}")

    def check(self, params, result):
        received, error = result
        if error or received != params["m"]:
            raise self.fail(
                params, f"node n received {received} of {params['m']} messages; {error}"
            )
        return Outcome(ops=params["n"] * params["m"], tasks=params["n"])


WORKLOAD = Ring()
