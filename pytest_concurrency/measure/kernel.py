"""The kernel's side of a round: syscalls, context switches, migrations, page faults, CPU time.

Concurrency is paid in the kernel (lock hand-offs, futex waits, wake-ups, polling, yields), and
neither clock nor instruction count shows it well: measured here, four threads adding an
``os.sched_yield()`` per iteration moved instructions +0.7% and wall time +70%, but syscalls
+233% and context switches x70; on single-threaded models syscalls per hop repeat exactly.

Sources, per figure, best first:

* ``perf_event_open`` (Linux; through ctypes, no binding needed): the software events
  (context switches, CPU migrations, minor and major page faults) and the
  ``raw_syscalls:sys_enter`` tracepoint, counted for this process with ``inherit``, so the
  threads and child processes a round starts are counted too (when they end within it);
* ``getrusage`` (this process and its waited-for children): context switches, page faults,
  user and system CPU time. Syscalls and migrations have no such source: without perf they
  are "not measured" (``None``), never 0.

Many CI runners forbid perf_event_open (``kernel.perf_event_paranoid`` 3, seccomp in
containers); each event that cannot be opened falls back, and ``source`` says which source
each figure came from. ``child_env.NO_PERF`` set to 1 makes it behave as on such a runner.

A round's figure is the difference of two readings; the readings' own cost (a ``read`` per
counter, themselves syscalls) is measured once on an empty stretch and subtracted.
"""

import ctypes
import os
import platform
import resource
import struct

from ..backends import child_env

NO_PERF_ENV = child_env.NO_PERF

#: figure -> (perf type, perf config); type 1 = software event, 2 = tracepoint (config: its id)
_SOFTWARE = {"csw": 3, "migrations": 4, "minflt": 5, "majflt": 6}
#: figures from getrusage, the fallback (and the only source of CPU time, and of which switches
#: were voluntary: a task that waited, the code's own; involuntary ones are preemptions, which
#: follow the other processes' load)
_RUSAGE = {
    "csw": ("ru_nvcsw", "ru_nivcsw"),
    "vcsw": ("ru_nvcsw",),
    "icsw": ("ru_nivcsw",),
    "minflt": ("ru_minflt",),
    "majflt": ("ru_majflt",),
    "user_s": ("ru_utime",),
    "sys_s": ("ru_stime",),
}
FIGURES = ("syscalls", "csw", "vcsw", "icsw", "migrations", "minflt", "majflt", "user_s", "sys_s")

_SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "arm64": 241}
_TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: the fields up to config1, all a counter needs
_INHERIT = 1 << 1
_EXCLUDE_HV = 1 << 6
_FD_CLOEXEC = 8


def _syscall_id() -> int | None:
    for root in _TRACEFS:
        try:
            with open(f"{root}/events/raw_syscalls/sys_enter/id", encoding="ascii") as fh:
                return int(fh.read())
        except (OSError, ValueError):
            continue
    return None


