"""A small suite of anyio's own primitives for bisecting anyio's releases on the index
(docs/shards-and-bisect.md): a rendezvous memory stream passing 200 items between two tasks,
and 500 checkpoints, each in a fresh ``anyio.run`` on asyncio.

    cd evidence/bisect/anyio_suite && python -m pytest_concurrency bisect \
        --versions 'anyio==4.0.0..anyio==4.16.0' -- test_anyio_bench.py --benchmark-only
"""

import anyio
import anyio.lowlevel


async def _pump(n):
    send, recv = anyio.create_memory_object_stream(0)

    async def producer():
        async with send:
            for i in range(n):
                await send.send(i)

    total = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        async with recv:
            async for x in recv:
                total += x
    return total


async def _checkpoints(n):
    for _ in range(n):
        await anyio.lowlevel.checkpoint()


def test_memory_stream(benchmark):
    assert benchmark(anyio.run, _pump, 200) == sum(range(200))


def test_checkpoints(benchmark):
    benchmark(anyio.run, _checkpoints, 500)
