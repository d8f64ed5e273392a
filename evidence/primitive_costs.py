"""Per-primitive cost of each backend: channel hand-off and spawn+join.

    python3 evidence/primitive_costs.py [--backends gevent,asyncio] [--repeats 5]
    python3 evidence/primitive_costs.py --smoke      # asyncio and threading, a tenth of the counts, once

For each backend, the median of ``--repeats`` runs (each one ``backend.run``) of:
* rendezvous ping-pong: two ``channel(0)``, a task echoes every item; ns per hand-off
  (two hand-offs per round trip);
* bounded(64) stream: one task puts n items into ``channel(64)``, main gets them; ns per item;
* spawn+join: start a task that returns at once and join it, n times in sequence; µs each.
Clocks start after the helper task has answered once, so process start-up is not counted
as channel cost. Every run checks that each item arrived, in order.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

from pytest_concurrency import backends

# Counts per backend, small enough that the slowest (processes) finishes in seconds.
COUNTS = {  # (ping-pong round trips, stream items, spawn+join)
    "threading": (2_000, 20_000, 500),
    "multiprocessing": (300, 3_000, 20),
}
FAST = (5_000, 20_000, 2_000)


SMOKE_BACKENDS = "asyncio,threading"


def counts(spec: str, share: float = 1.0) -> tuple[int, int, int]:
    return tuple(max(1, int(n * share)) for n in COUNTS.get(spec.partition("[")[0], FAST))


# --- sync bodies (module level: multiprocessing pickles the tasks) -------------------------


def pong(b, inbox, outbox, n):
    for _ in range(n + 1):
        outbox.put(inbox.get())


def stream(b, ch, n):
    for i in range(n + 1):
        ch.put(i)


def noop(b):
    return 1


def pingpong_main(b, n):
    a, z = b.channel(0), b.channel(0)
    task = b.spawn(pong, b, a, z, n)
    a.put(-1)
    assert z.get() == -1  # the echo task is up
    start = time.perf_counter()
    for i in range(n):
        a.put(i)
        if z.get() != i:
            raise AssertionError(f"ping-pong lost item {i}")
    elapsed = time.perf_counter() - start
    task.join()
    return elapsed / (2 * n)


def stream_main(b, n):
    ch = b.channel(64)
    task = b.spawn(stream, b, ch, n)
    assert ch.get() == 0  # the producer is up
    start = time.perf_counter()
    for i in range(1, n + 1):
        if ch.get() != i:
            raise AssertionError(f"stream lost item {i}")
    elapsed = time.perf_counter() - start
    task.join()
    return elapsed / n


def spawn_main(b, n):
    b.spawn(noop, b).join()  # warm up (e.g. the forkserver process)
    start = time.perf_counter()
    total = sum(b.spawn(noop, b).join() for _ in range(n))
    elapsed = time.perf_counter() - start
    assert total == n
    return elapsed / n


# --- async bodies ---------------------------------------------------------------------------


async def a_pong(b, inbox, outbox, n):
    for _ in range(n + 1):
        await outbox.put(await inbox.get())


async def a_stream(b, ch, n):
    for i in range(n + 1):
        await ch.put(i)


async def a_noop(b):
    return 1


async def a_pingpong_main(b, n):
    a, z = b.channel(0), b.channel(0)
    task = b.spawn(a_pong, b, a, z, n)
    await a.put(-1)
    assert await z.get() == -1
    start = time.perf_counter()
    for i in range(n):
        await a.put(i)
        if await z.get() != i:
            raise AssertionError(f"ping-pong lost item {i}")
    elapsed = time.perf_counter() - start
    await task.join()
    return elapsed / (2 * n)


async def a_stream_main(b, n):
    ch = b.channel(64)
    task = b.spawn(a_stream, b, ch, n)
    assert await ch.get() == 0
    start = time.perf_counter()
    for i in range(1, n + 1):
        if await ch.get() != i:
            raise AssertionError(f"stream lost item {i}")
    elapsed = time.perf_counter() - start
    await task.join()
    return elapsed / n


async def a_spawn_main(b, n):
    await b.spawn(a_noop, b).join()
    start = time.perf_counter()
    total = 0
    for _ in range(n):
        total += await b.spawn(a_noop, b).join()
    elapsed = time.perf_counter() - start
    assert total == n
    return elapsed / n


BODIES = {
    "sync": (pingpong_main, stream_main, spawn_main),
    "async": (a_pingpong_main, a_stream_main, a_spawn_main),
}


def measure(spec: str, repeats: int, share: float = 1.0) -> tuple[float, float, float]:
    b = backends.load(spec)
    medians = []
    for body, n, scale in zip(BODIES[b.family], counts(spec, share), (1e9, 1e9, 1e6)):
        medians.append(statistics.median(b.run(body, b, n) for _ in range(repeats)) * scale)
    return tuple(medians)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(backends.DEFAULT_SPECS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"the smallest run: {SMOKE_BACKENDS} (unless --backends), one repeat, a tenth of the counts",
    )
    args = parser.parse_args(argv)
    share = 1.0
    if args.smoke:
        if args.backends == parser.get_default("backends"):
            args.backends = SMOKE_BACKENDS
        args.repeats, share = 1, 0.1
    specs = backends.parse_list(args.backends)
    print(f"# Python {platform.python_version()}, {os.cpu_count()} CPUs, median of {args.repeats}")
    header = f"{'backend':<44} {'rendezvous ns/hand-off':>23} {'bounded(64) ns/item':>20} {'spawn+join us':>14}"
    print(header)
    print("-" * len(header))
    for spec in specs:
        reason = backends.unavailable_reason(spec)
        if reason:
            print(f"{spec:<44} skipped: {reason}")
            continue
        b = backends.load(spec)
        label = f"{spec} ({b.library or 'cpython'} {b.version})"
        pingpong, stream_ns, spawn_us = measure(spec, args.repeats, share)
        print(f"{label:<44} {pingpong:>23,.0f} {stream_ns:>20,.0f} {spawn_us:>14,.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