def _open(kind: int, event: int) -> int:
    """A counter of this process (and what it starts) for one event; OSError when refused."""
    nr = _SYSCALL_NR.get(platform.machine())
    if nr is None:
        raise OSError(f"perf_event_open: no syscall number known for {platform.machine()}")
    attr = ctypes.create_string_buffer(
        struct.pack(
            "<IIQQQQQIIQ", kind, _ATTR_SIZE, event, 0, 0, 0, _INHERIT | _EXCLUDE_HV, 0, 0, 0
        ),
        _ATTR_SIZE,
    )
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(nr, attr, 0, -1, -1, _FD_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


class Counters:
    """Open counters for the figures; ``read()`` gives their totals so far (``None``: not measured).

    Use as a context manager (the counters' fds are closed on exit). Open it before the
    tasks it should count are started: a thread that already runs is not inherited.
    """

    def __init__(self):
        self._fds: dict[str, int] = {}
        self.source: dict[str, str] = {}
        self.why_not: str = ""
        self._overhead: dict[str, float] = {}
        if child_env.get(NO_PERF_ENV):
            self.why_not = f"perf_event_open not used ({NO_PERF_ENV} is set)"
        elif not hasattr(os, "sched_getaffinity") or platform.system() != "Linux":
            self.why_not = f"perf_event_open is Linux's; this is {platform.system()}"
        else:
            self._open_perf()
        for name in FIGURES:
            if name not in self.source:
                self.source[name] = "getrusage" if name in _RUSAGE else "not measured"
        self._overhead = self._measure_overhead()

    def _open_perf(self) -> None:
        events = dict((name, (1, config)) for name, config in _SOFTWARE.items())
        tracepoint = _syscall_id()
        if tracepoint is not None:
            events["syscalls"] = (2, tracepoint)
        refused = []
        for name, (kind, config) in events.items():
            try:
                self._fds[name] = _open(kind, config)
                self.source[name] = "perf_event_open"
            except OSError as exc:
                refused.append(f"{name}: {exc.strerror or exc}")
        if tracepoint is None:
            refused.append("syscalls: the raw_syscalls tracepoint is not readable (tracefs)")
        self.why_not = "; ".join(refused)

    def read(self) -> dict:
        usage = [
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        ]
        out: dict = {}
        for name in FIGURES:
            fd = self._fds.get(name)
            if fd is not None:
                out[name] = struct.unpack("<Q", os.read(fd, 8))[0]
            elif name in _RUSAGE:
                out[name] = sum(getattr(u, field) for u in usage for field in _RUSAGE[name])
            else:
                out[name] = None
        return out

    def between(self, before: dict, after: dict) -> dict:
        """What happened between two readings, less the readings' own cost."""
        return {
            name: None
            if before[name] is None
            else max(0, after[name] - before[name] - self._overhead.get(name, 0))
            for name in FIGURES
        }

    def set_aside(self, before: dict, paused: dict, resumed: dict) -> dict:
        """``before`` moved on by what happened between ``paused`` and ``resumed``, the readings'
        own cost included: a stretch left out of what ``between(before, ...)`` will say."""
        return {
            name: None
            if value is None
            else value + resumed[name] - paused[name] + self._overhead.get(name, 0)
            for name, value in before.items()
        }

    def _measure_overhead(self) -> dict:
        pairs: list[dict[str, int]] = []
        for _ in range(5):
            before = self.read()
            pairs.append({k: v - before[k] for k, v in self.read().items() if v is not None})
        return {
            name: min(p[name] for p in pairs)
            for name in ("syscalls", "csw", "vcsw")
            if name in pairs[0]
        }

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> "Counters":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def per_op(rounds: list[dict], ops: int, source: dict, why_not: str) -> dict:
    """The record's kernel keys (see records.py) from each round's figures and its op count."""
    out: dict = {"kernel_source": {k: v for k, v in source.items()}, "kernel_rounds": {}}
    if why_not:
        out["kernel_note"] = why_not
    for name in FIGURES:
        values = [r[name] for r in rounds]
        if any(v is None for v in values):
            continue
        out["kernel_rounds"][name] = values
        ordered = sorted(v / ops for v in values)
        mid = len(ordered) // 2
        out[f"{name}_per_op"] = (
            ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        )
    return out


#: Why a user's plain test has no kernel figures in a counted run: it runs in the session's own
#: process under valgrind, and the pass outside it (passes.py) did not measure it (workload
#: cases get theirs from untimed rounds outside valgrind).
UNDER_VALGRIND = (
    "a plain test counted under valgrind has none of its own, as valgrind runs its threads one at a "
    "time and makes syscalls of its own, and the pass at full speed before the session measured "
    "none for it; run it with --concurrency-measure=time for them"
)


def keys_of(extra: dict) -> dict:
    """The kernel keys of a record's ``extra`` (what ``per_op`` or ``not_measured`` gave it)."""
    names = {
        "kernel_source",
        "kernel_rounds",
        "kernel_note",
        "kernel_round_ops",
        *(f"{name}_per_op" for name in FIGURES),
    }
    return {k: v for k, v in extra.items() if k in names}


def not_measured(why: str) -> dict:
    """The record's kernel keys when no figure could be measured: each reads "not measured", with why."""
    return {
        "kernel_source": {name: "not measured" for name in FIGURES},
        "kernel_rounds": {},
        "kernel_note": why,
    }
