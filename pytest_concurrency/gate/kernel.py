"""The kernel gate: each record's kernel figures per op (measure/kernel.py) against the baseline's.

Each figure has its own rule in ``FIGURES``: a relative threshold, an absolute floor per op
below which a change never counts, and how far the rounds' own spread may widen the threshold.
Syscalls per op repeat exactly on single-threaded models (+1.000 per hop, 3 runs of 3 here), so
their threshold is tight; context switches and system CPU time on threads and processes move
with the scheduler (a threading ping-pong: switches 10.4k-11.5k in three runs), so theirs is
wide, and widens further to ``SPREAD_K`` times the rounds' relative median absolute deviation
(either side's) where those are noisier than it. Migrations and major faults are shown, not
judged: they follow the machine, not the code. So do involuntary context switches (preemptions:
a counted A/A at load 6 read a plain test's switches 14 -> 25 per op), so the switches judged are
the voluntary ones (a task that waited: the code's own); all switches and the involuntary ones are
shown.

A figure either side did not measure (no perf_event_open there, or no kernel figures at all,
as under valgrind) reads "not measured", with the reason: never unchanged, never passed.
"""

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..measure.records import Record
from ..store.history import Baseline
from .verdicts import (
    IMPROVED,
    INCONCLUSIVE,
    NEW,
    NOT_MEASURED,
    REGRESSED,
    UNCHANGED,
    KernelResult,
    KernelVerdict,
    share,
)

#: How many times the rounds' relative MAD the threshold widens to, where they are that noisy.
SPREAD_K = 3.0


@dataclass(frozen=True)
class Figure:
    name: str  # measure.kernel's figure: the record keeps ``<name>_per_op`` and its rounds
    what: str  # how a verdict names it
    threshold: float  # the relative change that counts
    floor: float  # the smallest change per op that counts
    gated: bool = True
    scheduled: bool = False  # on threads and processes it follows the scheduler: load moves it
    round_floor: float = 0.0  # the smallest change per round that counts (a source's resolution)
    wider: tuple = ()  # (task kind, threshold) where the scheduler makes the figure move more
    #: (task kind, threshold) against the base side in the same run (``paired``): the rounds take
    #: turns, so what two sessions at different times differ by on threads is gone (a threaded ring's
    #: syscalls per op -0.7% to +3.4% in 50 A/A sessions, where two stored sessions moved up to 30%;
    #: a sched_yield per hop +34% to +41%, polling +5% to +18%: evidence/kernel_plain_evidence.py
    #: --against, docs/gates/kernel.md); processes were not measured that way, so they keep ``wider``
    wider_paired: tuple = ()

    def threshold_for(self, task_kind: str | None, paired: bool = False) -> float:
        return dict(self.wider_paired if paired else self.wider).get(task_kind, self.threshold)

    @property
    def key(self) -> str:
        return f"{self.name}_per_op"


#: Thresholds from repeatability measured here. Light models' syscalls per hop gave no verdict in 50
#: of 50 A/A pairs (evidence/kernel_evidence.py). Threading's ring, 40 A/A pairs in one process: syscalls
#: per hop moved up to 11.3% (median 3.3%), switches up to 20.7% (median 6.5%); a user's plain threading
#: ring in separate sessions (evidence/kernel_plain_evidence.py, 50 A/A pairs on a quiet machine): up to
#: 30.5% (median 11.9%) and 65% (median 15.7%): two processes of the same code do not schedule their
#: threads alike. An A/A of the smoke suite (292 verdicts): multiprocessing's switches per op moved 34%,
#: threading's IO minor faults 33%.
THREAD, PROCESS = "thread", "process"
#: Task kinds whose scheduled figures a busier machine moves (``judge``): threads and processes,
#: and a suite's own benchmark that names no model (no task kind), which may run threads of its
#: own: FastAPI's test client waits on anyio's worker thread, and an unchanged one read 29 -> 46
#: voluntary switches an op beside busy loops that left it less than one free core.
LOAD_MOVES = (THREAD, PROCESS, None)
FIGURES = (
    # a thread preempted while it holds the GIL makes the others wait and time out: more syscalls
    # and switches on a busier machine (threading nap, two busy-loop processes: syscalls/op +16%).
    # A few a round are no change whatever the op count: a user's plain test (one op a round) read
    # gevent's 24 syscalls a round +-2 and asyncio's 1 switch a round 2 (preempted) in A/A sessions.
    Figure(
        "syscalls",
        "syscalls/op",
        0.05,
        0.05,
        scheduled=True,
        round_floor=8,
        wider=((THREAD, 0.40), (PROCESS, 0.40)),
        wider_paired=((THREAD, 0.08), (PROCESS, 0.40)),
    ),
    # voluntary: a wait (a lock, a queue, a poll); on threads a busier machine makes waits longer
    # and more (scheduled), on any model it preempts more: involuntary switches, shown, not judged
    Figure(
        "vcsw",
        "voluntary context switches/op",
        0.25,
        0.05,
        scheduled=True,
        round_floor=8,
        wider=((THREAD, 0.80), (PROCESS, 0.80)),
        wider_paired=((PROCESS, 0.80),),
    ),
    Figure("csw", "context switches/op", 0.0, 0.0, gated=False),
    Figure("icsw", "involuntary context switches/op", 0.0, 0.0, gated=False),
    # getrusage's system time moves in scheduler ticks (4 ms at 250 Hz): a short round reads 0 or
    # one tick, so a change must add up to more than two ticks a round to count
    Figure("sys_s", "system CPU/op", 0.30, 0.0, scheduled=True, round_floor=0.010),
    # first touches of pages: 64 a round (256 KiB) before a change counts
    Figure(
        "minflt",
        "minor page faults/op",
        0.25,
        0.05,
        round_floor=64,
        wider=((THREAD, 0.60), (PROCESS, 0.60)),
        wider_paired=((PROCESS, 0.60),),
    ),
    Figure("migrations", "CPU migrations/op", 0.0, 0.0, gated=False),
    Figure("majflt", "major page faults/op", 0.0, 0.0, gated=False),
)


