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
* ``outside``: resident memory outside every heap: the process's anonymous and shared
  anonymous resident pages (``RssAnon + RssShmem`` in ``/proc/self/status``) less what glibc's
  malloc holds (its arenas and mapped chunks, ``mallinfo2``) and the Python heap. What C code
  or the interpreter maps for itself (``mmap``'d stacks and buffers, a library's own arenas)
  shows here and nowhere else. Read after ``malloc_trim(0)`` (``settle``); not judged where a
  heap grew by a quarter as much (gate/memory.py): a heap that grows grows here too.
* ``rss``: resident memory, recorded for the report and never judged: it moves with pages of
  code and data files read in, and with glibc's per-thread arenas (1-9 KiB per task per round
  on threading with nothing kept).
"""

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


def _find_libc(name: str, restype, why: str):
    """glibc's function ``name`` or why there is none."""
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None, why
    fn.restype, fn.argtypes = restype, []
    return fn, None


def _find_mallinfo2():
    """glibc's ``mallinfo2`` or why there is none."""
    return _find_libc(
        "mallinfo2", _MallInfo2, "no mallinfo2() in this C library (glibc 2.33+ has it)"
    )


#: Replaced in a test to stand for a C library without it.
MALLINFO2, NO_MALLINFO2 = _find_mallinfo2()
_MALLOC_TRIM = _find_libc("malloc_trim", ctypes.c_int, "")[0]
if _MALLOC_TRIM is not None:
    _MALLOC_TRIM.argtypes = [ctypes.c_size_t]
_STATUS = "/proc/self/status"


def python_heap() -> int:
    return tracemalloc.get_traced_memory()[0]


def c_heap() -> int:
    info = MALLINFO2()
    return info.uordblks + info.hblkhd - tracemalloc.get_tracemalloc_memory()


def settle() -> None:
    """Before the readings: garbage collected, and free C heap handed back to the system."""
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _resident_anonymous() -> int:
    """Anonymous and shared anonymous resident bytes (not the pages of files read in)."""
    total = 0
    with open(_STATUS, "rb") as fh:
        for line in fh:
            if line.startswith((b"RssAnon:", b"RssShmem:")):
                total += int(line.split()[1]) * 1024
    return total


def outside_heaps() -> int:
    # less all that glibc holds (its arenas, in use or free), not only what is in use: free
    # memory it keeps between rounds is its own (1,000 threads a round grew the arenas by
    # 80-160 KiB a round, every round, with nothing kept)
    info = MALLINFO2()
    return _resident_anonymous() - info.arena - info.hblkhd - python_heap()


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
        missing["c"] = missing["outside"] = NO_MALLINFO2
    else:
        probes["c"] = c_heap
        if _has_status():
            probes["outside"] = outside_heaps
        else:
            missing["outside"] = f"no {_STATUS} (Linux has it)"
    return probes, missing


def _has_status() -> bool:
    try:
        return _resident_anonymous() > 0
    except (OSError, ValueError):
        return False
