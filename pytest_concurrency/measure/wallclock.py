"""The time instrument: wall-clock seconds per round, pytest-benchmark's own clock."""

import time

from . import Instrument

#: Practical threshold: the change a verdict needs before statistics are asked at all.
#: Below 10% on purpose: a real 10% slowdown is observed as 10% +- the run-to-run drift, so
#: a 10% threshold would catch it only half the time. It must sit ~1.65 sigma of that drift
#: below 10% (95% caught) and ~3.5 sigma above 0 (no false alarm among a run's dozens of
#: benchmarks): 7% meets both while the drift's sigma is <= ~1.8%, which quiet sessions of
#: ring on asyncio, uvloop and threading showed here. evidence/gate_evidence.py checks it.
DEFAULT_THRESHOLD = 0.07


class WallClock(Instrument):
    kind = "time"
    unit = "s"
    default_threshold = DEFAULT_THRESHOLD
    #: a day: the longest --concurrency-timeout (options.py), past which a round is stopped
    most_per_round = 86400.0

    def counter(self):
        return time.perf_counter

    def per_op(self, median: float, ops: int) -> dict:
        return {
            "ns_per_op": median / ops * 1e9,
            "ops_per_s": ops / median if median > 0 else float("inf"),
        }


WALLCLOCK = WallClock()
