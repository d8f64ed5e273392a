"""The built-in workloads' cases: what ``concurrency_case`` hands a test, and how one is measured.

A case is measured where its model and the instrument need it: a native reference row in its own
program (native/), a case of a worker-isolated or counted session in a worker process
(runner/isolate.py; counted ones can be measured ahead, several at once), else in this process
(measure/driver.py).
"""

from __future__ import annotations

import itertools

import pytest

from . import backends, workloads
from .backends import watchdog
from .gate import paired
from .measure import driver, records
from .report import progress


class Case(dict):
    """One workload with one set of parameters: what ``concurrency_case`` hands a test.

    A dict, so that pytest-benchmark can write it into JSON as one of the test's params.
    """

    def __init__(self, workload: str, params: dict):
        super().__init__(workload=workload, params=dict(params))

    @property
    def workload(self) -> str:
        return self["workload"]

    @property
    def params(self) -> dict:
        return self["params"]

    @property
    def id(self) -> str:
        return f"{self.workload}-{records.params_id(self.params)}"


def plan(case: Case, backend, s) -> tuple:
    """(workload, why this backend cannot run it or None, rounds, warm-up rounds)."""
    workload = workloads.get(case.workload)
    rounds, warmup = s.instrument.rounds(*workload.rounds(s.scale))
    reason = workload.unsupported(backend, case.params)
    if backend.family == "native":
        from .native import bench as native

        reason = reason or native.unsupported(case.workload)
    rounds = s.rounds or rounds
    return workload, reason, max(rounds, paired.MIN_ROUNDS) if s.paired else rounds, warmup


def run(role, benchmark, backend, case: Case, fail_stalled) -> None:
    """Measure ``case`` on ``backend`` into ``benchmark``; ``role``: the session's (roles/)."""
    s = role.settings
    workload, reason, rounds, warmup = plan(case, backend, s)
    if reason:
        pytest.skip(f"{backend.name}: {reason}")
    workloads.prepare(workload, case.params)
    benchmark.group = f"{workload.name}[{records.params_id(case.params)}]"
    if case.workload != workload.name:  # a user's "module:OBJECT": lets the gate re-run it
        benchmark.extra_info["workload_ref"] = case.workload
    what = records.label(workload.name, case.params, backend.name)
    status = role.progress
    if status is not None:
        status.start(backend.name, benchmark.group)
    ticks = itertools.count(1)
    # rounds measured elsewhere report each round as it ends
    on_round = status and (lambda: status.round(next(ticks), rounds + warmup))
    try:
        if backend.family == "native":
            from .native import bench as native

            native.bench(
                benchmark,
                backend,
                workload,
                case.params,
                rounds,
                warmup,
                s.timeout,
                what,
                on_round=on_round,
            )
        elif s.isolate or s.instrument.fresh_process:
            from .runner import isolate

            isolate.bench(
                role.workers(),
                benchmark,
                backend,
                case.workload,
                case.params,
                rounds,
                warmup,
                s.timeout,
                what,
                s.instrument,
                on_round=on_round,
                measured=role.ahead and role.ahead.take(_ahead_key(backend.name, case)),
            )
        else:
            driver.bench_in_process(
                progress.Ticking(benchmark, status, rounds + warmup) if status else benchmark,
                backend,
                workload,
                case.params,
                rounds,
                warmup,
                watchdog.deadline(s.timeout, what),
                s.instrument,
            )
    except watchdog.WorkloadTimeout as exc:
        fail_stalled(exc)
    finally:
        if status is not None:
            status.end()


def _ahead_key(spec: str, case: Case) -> tuple:
    return (spec, case.workload, records.params_id(case.params))


def measure_ahead(pool, items, s):
    """Submit every selected seed-style case to run ``s.jobs`` at a time; its test picks the
    result up when pytest reaches it. Anything not plainly runnable is left to its test."""
    from .runner import isolate

    ahead = isolate.Ahead(pool, s.jobs)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        case, spec = params.get("concurrency_case"), params.get("concurrency_backend")
        if (
            not isinstance(case, Case)
            or spec is None
            or "concurrency_benchmark" not in item.fixturenames
            or item.get_closest_marker("skip")
            or item.get_closest_marker("skipif")
        ):
            continue
        try:
            backend = backends.load(spec)
        except backends.Unsupported:
            continue
        workload, reason, rounds, warmup = plan(case, backend, s)
        if reason or s.instrument.unsupported(backend) or backend.unsupported_measure(s.instrument):
            continue
        workloads.prepare(workload, case.params)  # in this process, before any worker starts
        ahead.submit(
            _ahead_key(spec, case),
            spec,
            isolate.request(case.workload, case.params, rounds, warmup, s.instrument),
            s.timeout,
        )
    ahead.start()
    return ahead
