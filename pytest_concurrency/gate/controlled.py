"""Time judged as multiples of the controls timed beside each round (measure/control.py).

A benchmark whose rounds, in the baseline's sessions and now, all carry their controls, and
follow them (their thread did not wait, their process ran on one core: ``control.scales``), is
judged on its rounds divided by their controls: the machine's speed, which moves every round and
its controls alike, divides out. The divided
rounds are expressed in seconds at the baseline's typical control (``scale``), so every figure
the gate shows stays a time, "as the baseline's machine would have run them".
"""

import dataclasses
import statistics
from dataclasses import dataclass

from ..measure import control
from ..measure.records import Record
from ..store.history import BaselineSession
from . import sessions as session_quality


@dataclass
class Divided:
    sessions: list  # the baseline's sessions, each round over its control, at ``scale``
    current: Record  # this run's record, likewise
    #: this run's typical control over the baseline's (1.25: the machine ran 25% slower now)
    machine_speed: float


def divide(sessions: list[BaselineSession], cur: Record) -> Divided | str:
    """Both sides divided by their controls, or why they cannot be (judged raw then)."""
    why = _unusable(cur.extra, len(cur.samples), "now")
    for i, s in enumerate(sessions):
        why = why or _unusable(
            s.controls, len(s.samples), f"in {session_quality.named(sessions, i)}"
        )
    if why:
        return why
    scale = statistics.median(s.controls["control_s"] for s in sessions)
    now = cur.extra["control_s"]
    return Divided(
        [
            dataclasses.replace(s, samples=_divided(s.samples, s.controls, scale), layouts=[])
            for s in sessions
        ],
        dataclasses.replace(cur, samples=_divided(cur.samples, cur.extra, scale)),
        now / scale,
    )


def _divided(samples: list, controls, scale: float) -> list[float]:
    return control.divided(samples, controls["control_factor"], scale)


def _unusable(extra, rounds: int, where: str) -> str | None:
    why = control.scales(extra)
    if why is None and len(extra["control_factor"]) != rounds:
        why = f"its controls ({len(extra['control_factor'])}) are not one a round ({rounds})"
    return f"{why} ({where})" if why else None


def disagree(raw_change: float, divided_change: float, speed: float, threshold: float) -> str:
    """A change over the controls that raw time does not show the same way, said (or ``""``).

    Neither reading can be trusted then: when this machine changes speed state, its small,
    cache-resident control speeds up or slows down more than code that allocates or misses the
    cache, so dividing by it over-corrects. Unchanged code read so, on real suites here: yarl
    +7% to +18% over its controls with the machine 1.2-1.6x faster than at the baseline (raw -3%
    to -17%), zeroconf +10.1% (raw -36.2%) and +8.7% (raw +3.5%) (docs/gates/time.md)."""
    if abs(divided_change) <= threshold:
        return ""
    beyond = raw_change > threshold if divided_change > 0 else raw_change < -threshold
    if beyond:
        return ""
    return (
        f"over its controls {divided_change:+.1%} but raw {raw_change:+.1%}: the controls ran "
        f"{speed:.2f}x the baseline's CPU time, and a change the two readings do not agree on may "
        f"be the machine's speed state (its control and this code follow it unequally)"
    )


def the_machines(raw_change: float, divided_change: float, speed: float, threshold: float) -> str:
    """A raw change beyond the threshold that the controls took away, said (or ``""``): the
    machine's speed or a neighbour moved the rounds' time, not the code."""
    if abs(raw_change) <= threshold or abs(divided_change) > threshold:
        return ""
    return (
        f"raw {raw_change:+.1%} was the machine's: its rounds' CPU time over their controls' moved "
        f"{divided_change:+.1%} (the controls ran {speed:.2f}x the baseline's CPU time)"
    )
