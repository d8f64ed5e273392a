"""A user's own benchmark test with the leaks the memory pass must see, on any model: each
task mallocs 4 KiB in C and never frees it (``c``), the test keeps a growing list (``list``),
leaves one task that never ends per round (``forever``), or maps 1 MiB per round, touches it
and keeps it: resident memory that no heap counts, as a C extension's own allocator or a
leaked stack would be, shared through Python's ``mmap`` (``mmap``) or private through C's
``mmap`` called as a C extension would (``cmap``); ``none`` leaks nothing, and neither does ``tasks``,
which spawns 100 short-lived tasks a round (threads, on threading)."""

import ctypes
import mmap
import threading

import pytest

LIBC = ctypes.CDLL(None)
LIBC.malloc.restype, LIBC.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
KEPT = []  # the "list" leak
# the "mmap" leak's maps, in slots made up front: no Python container grows with it, so what it
# keeps in the Python heap is the map object alone (~100 B a round, under that heap's floor)
MAPPED, NEXT_MAP = [None] * 10_000, iter(range(10_000))
MIB = 1 << 20
BACKGROUND = set()  # asyncio's advice without its done-callback: cancelled tasks pile up here


def task_body(kind):
    if kind == "c":
        LIBC.malloc(4096)


def never_ending(backend):
    if backend.name == "gevent":
        import gevent.event

        gevent.spawn(gevent.event.Event().wait)
    elif backend.name == "greenlet":  # parked in its first switch, for ever
        import greenlet

        parked = greenlet.greenlet(lambda: greenlet.getcurrent().parent.switch())
        parked.switch()
        BACKGROUND.add(parked)
    elif backend.name == "threading":
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    else:
        import asyncio

        BACKGROUND.add(asyncio.get_running_loop().create_task(asyncio.Event().wait()))


def main_for(kind, backend):
    tasks = 100 if kind == "tasks" else 10

    def after():
        if kind == "list":
            KEPT.append(bytearray(1024))
        if kind == "forever":
            never_ending(backend)
        if kind == "mmap":
            mapped = mmap.mmap(-1, MIB)
            for offset in range(0, MIB, mmap.PAGESIZE):
                mapped[offset] = 1
            MAPPED[next(NEXT_MAP)] = mapped
        if kind == "cmap":  # private anonymous pages, as C code maps its own arena or stack
            private = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
            address = LIBC.mmap(None, MIB, mmap.PROT_READ | mmap.PROT_WRITE, private, -1, 0)
            ctypes.memset(address, 1, MIB)

    if backend.family == "async":

        async def task():
            task_body(kind)

        async def main():
            for t in [backend.spawn(task) for _ in range(tasks)]:
                await t.join()
            after()
    else:

        def main():
            for t in [backend.spawn(task_body, kind) for _ in range(tasks)]:
                t.join()
            after()

    return main


@pytest.mark.parametrize("kind", ["none", "c", "list", "forever", "mmap", "cmap", "tasks"])
def test_pool(benchmark, concurrency_backend, kind):
    benchmark.pedantic(
        concurrency_backend.run, args=(main_for(kind, concurrency_backend),), rounds=3
    )
