"""Why a verdict cannot stand: the machine, not the code, moved.

Other processes' load (read during each benchmark, measure/usage.py) and the machine's own
speed within the session (the calibration loop at its start and end) explain some changes;
gate.compare makes those inconclusive (and re-measures them), and the kernel gate does the
same for figures the scheduler moves.
"""

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


def leaves_no_core(foreign_cpu: float | None, cpus: int) -> bool:
    """Whether other processes' load left this process less than one free core (plus the margin)."""
    return foreign_cpu is not None and cpus - foreign_cpu < 1 + LOAD_MARGIN


def blind(current: Iterable[Record], cpus: int) -> dict:
    """key -> why time's reading of it tells nothing either way: other processes left its process
    less than one free core. A slowdown hides there as well as shows: beside busy loops at a load
    of 8, zeroconf's send made 10% slower (counted) read -0.6% over its controls, unchanged."""
    return {
        rec.key: (
            f"other processes kept {rec.extra['foreign_cpu']:.2f} CPU cores busy during this "
            f"benchmark, which left this process less than one free core of {cpus}"
        )
        for rec in current
        if leaves_no_core(rec.extra.get("foreign_cpu"), cpus)
    }


def load_change(sessions: list, cur: Record, status: str, cpus: int) -> str | None:
    """Why a verdict cannot stand: other processes' load moved enough to explain it."""
    now = cur.extra.get("foreign_cpu")
    if status not in (REGRESSED, IMPROVED) or now is None:
        return None
    then = [s.foreign_cpu for s in sessions if s.foreign_cpu is not None] or [0.0]
    slower = status == REGRESSED
    busy, quiet = (now, max(then)) if slower else (min(then), now)
    kind = cur.extra.get("task_kind", "light")
    starved = leaves_no_core(busy, cpus)
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
