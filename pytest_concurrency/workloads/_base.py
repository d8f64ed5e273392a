"""What the five workloads share: case tables, parameter checks, family dispatch, task limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import Outcome, WorkloadError, check_scale


class TableWorkload:
    """A workload whose cases and rounds are fixed tables per scale.

    Subclasses set ``name``, ``unit``, ``PARAMS`` (the parameter names), ``CASES`` (per
    scale) and may override ``ROUNDS``; they implement ``sync_main``/``async_main`` (run
    inside ``backend.run`` as ``main(backend, *params in PARAMS order)``) and
    ``check(params, result)`` (raise ``WorkloadError`` or return the ``Outcome``).
    """

    name = ""
    unit = ""
    PARAMS: tuple[str, ...] = ()
    CASES: dict[str, list[dict]] = {}
    # (rounds, warmup rounds): sized with CASES so that the whole suite, every workload on
    # every model, takes ~30 s at smoke and ~3 min at default on a 2-core machine. The gate
    # needs the rounds: Mann-Whitney cannot reach p < 0.01 below 5 a side, and catches a 10%
    # slowdown reliably only from ~15 (see gate.py). Seed scale reproduces, it does not gate.
    ROUNDS: dict[str, tuple[int, int]] = {"smoke": (5, 1), "default": (15, 1), "seed": (3, 1)}
    #: The memory pass reads a case's leaks in rounds of a lighter case (``leak_params``): these
    #: sizes where the case's are larger. A leak grows per task (a kept frame, handle, stack) or
    #: per round (a list appended to), and the gate's floors are per task and per round: either
    #: reads at least as large per task in fewer, lighter tasks. The smoke scale's case.
    LEAK_SIZES: dict[str, int] = {}
    # what every subclass defines (declared here for the type checker, see the docstring)
    sync_main: Callable[..., Any]
    async_main: Callable[..., Any]
    check: Callable[..., Outcome]

    def cases(self, scale: str) -> list[dict]:
        return [dict(case) for case in self.CASES[check_scale(scale)]]

    def rounds(self, scale: str) -> tuple[int, int]:
        return self.ROUNDS[check_scale(scale)]

    def unsupported(self, backend, params: dict) -> str | None:
        return None

    def prepare(self, params: dict) -> None:
        return None

    def leak_params(self, params: dict) -> dict | None:
        """``params`` with ``LEAK_SIZES`` where those are smaller, or None where none is."""
        light = {
            key: size
            for key, size in self.LEAK_SIZES.items()
            if isinstance(params.get(key), int) and params[key] > size
        }
        return {**params, **light} if light else None

    def run(self, backend, params: dict) -> Outcome:
        self.check_params(params)
        main = self.async_main if backend.family == "async" else self.sync_main
        result = backend.run(main, backend, *(params[k] for k in self.PARAMS))
        return self.check(params, result)

    def check_params(self, params: dict) -> None:
        missing = [k for k in self.PARAMS if k not in params]
        unknown = [k for k in params if k not in self.PARAMS]
        if missing or unknown:
            raise ValueError(
                f"{self.name} workload: bad parameters (missing {missing}, unknown {unknown}); "
                f"give exactly {list(self.PARAMS)}"
            )

    def fail(self, params: dict, what: str) -> WorkloadError:
        return WorkloadError(f"{self.name}({_describe(params)}) gave a wrong result: {what}")

    def __repr__(self) -> str:
        return f"<Workload {self.name}>"


def _describe(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def too_many_tasks(backend, tasks: int, limits: dict[str, int], why: str) -> str | None:
    """The skip reason when a case needs more live tasks than this kind of task allows."""
    limit = limits.get(backend.task_kind)
    if limit is not None and tasks > limit:
        return f"{backend.name}: {tasks} live {backend.task_kind} tasks exceed {limit} ({why})"
    return None
