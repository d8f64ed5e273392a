"""Seed 001, cost of a context switch: ping-pong between two tasks over rendezvous channels.

Ping sends i, pong answers i + 1, ping checks the answer; ``None`` ends pong. Both
channels are rendezvous (capacity 0), so every hand-off is a switch from one task to the
other. One op is one switch: a round trip is two, a round is 2 * rounds.
"""

from __future__ import annotations

from . import Outcome
from ._base import TableWorkload


def _ping(out, back, rounds):
    """Return the first wrong answer as (i, answer), or None."""
    error = None
    for i in range(rounds):
        out.put(i)
        answer = back.get()
        if answer != i + 1 and error is None:
            error = (i, answer)
    out.put(None)
    return error


def _pong(inbox, out):
    """Return how many pings were answered."""
    answered = 0
    while True:
        value = inbox.get()
        if value is None:
            return answered
        out.put(value + 1)
        answered += 1


async def _aping(out, back, rounds):
    error = None
    for i in range(rounds):
        await out.put(i)
        answer = await back.get()
        if answer != i + 1 and error is None:
            error = (i, answer)
    await out.put(None)
    return error


async def _apong(inbox, out):
    answered = 0
    while True:
        value = await inbox.get()
        if value is None:
            return answered
        await out.put(value + 1)
        answered += 1


class Switch(TableWorkload):
    name = "switch"
    unit = "switch"
    PARAMS = ("rounds",)
    #: the smoke case's 500 round trips; a leak per switch reads 20 times smaller
    LEAK_SIZES = {"rounds": 500}
    CASES = {
        "smoke": [{"rounds": 500}],
        "default": [{"rounds": 10_000}],
        "seed": [{"rounds": 100_000}],
    }

    def sync_main(self, backend, rounds):
        there, back = backend.channel(0), backend.channel(0)
        pong = backend.spawn(_pong, there, back)
        ping = backend.spawn(_ping, there, back, rounds)
        return ping.join(), pong.join()

    async def async_main(self, backend, rounds):
        there, back = backend.channel(0), backend.channel(0)
        pong = backend.spawn(_apong, there, back)
        ping = backend.spawn(_aping, there, back, rounds)
        return await ping.join(), await pong.join()

    def check_params(self, params):
        super().check_params(params)
        if params["rounds"] < 1:
            raise ValueError(f"switch needs rounds >= 1, got {params['rounds']}")

    def check(self, params, result):
        error, answered = result
        if error is not None or answered != params["rounds"]:
            wrong = (
                f"round {error[0]} was answered {error[1]!r}, expected {error[0] + 1}; "
                if error
                else ""
            )
            raise self.fail(params, f"{wrong}pong answered {answered} of {params['rounds']} pings")
        return Outcome(ops=2 * params["rounds"], tasks=2)


WORKLOAD = Switch()
