"""The built-in workloads' cases: what ``concurrency_case`` hands a test, and how one is measured.

A case is measured where its model and the instrument need it: a native reference row in its own
program (native/), a case of a worker-isolated or counted session in a worker process
(runner/isolate.py; counted ones can be measured ahead, several at once), else in this process
(measure/driver.py).
"""

import itertools

import pytest

from . import backends, workloads
from .backends import watchdog
from .gate import paired
from .measure import driver, records
from .measure.plan import CasePlan


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


def plan(case: Case, model: str, settings) -> CasePlan:
    """The one place a case's plan is made: on ``model`` (a backend spec), its rounds, warm-up
    and deadline from the settings."""
    workload = workloads.get(case.workload)
    rounds, warmup = settings.instrument.rounds(*workload.rounds(settings.scale))
    rounds = settings.rounds or rounds
    return CasePlan(
        model=model,
        workload=workload,
        params=case.params,
        rounds=max(rounds, paired.MIN_ROUNDS) if settings.paired else rounds,
        warmup=warmup,
        instrument=settings.instrument,
        timeout=settings.timeout,
        stop_width=settings.stop_width,
        ref=case.workload,
    )


def on(case: Case, backend, settings) -> tuple[CasePlan, str | None]:
    """The case's plan on ``backend``, and why the backend cannot run it (None: it can)."""
    made = plan(case, backend.name, settings)
    reason = made.workload.unsupported(backend, case.params)
    if backend.family == "native":
        from .native import bench as native

        reason = reason or native.unsupported(case.workload)
    return made, reason


#: Where a case's rounds run (``where``).
NATIVE, ISOLATED, IN_PROCESS = "native", "isolated", "in-process"


def where(model: str, settings) -> str:
    """The one place that decides where a case's rounds run: a native reference row in its own
    program, a worker-isolated or counted session's in a worker process, else here."""
    if backends.is_native(model):
        return NATIVE
    return ISOLATED if settings.isolate or settings.instrument.fresh_process else IN_PROCESS


def run(role, benchmark, backend, case: Case, fail_stalled) -> None:
    """Measure ``case`` on ``backend`` into ``benchmark``; ``role``: the session's (roles/)."""
    made, reason = on(case, backend, role.settings)
    if reason:
        pytest.skip(f"{backend.name}: {reason}")
    workloads.prepare(made.workload, case.params)
    benchmark.group = f"{made.workload.name}[{records.params_id(case.params)}]"
    if case.workload != made.workload.name:  # a user's "module:OBJECT": lets the gate re-run it
        benchmark.extra_info["workload_ref"] = case.workload
    status = role.progress
    if status is not None:
        status.start(backend.name, benchmark.group)
    ticks = itertools.count(1)
    # rounds measured elsewhere report each round as it ends
    on_round = status and (lambda: status.round(next(ticks), made.rounds + made.warmup))
    try:
        place = where(backend.name, role.settings)
        if place == NATIVE:
            from .native import bench as native

            native.bench(benchmark, backend, made, on_round=on_round)
        elif place == ISOLATED:
            from .runner import isolate

            measured = role.ahead and role.ahead.take(_ahead_key(backend.name, case))
            isolate.bench(role.workers(), benchmark, made, on_round=on_round, measured=measured)
        else:
            driver.bench_in_process(benchmark, backend, made, on_round=on_round)
    except watchdog.WorkloadTimeout as exc:
        fail_stalled(exc)
    finally:
        if status is not None:
            status.end()


def _ahead_key(spec: str, case: Case) -> tuple:
    return (spec, case.workload, records.params_id(case.params))


def measure_ahead(pool, items, settings):
    """Submit every selected seed-style case to run ``settings.jobs`` at a time; its test picks the
    result up when pytest reaches it. Anything not plainly runnable is left to its test."""
    from .runner import isolate

    ahead, instrument = isolate.Ahead(pool, settings.jobs), settings.instrument
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
        made, reason = on(case, backend, settings)
        if reason or instrument.unsupported(backend) or backend.unsupported_measure(instrument):
            continue
        workloads.prepare(made.workload, case.params)  # in this process, before any worker starts
        ahead.submit(_ahead_key(spec, case), spec, isolate.request(made), settings.timeout)
    ahead.start()
    return ahead
