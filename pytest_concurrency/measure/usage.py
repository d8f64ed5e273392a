"""What a stretch of rounds cost besides its figure: CPU user/sys, context switches, and how
busy other processes kept the machine meanwhile.

CPU time and context switches come from ``getrusage`` for this process plus whatever task
processes the backend reports. The whole machine's CPU time minus ours says how many cores
other processes kept busy (``foreign_cpu``): threads and processes need free cores, and a busy
neighbour slows them without any change in the code (the gate reads it, see gate.py).
"""

import contextlib
import math
import os
import resource
import sys
import time
from dataclasses import dataclass


@dataclass
class Usage:
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    ctx_voluntary: float = 0.0
    ctx_involuntary: float = 0.0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(*(a - b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def per(self, n: int) -> dict:
        return {k: v / n for k, v in zip(self.__dataclass_fields__, self.as_tuple())}

    def as_tuple(self) -> tuple:
        return (self.cpu_user_s, self.cpu_sys_s, self.ctx_voluntary, self.ctx_involuntary)


def self_usage() -> Usage:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(r.ru_utime, r.ru_stime, r.ru_nvcsw, r.ru_nivcsw)


def task_process_usage(backend) -> Usage:
    """CPU of the backend's own task processes (multiprocessing), reset on each call.

    Forkserver and spawn children are not our direct children, so RUSAGE_CHILDREN
    would miss them; the backend collects what each child reports when it ends.
    """
    take = getattr(backend, "take_child_usage", None)
    return Usage(**take()) if take else Usage()


def machine_busy_s() -> float:
    """CPU seconds all processes on the machine have used since boot (``/proc/stat``)."""
    import psutil

    t = psutil.cpu_times()
    idle = t.idle + sum(getattr(t, name, 0.0) for name in ("iowait", "guest", "guest_nice"))
    return sum(t) - idle  # guest time is already counted in user time


#: /proc/stat counts CPU time in ticks of 10 ms per core, so over a stretch shorter than this the
#: estimate of other processes' load could be off by more than the gate's margin (gate.interference.LOAD_MARGIN,
#: 0.3 cores) on a 2-core machine: it is not recorded then, rather than recorded wrong.
MIN_LOAD_WINDOW_S = 0.2


def foreign_cores(machine_busy: float, ours: float, wall: float) -> float | None:
    """Cores other processes kept busy: the machine's CPU seconds over a stretch of ``wall``
    seconds minus ``ours``; None when the stretch is too short to tell."""
    if wall < MIN_LOAD_WINDOW_S:
        return None
    return round(min(float(os.cpu_count() or 1), max(0.0, (machine_busy - ours) / wall)), 3)


class OthersRunning:
    """How many threads of other processes are running or waiting to run right now (on Linux,
    ``/proc/loadavg``'s count of runnable tasks, less those of ``root``'s process tree: this run's
    own); -1 where unknown.

    Read at the end of a side's turn (runner/lockstep.py), when the other side and the process
    that takes the turns wait for it: what is left is someone else's load. A rate over a window
    (``foreign_cores``) would count the turn-taking itself, thousands of turns a second on a
    microsecond test. Our own processes are not all asleep even then: on such a test the other
    side was still on its way to wait, and a threaded test's threads were winding down (0.8
    threads on average here). A reading costs ~0.1 ms: on a microsecond test, one is taken
    every ``every_s`` at most (-1 in between)."""

    REFRESH_S = 1.0  # how long the tree's threads are taken as known (this process's: never)

    def __init__(self, root: int, every_s: float = 0.0):
        self._root = root
        self._every_s = every_s
        self._read = -math.inf
        self._tree: list[str] = []  # the stat files of the tree's threads, but this process's
        self._listed = -math.inf

    def __call__(self) -> int:
        now = time.monotonic()
        if now - self._read < self._every_s:
            return -1
        self._read = now
        try:
            with open("/proc/loadavg", "rb") as fh:
                running = int(fh.read().split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            return -1
        if now - self._listed > self.REFRESH_S:
            mine = f"/proc/{os.getpid()}/"
            self._tree = [p for p in _tree_threads(self._root) if not p.startswith(mine)]
            self._listed = now
        ours = sum(map(_running, self._tree))
        ours += sum(_running(f"/proc/self/task/{tid}/stat") for tid in _listdir("/proc/self/task"))
        return max(0, running - max(1, ours))  # this thread, reading, is one of ours


def _tree_threads(root: int) -> list[str]:
    """The stat files of every thread of ``root`` and its descendants."""
    out, pids = [], [str(root)]
    while pids:
        pid = pids.pop()
        for tid in _listdir(f"/proc/{pid}/task"):
            out.append(f"/proc/{pid}/task/{tid}/stat")
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    pids += fh.read().split()
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:  # ended meanwhile
        return []


def _running(stat: str) -> bool:
    try:
        with open(stat, "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"R"
    except (OSError, IndexError):
        return False


class Window:
    """A stretch of rounds: our CPU usage over it, and other processes' load on the machine."""

    def __init__(self, backend):
        self._backend = backend
        task_process_usage(backend)  # drop anything left from before
        self._usage, self._busy, self._start = self_usage(), machine_busy_s(), time.perf_counter()

    def close(self) -> tuple[Usage, dict]:
        """(our usage, the machine's conditions as ``extra_info`` keys: see records.py)."""
        wall = time.perf_counter() - self._start
        used = self_usage() - self._usage + task_process_usage(self._backend)
        ours = used.cpu_user_s + used.cpu_sys_s
        return used, {"foreign_cpu": foreign_cores(machine_busy_s() - self._busy, ours, wall)}


def peak_rss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS reports bytes
