"""A control timed beside the rounds: the machine's speed, read where and when the rounds ran.

This machine's CPU (and a cloud runner's) changes speed by up to 1.8x for seconds at a time, and a
process can share its core with another for a whole session: no rule that reads a round's time
alone tells a +10% change from that. A fixed piece of work run right before and right after a
round, in the same thread, runs at the round's speed. So each timed round carries a factor from
the controls around it (``control_factor``, one a sample), and the gates judge rounds divided by
their controls: the machine's speed divides out, as the ratio of two pieces of work run back to
back does not move with it (relative or normalised benchmarking; duet benchmarking and randomized
multiple interleaved trials are its cousins).

Controls are shared between neighbours (one after a group of rounds is the next group's before),
and short rounds are grouped, so that the controls cost at most ``MAX_COST`` of the rounds' time.
A round is judged as its CPU time over the controls' around it (``Bracket`` says why CPU time).

The control is one thread's work. Rounds of one thread's work scale with it; rounds whose thread
waits (timers, sockets served elsewhere, other threads or processes doing the work) or whose
process runs on several cores at once do not, and are judged on raw time (``scales``).
"""

import bisect
import contextlib
import gc
import resource
import select
import statistics
import time
import zlib

from .. import benchmark_adapter as adapter

VERSION = 3  # bump when ``work`` or the figures change: controls of other versions do not compare
#: The controls' time is at most this share of the rounds' (rounds are grouped to keep it so).
MAX_COST = 0.10
_TEXT = bytes(range(256)) * 32
#: A record's keys from its controls (``Bracket.figures``).
KEYS = (
    "control_factor",
    "control_s",
    "control_busy",
    "control_waits",
    "control_version",
    "control_cost",
)
#: What the gate reads of them (a baseline's sessions keep these).
JUDGED = KEYS[:5]
#: Significant digits a round's factor is kept to: a 0.001% step, the file a third the size.
DIGITS = 5
#: Voluntary switches of this thread alone (Linux); elsewhere the process's.
_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


class _Node:
    __slots__ = ("value", "next")

    def __init__(self, value, nxt):
        self.value = value
        self.next = nxt


def work() -> int:
    """The control: ~300 us here of what rounds do, in the proportions that followed three kinds
    of round best in a trial here (pure arithmetic, dicts of strings, an asyncio loop's hops):
    bytecode arithmetic, allocation and links, sorting and joining strings, a checksum of fixed
    bytes, and a few system calls (``select`` with nothing to wait for)."""
    total = 0
    for i in range(1200):
        total = (total * 31 + i) & 0xFFFF
        if total & 1:
            total ^= i
    head, seen = None, {}
    for i in range(300):
        head = _Node(i, head if i % 32 else None)
        total += head.value & 7
        seen[i & 63] = total
    words = sorted(str(i * 7919 % 1000) for i in range(100))
    total += len(",".join(words)) + zlib.crc32(_TEXT)
    for _ in range(8):
        total += len(select.select([], [], [], 0)[0])
    return total


EXPECTED = work()  # the control checks its own result each time: a wrong one is not a control


_now = time.perf_counter  # (a test's clock replaces it)


def _reading() -> tuple[float, float, int]:
    """(wall, the process's CPU seconds, this thread's voluntary context switches so far)."""
    return _now(), time.process_time(), resource.getrusage(_THREAD).ru_nvcsw


