"""A user's own benchmark test with the leaks the memory pass must see, on any model: each
task mallocs 4 KiB in C and never frees it (``c``), the test keeps a growing list (``list``),
or leaves one task that never ends per round (``forever``); ``none`` leaks nothing."""

import ctypes
import threading

import pytest

LIBC = ctypes.CDLL(None)
LIBC.malloc.restype, LIBC.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
KEPT = []  # the "list" leak
BACKGROUND = set()  # asyncio's advice without its done-callback: cancelled tasks pile up here


def task_body(kind):
    if kind == "c":
        LIBC.malloc(4096)


def never_ending(backend):
    if backend.name == "gevent":
        import gevent.event

        gevent.spawn(gevent.event.Event().wait)
    elif backend.name == "threading":
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    else:
        import asyncio

        BACKGROUND.add(asyncio.get_running_loop().create_task(asyncio.Event().wait()))


def main_for(kind, backend):
    def after():
        if kind == "list":
            KEPT.append(bytearray(1024))
        if kind == "forever":
            never_ending(backend)

    if backend.family == "async":

        async def task():
            task_body(kind)

        async def main():
            for t in [backend.spawn(task) for _ in range(10)]:
                await t.join()
            after()
    else:

        def main():
            for t in [backend.spawn(task_body, kind) for _ in range(10)]:
                t.join()
            after()

    return main


@pytest.mark.parametrize("kind", ["none", "c", "list", "forever"])
def test_pool(benchmark, concurrency_backend, kind):
    benchmark.pedantic(
        concurrency_backend.run, args=(main_for(kind, concurrency_backend),), rounds=3
    )
