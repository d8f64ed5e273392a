"""What the memory pass reads after each round: where a leak of each kind shows.

* ``python``: bytes traced by ``tracemalloc`` (every Python object: frames, coroutines,
  tasks, greenlets, ``Thread`` handles). Repeats to the byte from run to run.
* ``c``: the C heap in use, from glibc's ``mallinfo2()`` (all arenas, plus chunks it mapped
  alone), less what ``tracemalloc`` keeps for its own traces. Where C extensions allocate
  (greenlet's saved stacks, libev/libuv, uvloop, ctypes), and Python's own large objects
  too, which the gate subtracts (gate/memory.py). Not every C library has it (musl has
  none; glibc before 2.33 only the 32-bit ``mallinfo``): then it is not measured, and the
  report says so.
* ``threads``: the process's OS threads (``/proc/self/task``; Python's own threads elsewhere):
  a thread that never ends holds its stack outside any heap.
* ``greenlets``: greenlets alive (when greenlet is imported): a parked greenlet that nothing
  will ever switch to is a task that never ends.
* ``rss``: resident memory, recorded for the report and never judged: glibc's per-thread
  arenas made it grow on threading with nothing kept (1-9 KiB per task per round).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import tracemalloc

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _find_mallinfo2():
    """glibc's ``mallinfo2`` or why there is none."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None, "no mallinfo2() in this C library (glibc 2.33+ has it)"
    fn.restype, fn.argtypes = _MallInfo2, []
    return fn, None


#: Replaced in a test to stand for a C library without it.
MALLINFO2, NO_MALLINFO2 = _find_mallinfo2()


def python_heap() -> int:
    return tracemalloc.get_traced_memory()[0]


def c_heap() -> int:
    info = MALLINFO2()
    return info.uordblks + info.hblkhd - tracemalloc.get_tracemalloc_memory()


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def greenlets() -> int:
    module = sys.modules.get("greenlet")
    if module is None:
        return 0
    kind = module.greenlet
    return sum(1 for obj in gc.get_objects() if isinstance(obj, kind))


def rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except OSError:
        import psutil

        return psutil.Process().memory_info().rss


def available() -> tuple[dict, dict]:
    """({name: read()} of the probes this process has, {name: why not} of the others)."""
    probes = {"python": python_heap, "threads": threads, "greenlets": greenlets, "rss": rss}
    missing = {}
    if MALLINFO2 is None:
        missing["c"] = NO_MALLINFO2
    else:
        probes["c"] = c_heap
    return probes, missing
