"""Memory per live task: what a workload's ``memory`` hook reports (spawn, cancel).

Measured untimed, after the timed rounds, as the larger of two growths between before the
tasks were spawned and all of them alive (parked or blocked), from two separate runs (the
bookkeeping of ``tracemalloc`` would inflate RSS):

* RSS of this process plus the USS of multiprocessing children: thread stacks and
  processes live outside Python's heap. USS, because forked children share their
  parent's pages: only what is unique to a child is its cost. Not under valgrind, whose
  own memory is in every RSS figure: there the figure is the traced heap alone.
* bytes traced by ``tracemalloc``: coroutines, tasks and greenlets live in Python's heap,
  where the allocator reuses arenas freed by earlier rounds, so RSS barely moves. Read in the
  memory pass's first round (``heap_round``: the pass runs its rounds so, under
  ``tracemalloc`` anyway), which is the first traced one, as a run of its own was.
"""

from __future__ import annotations

import sys
import tracemalloc

import psutil

_SELF = psutil.Process()


def traced_bytes() -> int:
    return tracemalloc.get_traced_memory()[0]


def resident_bytes() -> int:
    total = _SELF.memory_info().rss
    mp = sys.modules.get("multiprocessing")  # only a model that imported it can have children
    if mp is not None:
        for child in mp.active_children():
            try:
                total += psutil.Process(child.pid).memory_full_info().uss
            except psutil.Error:  # exited between listing and reading
                pass
    return total


def under_valgrind() -> bool:
    """Whether this process runs under valgrind (its preloaded core is mapped in)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return any("vgpreload_core" in line for line in fh)
    except OSError:
        return False


def per_live_task(grown_with, count: int, heap: int | None = None) -> dict:
    """KiB per task from ``grown_with(probe)``: one run that returns the growth ``probe`` read;
    ``heap``: the traced growth already read in such a run (None: read here, in one more)."""
    rss = 0 if under_valgrind() else grown_with(resident_bytes)
    if heap is None:
        tracemalloc.start()
        try:
            heap = grown_with(traced_bytes)
        finally:
            tracemalloc.stop()
    return {
        "kib_per_task": max(rss, heap) / 1024 / count,
        "rss_kib_per_task": rss / 1024 / count,
        "heap_kib_per_task": heap / 1024 / count,
    }
