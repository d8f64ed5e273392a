"""A workload case as it is measured: one frozen value, made in one place (``cases.plan``), taken
by every function that measures a case wherever it runs (here: ``driver``; in a worker:
``runner/isolate.py``; in a native program: ``native/``)."""

from dataclasses import dataclass
from typing import Any

from . import Instrument
from .records import label


@dataclass(frozen=True)
class CasePlan:
    model: str  # the backend spec it runs on ("multiprocessing[fork]")
    workload: Any  # the workload (workloads.get(ref)): its rounds run it
    params: dict
    rounds: int  # measured rounds (at most, with ``stop_width``)
    warmup: int  # rounds run first and dropped (an exact measure warms up until its count repeats)
    instrument: Instrument
    timeout: float | None = None  # the longest a round may take; None: unbounded
    #: the rounds stop once the median's interval is this narrow (stopping.py); None: all of them
    stop_width: float | None = None
    ref: str = ""  # what workloads.get resolves in a worker: a name or "module:OBJECT"

    @property
    def reference(self) -> str:
        return self.ref or self.workload.name

    @property
    def label(self) -> str:
        """How messages name it: ``ring[n=10] on gevent``."""
        return label(self.workload.name, self.params, self.model)
