"""Seed 002, "bench of chain": N senders -> N receivers, each pair over its own bounded queue.

Payload kinds: ``int`` (the event is its sequence number), ``str`` (one shared str object
of ``size`` characters, sent by reference where the model allows), ``bytes`` (a fresh copy
of ``size`` bytes per event, so copying, and for processes pickling, is part of the cost).
Events of the other two kinds are ``(sequence, payload)``; senders end with ``None``.

Each receiver checks the count and order of its events and sums a checksum that reads
the payload (its length and one character chosen by the sequence number), so a payload
that arrives truncated or changed is caught. One op is one event delivered.
"""

from __future__ import annotations

import functools

from . import Outcome
from ._base import TableWorkload, too_many_tasks

KINDS = ("int", "str", "bytes")


def _template(kind: str, size: int):
    if kind == "str":
        return "".join(chr(97 + i % 26) for i in range(size))
    if kind == "bytes":
        return bytearray(i % 256 for i in range(size))  # bytes(template) is a fresh copy
    return None


def _weight(kind: str, seq: int, payload) -> int:
    if kind == "int":
        return seq
    if not payload:
        return 0
    mark = payload[seq % len(payload)]
    return len(payload) + (ord(mark) if kind == "str" else mark)


@functools.lru_cache(maxsize=32)  # computed once per case, not inside every timed round
def _expected_checksum(kind: str, events: int, size: int) -> int:
    template = _template(kind, size)
    return sum(_weight(kind, seq, template) for seq in range(events))


def _events(kind, events, template):
    if kind == "int":
        return range(events)
    if kind == "str":
        return ((seq, template) for seq in range(events))
    return ((seq, bytes(template)) for seq in range(events))


def _send(queue, kind, events, template):
    for event in _events(kind, events, template):
        queue.put(event)
    queue.put(None)


def _receive(queue, kind):
    """Return (events received, checksum, first out-of-order event or None)."""
    received, checksum, error = 0, 0, None
    while True:
        event = queue.get()
        if event is None:
            return received, checksum, error
        seq, payload = (event, None) if kind == "int" else event
        if seq != received and error is None:
            error = f"event #{received} had sequence number {seq}"
        checksum += _weight(kind, seq, payload)
        received += 1


async def _asend(queue, kind, events, template):
    for event in _events(kind, events, template):
        await queue.put(event)
    await queue.put(None)


async def _areceive(queue, kind):
    received, checksum, error = 0, 0, None
    while True:
        event = await queue.get()
        if event is None:
            return received, checksum, error
        seq, payload = (event, None) if kind == "int" else event
        if seq != received and error is None:
            error = f"event #{received} had sequence number {seq}"
        checksum += _weight(kind, seq, payload)
        received += 1


class Chain(TableWorkload):
    name = "chain"
    unit = "event"
    PARAMS = ("workers", "events", "capacity", "payload", "size")
    #: the smoke case's 4 workers and 200 events; a leak per event reads 10 times smaller
    LEAK_SIZES = {"workers": 4, "events": 200}
    CASES = {
        "smoke": [
            {"workers": 4, "events": 200, "capacity": 16, "payload": "int", "size": 0},
            {"workers": 4, "events": 200, "capacity": 16, "payload": "bytes", "size": 256},
        ],
        "default": [
            {"workers": 10, "events": 2000, "capacity": 64, "payload": "int", "size": 0},
            {"workers": 10, "events": 2000, "capacity": 64, "payload": "bytes", "size": 1024},
        ],
        "seed": [
            {"workers": 100, "events": 10_000, "capacity": 256, "payload": "int", "size": 0},
            {"workers": 100, "events": 10_000, "capacity": 256, "payload": "str", "size": 100},
            {"workers": 100, "events": 10_000, "capacity": 256, "payload": "bytes", "size": 100},
        ],
    }

    def unsupported(self, backend, params):
        return too_many_tasks(
            backend,
            2 * params["workers"],
            {"process": 64},
            "two processes per worker pair: starting them dominates the round",
        )

    def sync_main(self, backend, workers, events, capacity, payload, size):
        template = _template(payload, size)
        queues = [backend.channel(capacity) for _ in range(workers)]
        receivers = [backend.spawn(_receive, q, payload) for q in queues]
        senders = [backend.spawn(_send, q, payload, events, template) for q in queues]
        for sender in senders:
            sender.join()
        return [receiver.join() for receiver in receivers]

    async def async_main(self, backend, workers, events, capacity, payload, size):
        template = _template(payload, size)
        queues = [backend.channel(capacity) for _ in range(workers)]
        receivers = [backend.spawn(_areceive, q, payload) for q in queues]
        senders = [backend.spawn(_asend, q, payload, events, template) for q in queues]
        for sender in senders:
            await sender.join()
        return [await receiver.join() for receiver in receivers]

    def check_params(self, params):
        super().check_params(params)
        if params["payload"] not in KINDS:
            raise ValueError(
                f"chain payload {params['payload']!r} unknown; valid: {', '.join(KINDS)}"
            )
        if params["workers"] < 1 or params["events"] < 0 or params["size"] < 0:
            raise ValueError(f"chain needs workers >= 1, events >= 0, size >= 0; got {params}")

    def check(self, params, result):
        events, kind = params["events"], params["payload"]
        want = _expected_checksum(kind, events, params["size"])
        for i, (received, checksum, error) in enumerate(result):
            if error or received != events or checksum != want:
                raise self.fail(
                    params,
                    f"receiver {i} got {received} of {events} events, checksum {checksum} "
                    f"(expected {want}); {error}",
                )
        return Outcome(ops=params["workers"] * events, tasks=2 * params["workers"])


WORKLOAD = Chain()
