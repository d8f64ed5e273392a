"""The seed experiments as workloads that run on every concurrency model.

Each workload module defines one ``Workload`` object with:

``name``, ``unit``
    e.g. ``"ring"``, ``"hop"``: what one operation is.
``cases(scale)``
    The parameter dicts to run at a scale (``smoke``, ``default``, ``seed``).
``rounds(scale)``
    ``(rounds, warmup_rounds)`` for pytest-benchmark's pedantic mode at that scale.
``unsupported(backend, params)``
    ``None``, or the reason this backend cannot run this case (it is skipped with it).
``prepare(params)`` (optional)
    Untimed set-up the case needs once per process before its rounds (the latency
    server for IO over TCP); called in the session's process before workers start, so
    they inherit it.
``waits`` (optional, default ``False``)
    ``True`` when a round waits on timers or sockets: how often its event loop wakes up
    then depends on timing, and so does an instruction count (see measure.callgrind).
``memory(backend, params)`` (optional)
    Untimed figures measured once after the timed rounds (spawn: KiB per live task),
    merged into the benchmark's extra_info. Every workload also gets the plugin's own
    memory pass (``measure/memory.py``: retained per task per round, peak).
``leak_params(params)`` (optional)
    The parameters of a lighter case of the same workload whose rounds read the case's
    leaks in the memory pass, or None (the case's own rounds read them): fewer messages or
    tasks, for a case whose rounds are costly (``TableWorkload.LEAK_SIZES``).
``run(backend, params)``
    One timed round: enter ``backend.run`` with the family's implementation, check the
    result (raise ``WorkloadError`` naming what is wrong), return an ``Outcome`` (with
    ``tasks``, the tasks it spawned, so that memory a round leaves behind reads per task).

Workload bodies are written once per family (sync and async) against the backend
primitives only, so that a new backend runs every workload unchanged.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

SCALES = ("smoke", "default", "seed")

_MODULES = {
    "ring": "ring",
    "chain": "chain",
    "io": "io",
    "spawn": "spawn",
    "switch": "switch",
    "cancel": "cancel",
}


class WorkloadError(AssertionError):
    """A workload's own result check failed: the run was wrong, so its time means nothing."""


@dataclass
class Outcome:
    ops: int  # operations done in this round
    extra: dict = field(default_factory=dict)  # e.g. {"ideal_s": 0.1}
    tasks: int | None = (
        None  # tasks the round spawned (memory retained is per task); None: one per op
    )


def names() -> list[str]:
    return list(_MODULES)


def get(name: str):
    """A seed workload by name, or a user's own as ``"package.module:OBJECT"``."""
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)
    try:
        module = _MODULES[name]
    except KeyError:
        raise KeyError(
            f"unknown workload {name!r}; valid: {', '.join(_MODULES)}, or 'module:OBJECT' for your own"
        ) from None
    return importlib.import_module(f"{__name__}.{module}").WORKLOAD


def prepare(workload, params: dict) -> None:
    """Run the workload's optional untimed set-up (users' own workloads may have none)."""
    hook = getattr(workload, "prepare", None)
    if hook is not None:
        hook(params)


def memory(workload, backend, params: dict, heap: int | None = None) -> dict:
    """The workload's optional untimed memory figures, or ``{}``; ``heap``: the traced growth
    its ``heap_round`` read in the memory pass (None: the hook reads it in a run of its own)."""
    hook = getattr(workload, "memory", None)
    if hook is None:
        return {}
    return hook(backend, params) if heap is None else hook(backend, params, heap=heap)


def heap_round(workload, backend, params: dict):
    """The workload's optional round of the case that also reads its live tasks' traced heap
    growth (``Outcome.extra["grown"]``), as a callable the memory pass runs for its rounds (the
    first one's growth is the figure), or None: none, or its figure is read on another case."""
    hook = getattr(workload, "heap_round", None)
    return hook(backend, params) if hook is not None else None


def leak_params(workload, params: dict) -> dict | None:
    """The parameters of a lighter case whose rounds read the case's leaks in the memory pass
    (its ``leak_params`` hook), or None: the case's own rounds read them."""
    hook = getattr(workload, "leak_params", None)
    return hook(params) if hook is not None else None


def waits(workload) -> bool:
    """Whether the workload's rounds wait on timers or sockets (``waits``, default ``False``)."""
    return bool(getattr(workload, "waits", False))


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid: {', '.join(SCALES)}")
    return scale