@contextlib.contextmanager
def _no_collection():
    """The garbage collector held off during a control: a collection of the whole heap that a
    control's allocations happen to trigger is the test's heap's cost, not the machine's speed."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run_once() -> None:
    """One control, checked: a wrong result means it did not do its work."""
    got = work()
    if got != EXPECTED:
        raise RuntimeError(f"the control computed {got}, not {EXPECTED}: the interpreter is broken")


class Bracket:
    """Controls around a sequence of rounds, one thread's: ``before`` ahead of each round,
    ``after`` once it ended with its wall seconds.

    Each round is judged as its CPU time over the CPU time of the controls within ``WINDOW_S`` of
    it. CPU time, not wall: a neighbour sharing the core, or a host descheduling the virtual CPU,
    takes whole slices, which stretch a round's wall time and not its CPU time, and which a
    control, shorter than a slice, mostly misses. What remains is the CPU's own speed, which the
    controls divide out (how far apart processes read by each: evidence/control_estimators.py,
    docs/gates/time.md).

    Nothing is read around a round itself: a reading costs system calls (13 us here, 80 us more
    with a suite's kernel figures set aside around it), more than a round of a small function.
    The readings at the controls close a group, the rounds since the last control: its
    process's CPU seconds over its wall seconds (its share of a core) and this thread's voluntary
    context switches (it waited: a lock, a socket, a timer, another thread's work). A round of
    ``SLICE_S`` or more is stretched by every slice a neighbour takes: its CPU time is its wall
    time times its group's share (such a round is most of its group). A shorter one mostly runs
    between two slices, and its wall time is its CPU time; a neighbour's slice makes an outlier,
    never the median. The shares say whether the process ran on several cores (``scales``). A
    control runs once the rounds since the last one took ``1 / MAX_COST`` of the controls' time
    so far, whatever each round took (a first round slowed by a neighbour sizes nothing).
    ``aside``: a context each control runs in (kernel figures read over several rounds leave it
    out)."""

    WINDOW_S = 0.05
    SLICE_S = 0.002  # about a scheduler's slice when a neighbour shares the core

    def __init__(self, aside=contextlib.nullcontext) -> None:
        self._aside = aside
        self.controls: list[float] = []  # each control's CPU seconds, in order
        self._control_wall = 0.0  # the controls' wall seconds, with their aside
        self._at: list[float] = []  # when each control ended (perf_counter)
        self._rounds_at: list[float] = []  # when each round started
        self._busy: list[float] = []  # each round's CPU time over its wall time
        self._shares: list[float] = []  # each round's group's process CPU over its wall seconds
        self._waits = 0.0  # this thread's voluntary switches in the closed groups
        self._waited = 0  # the rounds in the closed groups (a settled group's waits are unread)
        self._round_s = 0.0
        self._group: list[float] = []  # the wall seconds of the rounds since the last control
        self._last: tuple[float, float, int] | None = None  # the reading that ended it

    def _control(self) -> None:
        began = _now()
        with self._aside(), _no_collection():
            start = _reading()
            run_once()
            end = _reading()
            self._close_group(start)
        self.controls.append(end[1] - start[1])
        self._at.append(end[0])
        self._last = end
        self._control_wall += _now() - began

    def _close_group(self, now: tuple[float, float, int]) -> None:
        if self._group and self._last is not None:
            wall, cpu, waits = (b - a for a, b in zip(self._last, now))
            self._take(cpu / wall if wall > 0 else 1.0)
            self._waits += waits
            self._waited += len(self._group)
        self._group = []

    def _take(self, share: float) -> None:
        self._shares.extend([share] * len(self._group))
        self._busy.extend(share if s >= self.SLICE_S else 1.0 for s in self._group)

    def before(self) -> None:
        if not self.controls:
            self._control()
        self._rounds_at.append(_now())

    def after(self, round_s: float) -> None:
        self._round_s += max(round_s, 0.0)
        self._group.append(round_s)
        if self._control_wall <= MAX_COST * self._round_s:
            self._control()

    def _settle(self) -> None:
        """The rounds since the last control take the last group's figures: what ran after them
        (the fixture's statistics, the test's own code) is not theirs. With no group closed (all
        the rounds took less than a control's worth), they are read now."""
        if not self._group:
            return
        if self._shares:
            self._take(self._shares[-1])
            self._group = []
        else:
            with self._aside():
                self._close_group(_reading())

    def normalisers(self, last: int) -> list[float]:
        """The last ``last`` rounds' normalisers: the median CPU seconds of the controls that ended
        within ``WINDOW_S`` of each one's start (the nearest ones, before and after, at least). The
        median: a control a host interrupted, or that waited for memory, is one of many."""
        out: list[float] = []
        window: tuple[int, int] | None = None
        for at in self._rounds_at[-last:] if last else ():
            nearest = bisect.bisect_left(self._at, at)  # the first control after the round began
            lo = min(bisect.bisect_left(self._at, at - self.WINDOW_S), max(nearest - 1, 0))
            hi = max(
                bisect.bisect_right(self._at, at + self.WINDOW_S), min(nearest + 1, len(self._at))
            )
            if (lo, hi) != window:  # a group's rounds share their window
                window, typical = (lo, hi), statistics.median(self.controls[lo:hi])
            out.append(typical)
        return out

    def figures(self, last: int) -> dict:
        """The record's keys for its last ``last`` rounds (the measured ones), or ``{}``: each
        round's factor (its CPU share over its controls' CPU seconds: a round's wall time by it is
        its CPU time in controls), the typical control's CPU seconds and CPU share, the waits."""
        self._settle()
        if not last or len(self._busy) < last:
            return {}
        busy, shares = self._busy[-last:], self._shares[-last:]
        return {
            "control_factor": [
                float(f"{b / c:.{DIGITS}g}") for b, c in zip(busy, self.normalisers(last))
            ],
            "control_s": statistics.median(self.controls),
            "control_busy": round(statistics.median(shares), 4),
            "control_waits": round(self._waits / self._waited, 3) if self._waited else None,
            "control_version": VERSION,
            "control_cost": round(self._control_wall / self._round_s, 4) if self._round_s else None,
        }


#: Voluntary switches a round from which its rounds count as waiting (``scales``): a round of
#: one thread's work makes none; one that blocks makes one each time it does.
WAITS = 0.5
#: Cores busy at once beyond which rounds run in parallel (``scales``).
PARALLEL = 1.2


def scales(extra) -> str | None:
    """Why a record's rounds cannot be judged over their controls, or ``None`` if they can."""
    if not extra.get("control_factor") or extra.get("control_version") != VERSION:
        return "no controls were timed beside its rounds"
    waits, busy = extra.get("control_waits"), extra.get("control_busy")
    if waits is None or busy is None or not extra.get("control_s"):
        return "what its process did beside the controls was not read"
    if waits > WAITS:
        return (
            f"its thread waited {waits:.1f} times a round (voluntary context switches: a lock, a "
            "socket, a timer, another thread): the time it waits does not scale with a control"
        )
    if busy > PARALLEL:
        return (
            f"its process used {busy:.1f} cores while its rounds ran: several cores at once, "
            "whose speeds a one-thread control does not follow"
        )
    return None


def divided(samples: list, factors: list, scale: float) -> list[float]:
    """Each round's CPU time over its controls' (its wall time by its factor), in seconds at a
    control of ``scale`` CPU seconds."""
    return [x * f * scale for x, f in zip(samples, factors)]


def beside(benchmark, aside=contextlib.nullcontext) -> Bracket:
    """Controls around each round pytest-benchmark's ``benchmark`` fixture runs once it made its
    stats (calibration before that is left alone; warm-up rounds after it are bracketed too, and
    ``figures`` takes the last rounds). Outside its timer: the samples are the rounds' own.
    ``aside``: a context the bracket's own work runs in (kernel figures read over several rounds
    leave it out)."""
    bracket = Bracket(aside)
    make_runner, make_stats = adapter.factories(benchmark)
    made = [False]

    def making_stats(iterations):
        made[0] = True
        return make_stats(iterations)

    def bracketing(function, args, kwargs):
        runner = make_runner(function, args, kwargs)

        def run(loops_range, *rest, **timer):
            if not made[0]:
                return runner(loops_range, *rest, **timer)
            bracket.before()
            got = runner(loops_range, *rest, **timer)
            bracket.after(got if loops_range else got[0])
            return got

        return run

    adapter.use_factories(benchmark, bracketing, making_stats)
    return bracket