def judge(
    baseline: Baseline, current: Iterable[Record], busier: Mapping | None = None
) -> KernelResult:
    """Kernel verdicts for every record the baseline also has.

    ``busier`` maps a record's key to why the machine was busier than for its baseline
    (gate.compare decides it, as for time): there a rise in a figure the scheduler moves, on
    threads, processes or a test that names no model (``LOAD_MOVES``), is inconclusive, not a
    regression. Preemptions (a plain asyncio test read 2 and then 19 switches a round with the
    machine overloaded) are never judged: see ``FIGURES``.
    """
    busier = busier or {}
    base = baseline.latest
    verdicts = []
    loose = 0
    unmeasured: dict = {}  # why -> (the figures, the benchmarks): one line per reason in the report
    for rec in current:
        then = base.get(rec.key)
        if then is None or not _has_kernel(rec.extra) and not _has_kernel(then.extra):
            continue  # a benchmark new to the baseline (the time gate says so), or no figures either side
        loose += rec.extra.get("task_kind") == THREAD
        earlier = baseline.sessions.get(rec.key, [])[1:]
        for figure in FIGURES:
            if figure.gated:
                kept = [_value(s.kernel, figure.key) for s in earlier]
                verdict = _judge(figure, then, rec, [v for v in kept if v is not None])
                if (
                    verdict.status == REGRESSED
                    and rec.key in busier
                    and figure.scheduled
                    and rec.extra.get("task_kind") in LOAD_MOVES
                ):
                    verdict.status, verdict.note = INCONCLUSIVE, busier[rec.key]
                verdicts.append(verdict)
                if verdict.status == NOT_MEASURED:
                    figures, keys = unmeasured.setdefault(verdict.note, ([], set()))
                    figures += [figure.what] if figure.what not in figures else []
                    keys.add(rec.key)
    order = {REGRESSED: 0, IMPROVED: 1, INCONCLUSIVE: 2, NOT_MEASURED: 3, NEW: 4, UNCHANGED: 5}
    verdicts.sort(key=lambda v: (order[v.status], v.key, v.figure))
    return KernelResult(
        verdicts,
        sorted(
            f"{', '.join(figures)} {why}: {len(keys)} benchmark{'s' * (len(keys) != 1)}"
            for why, (figures, keys) in unmeasured.items()
        ),
        loose,
    )


def _judge(figure: Figure, then: Record, now: Record, earlier: list[float]) -> KernelVerdict:
    """``earlier``: the figure in the baseline's earlier sessions, which ``_span`` judges beyond."""
    before, after = _value(then.extra, figure.key), _value(now.extra, figure.key)
    if before is None or after is None:
        # this run first: what the user can act on (both sides often lack it for the same reason)
        side = "this run" if after is None else "the baseline"
        why = (now if after is None else then).extra.get("kernel_note")
        return KernelVerdict(
            now.key,
            figure.name,
            NOT_MEASURED,
            before,
            after,
            note=f"not measured in {side}" + (f" ({why})" if why else ""),
        )
    threshold = max(
        figure.threshold_for(now.extra.get("task_kind")),
        SPREAD_K * max(_spread(then, figure), _spread(now, figure)),
    )
    before, spanned = _span(figure, before, after, earlier)
    change = after / before - 1 if before > 0 else None
    status = UNCHANGED
    if (
        not spanned.startswith(WITHIN)
        and abs(after - before) > figure.floor
        and abs(after - before) * now.kernel_round_ops > figure.round_floor
    ):
        if change is None:  # from none at all: any change beyond the floor counts
            status = REGRESSED
        elif abs(change) > threshold:
            status = REGRESSED if change > 0 else IMPROVED
    return KernelVerdict(
        now.key, figure.name, status, before, after, change, threshold, note=spanned
    )


