"""Why a verdict cannot stand: the machine, not the code, moved.

Other processes' load (read during each benchmark, measure/usage.py) and the machine's own
speed within the session (the calibration loop at its start and end) explain some changes;
gate.compare makes those inconclusive (and re-measures them), and the kernel gate does the
same for figures the scheduler moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..measure.records import Record
from .stats import Comparison
from .verdicts import IMPROVED, REGRESSED

#: Other processes' load (in CPU cores) that makes a change unjudgeable once it rose by more
#: than this since the baseline: for thread and process models always (they need free cores),
#: for the others when it leaves this process less than one free core plus this margin. With a
#: busy loop on the second of 2 cores (evidence/gate_evidence.py), ring on threading ran 31-56%
#: slower, and in fresh processes asyncio and greenlet sessions up to 31% slower, reproducibly
#: within the session. Quiet sessions here read 0.00-0.3 cores, a hog 1.0.
LOAD_MARGIN = 0.3
_NEEDS_FREE_CORES = ("thread", "process")  # task kinds the OS must find a free core for


def busier(base_sessions: Mapping, current: Iterable[Record], cur_meta: Mapping) -> dict:
    """key -> why the machine was busier for it than for its baseline, as the time verdicts judge it."""
    cpus = cur_meta.get("cpu_count") or 1
    out = {}
    for rec in current:
        why = rec.key in base_sessions and load_change(base_sessions[rec.key], rec, REGRESSED, cpus)
        if why:
            out[rec.key] = why
    return out


def load_change(sessions: list, cur: Record, status: str, cpus: int) -> str | None:
    """Why a verdict cannot stand: other processes' load moved enough to explain it."""
    now = cur.extra.get("foreign_cpu")
    if status not in (REGRESSED, IMPROVED) or now is None:
        return None
    then = [s.foreign_cpu for s in sessions if s.foreign_cpu is not None] or [0.0]
    slower = status == REGRESSED
    busy, quiet = (now, max(then)) if slower else (min(then), now)
    kind = cur.extra.get("task_kind", "light")
    starved = no_free_core(busy, cpus)
    if slower and starved:
        # however busy the baseline's machine was: without a core of its own, a process runs as
        # fast as the scheduler's placement lets it (yarl's unchanged benchmarks beside two busy
        # loops: 1x or 2x a call, process by process, the same in the re-measure)
        return (
            f"other processes kept {now:.2f} CPU cores busy during this benchmark, which left "
            f"this process less than one free core of {cpus}: its speed then depends on where "
            f"the scheduler put it, so this change cannot be told from the load; count "
            f"instructions (--concurrency-measure=instructions), or run on a quieter machine"
        )
    if busy - quiet <= LOAD_MARGIN or not (starved or kind in _NEEDS_FREE_CORES):
        return None
    why = (
        f"{kind}s need free cores"
        if kind in _NEEDS_FREE_CORES
        else f"that left this process less than one free core of {cpus}"
    )
    return (
        f"the machine was {'busier' if slower else 'quieter'} than for the baseline: other processes "
        f"kept {now:.2f} CPU cores busy during this benchmark ({quiet if slower else busy:.2f} then), "
        f"and {why}, so this change cannot be told from the load; re-run on a quieter machine, or "
        f"record the baseline under the same load"
    )


def no_free_core(busy: float, cpus: int) -> bool:
    """Other processes kept so many cores busy that this process had not even one of its own."""
    return cpus - busy < 1 + LOAD_MARGIN


def beside_the_other_side(pairs: Iterable[tuple[Record, Record]], cpus: int) -> str | None:
    """Why a change against the base cannot stand: in a pair of sessions that measured it, other
    processes than the two sides left a side less than one free core. Each side's
    ``foreign_cpu`` holds the other side's share of the test's wall time (the sides take turns),
    so that side's ``own_cpu`` is taken off it. The turns cancel a load that weighs on both sides
    alike, not one that leaves no core: beside one busy loop on 2 cores an unchanged test here read
    +10.3% and +13.4% in two pairs of sessions (gevent), +15% to +18% (threading)."""
    busiest = None
    for base, head in pairs:
        for side, other in ((base, head), (head, base)):
            foreign, twin = side.extra.get("foreign_cpu"), other.extra.get("own_cpu")
            if foreign is None or twin is None:
                continue
            others = max(0.0, foreign - twin)
            busiest = others if busiest is None else max(busiest, others)
    if busiest is None or not no_free_core(busiest, cpus):
        return None
    return (
        f"other processes kept {busiest:.2f} CPU cores busy beside a side's rounds, which left it "
        f"less than one free core of {cpus}: each side's speed then depends on where the scheduler "
        f"put it, more than taking turns cancels, so this change cannot be told from the load; "
        f"count instructions (--concurrency-measure=instructions), or run on a quieter machine"
    )


def speed_swing(cur_meta: Mapping, c: Comparison, tolerance: float) -> str | None:
    """Why a verdict cannot stand: the machine's own speed moved more than the change within
    this session (its calibration at start and end disagree), so the change may be the machine's.
    A swing within ``tolerance`` (--concurrency-machine-tolerance) counts as the same speed."""
    swing = (cur_meta.get("calibration") or {}).get("swing")
    if (
        c.status not in (REGRESSED, IMPROVED)
        or swing is None
        or swing <= tolerance
        or abs(c.change) > swing
    ):
        return None
    return (
        f"this machine's own speed moved {swing:.0%} within the session (the calibration loop at its "
        f"start and end), more than this {c.change:+.1%}: on a machine this unsteady the run cannot "
        f"judge a change this small; count instructions (--concurrency-measure=instructions) instead"
    )