def _span(figure: Figure, latest: float, now: float, earlier: list[float]) -> tuple[float, str]:
    """What ``now`` is judged against, and why, when not the latest session: the nearer end of
    the span of the baseline's sessions. A figure moves between processes of the same code as
    a session's rounds do not show: multidict's two insert benchmarks, a sleep(0) a call each,
    read 52.5 and 57.6 ms of system CPU an op in a save, 72-86 ms in unchanged A/As."""
    values = [latest, *earlier]
    low, high = min(values), max(values)
    if low == high:
        return latest, ""
    read = f"the baseline's {len(values)} sessions read {amount(figure.name, low)} to " + (
        amount(figure.name, high)
    )
    if low <= now <= high:
        return latest, f"{WITHIN} {read}"
    return (high if now > high else low), f"beyond what {read}"


WITHIN = "within what"


def lesser(a: Mapping, b: Mapping) -> dict:
    """Each judged figure per op, the lesser of two sessions' (a suspect's two: the session's and
    the fresh process's). What a neighbour, a process's heap or its threads' scheduling add to a
    figure comes and goes between processes: an unchanged aiohttp client test read 0 minor page
    faults an op in one process and 77 in another, with the machine busy. A rise of the code's
    own shows in both."""
    out = {}
    for figure in FIGURES:
        x, y = _value(a, figure.key), _value(b, figure.key)
        if figure.gated and x is not None and y is not None:
            out[figure.key] = min(x, y)
    return out


def _spread(rec: Record, figure: Figure) -> float:
    """The rounds' relative median absolute deviation for the figure (0 when it cannot tell)."""
    rounds = (rec.extra.get("kernel_rounds") or {}).get(figure.name) or []
    if len(rounds) < 2:  # two rounds (a call of seconds has two) spread by half their difference
        return 0.0
    mid = statistics.median(rounds)
    return statistics.median(abs(x - mid) for x in rounds) / mid if mid > 0 else 0.0


def _has_kernel(extra: Mapping) -> bool:
    return "kernel_source" in extra


def _value(extra: Mapping, key: str) -> float | None:
    value = extra.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def find(name: str) -> Figure:
    return next(f for f in FIGURES if f.name == name)


def amount(name: str, value: float | None) -> str:
    if value is None:
        return "?"
    if name.endswith("_s"):
        for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
            if value >= scale:
                return f"{value / scale:.3g} {unit}"
        return f"{value / 1e-9:.3g} ns"
    return f"{value:.3g}"


def line(v: KernelVerdict) -> str:
    """``ring[...] on threading: 0.896 -> 2.99 syscalls/op (+233%, threshold 5%)``."""
    from ..measure.records import key_label

    what = find(v.figure).what
    if v.status == NOT_MEASURED:
        return f"{key_label(v.key)}: {what} {v.note}"
    change = f"+{amount(v.figure, v.current)} from none" if v.change is None else f"{v.change:+.0%}"
    return (
        f"{key_label(v.key)}: {amount(v.figure, v.baseline)} -> {amount(v.figure, v.current)} {what} "
        f"({change}, threshold {share(v.threshold)})" + (f" ({v.note})" if v.note else "")
    )


def loose_note(result: KernelResult) -> str | None:
    """What a stored baseline cannot see on threads, and what can: said whenever threads were judged."""
    if not result.loose:
        return None
    held = [
        (f.what, f.threshold_for(THREAD), f.threshold_for(THREAD, paired=True))
        for f in FIGURES
        if f.gated and f.threshold_for(THREAD) > f.threshold_for(THREAD, paired=True)
    ]
    return (
        f"on threads a stored baseline holds {', '.join(f'{what} to {wide:.0%}' for what, wide, _ in held)} (two "
        "sessions of the same threaded code differ by up to 30%); --concurrency-against judges them against the "
        f"base in the same run, at {', '.join(f'{tight:.0%}' for _, _, tight in held)}: "
        f"{result.loose} benchmark{'s' * (result.loose != 1)}"
    )


def summary(result: KernelResult) -> str:
    """``kernel passed: 120 unchanged, 3 not measured``."""
    counts = [
        f"{len(result.by_status(s))} {s}"
        for s in (REGRESSED, IMPROVED, INCONCLUSIVE, NOT_MEASURED, UNCHANGED)
        if result.by_status(s)
    ]
    return f"kernel {'FAILED' if result.failed else 'passed'}: {', '.join(counts) or 'nothing to judge'}"
