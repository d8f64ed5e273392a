"""A user's own benchmark test (``benchmark`` + ``concurrency_backend``, without
``concurrency_benchmark``): what the plugin adds around it.

Its rounds are pytest-benchmark's. In time mode each call of ``concurrency_backend.run`` gets its
kernel figures (one op per call); counted, it warms up until its count repeats, as a workload
case does; with ``memory=True`` (or ``--concurrency-memory``) its function is called again after
its rounds for the memory pass; and its record gets the keys the gate matches on.
"""

from __future__ import annotations

import os
import threading
from typing import Collection

import pytest

from .backends import watchdog
from .measure import driver, kernel, records

KERNEL = pytest.StashKey[driver.KernelPerRun]()  # kernel figures per run call
CALLS = pytest.StashKey[driver.PlainCalls]()  # with the memory pass: what it measured
WATCHED = pytest.StashKey[bool]()  # the call is under its silence watch (``call_watched``)


def is_plain(names: Collection[str]) -> bool:
    """Whether a test with these fixtures is a user's own benchmark test."""
    return "benchmark" in names and "concurrency_backend" in names and "concurrency_benchmark" not in names


def runs_apart(item, s) -> bool:
    """Whether the test's call runs in a child forked for it (``--concurrency-isolate``; see
    runner/forked.py). Not when counted (the session already runs under valgrind) nor as a side of
    ``--concurrency-against`` (its turns are taken from the session's process)."""
    return (s.isolate and not s.instrument.fresh_process and not s.paired and hasattr(os, "waitid")  # Linux, BSD
            and is_plain(item.fixturenames))


def watch(request, backend, instrument, apart: bool) -> None:
    """From the ``concurrency_backend`` fixture: read the kernel around each ``run`` call (time
    mode; under valgrind the figures would be valgrind's). A test that runs ``apart`` is watched
    in its child (``call_apart``)."""
    if instrument.machine_bound and is_plain(request.fixturenames) and not apart:
        request.node.stash[KERNEL] = driver.KernelPerRun(backend)
        request.addfinalizer(request.node.stash[KERNEL].close)


def call_apart(item, instrument, timeout: float | None) -> None:
    """The test's call, in a child forked for it (``runs_apart``): kernel figures read there (counters
    opened here would count this process), ``after_call`` done there (the memory pass, the record's
    keys), so that here it has nothing left to add."""
    from .runner import forked

    def before() -> None:
        if instrument.machine_bound:
            item.stash[KERNEL] = driver.KernelPerRun(item.funcargs["concurrency_backend"])

    try:
        forked.run(item, timeout, before, lambda passed: after_call(item, instrument, passed))
    finally:
        if CALLS in item.stash:
            del item.stash[CALLS]


def call_watched(item, timeout: float | None) -> bool | None:
    """In the session's process: the test's call, failed instead of hung when for
    ``watchdog.silence(timeout)`` no ``backend.run`` call ends and it does not return (each run has
    its own deadline; this bounds the code around them), and warned about when it leaves non-daemon
    threads running, which would keep the session from exiting. None when not a plain test (or
    already inside its watch): pytest calls it as usual."""
    if not is_plain(item.fixturenames) or item.stash.get(WATCHED, False):
        return None
    from .runner import forked

    older = set(threading.enumerate())
    guard = watchdog.deadline(timeout and watchdog.silence(timeout), item.nodeid,
                              "return, nor end a backend.run call,", silence=True)
    item.stash[WATCHED] = True
    try:
        with guard():
            item.ihook.pytest_pyfunc_call(pyfuncitem=item)  # this module's hook stands aside
    except watchdog.WorkloadTimeout as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    finally:
        del item.stash[WATCHED]
        left = forked.threads_left(besides=older)
        if left:
            item.warn(pytest.PytestWarning(
                f"{item.nodeid}: the test left non-daemon threads running ({', '.join(left)}); Python waits "
                "for them before the session's process exits: join them in the test, or run with "
                "--concurrency-isolate"))
    return True


def before_call(item, instrument, memory: bool) -> None:
    """Before the test runs: remember what it measures (``memory``), and warm it up when counted."""
    funcargs = getattr(item, "funcargs", {})
    if not is_plain(funcargs):
        return
    bench = funcargs["benchmark"]
    if memory:
        item.stash[CALLS] = driver.PlainCalls(bench)
    if instrument.exact:
        driver.WarmUntilStable(bench, instrument)


def after_call(item, instrument, passed: bool) -> None:
    """After the test ran: its record's keys, kernel figures and (if it passed) memory pass."""
    _label(item, instrument)
    bench = getattr(item, "funcargs", {}).get("benchmark")
    if passed and CALLS in item.stash and getattr(bench, "stats", None) is not None:
        bench.extra_info.update(item.stash[CALLS].memory_figures())


def _label(item, instrument) -> None:
    """Give the test the keys the gate matches on (a ``concurrency_benchmark`` test has them)."""
    funcargs = getattr(item, "funcargs", {})
    bench, backend = funcargs.get("benchmark"), funcargs.get("concurrency_backend")
    if bench is None or backend is None or "backend" in bench.extra_info:
        return
    params = {k: v for k, v in getattr(getattr(item, "callspec", None), "params", {}).items()
              if k != "concurrency_backend" and isinstance(v, (str, int, float, bool))}
    bench.extra_info.update({
        "concurrency_schema": records.SCHEMA,
        "backend": backend.name,
        "backend_version": backend.version,
        "workload": item.originalname,
        "params": params,
        "unit": "call",
        "ops": 1,
        "task_kind": backend.task_kind,
        "measure": instrument.kind,
    })
    if getattr(bench, "stats", None) is not None:  # it ran rounds: the last one ended last
        bench.extra_info.update(instrument.after_rounds())
        if KERNEL in item.stash:  # each round's run call; the warm-up rounds came first
            bench.extra_info.update(item.stash[KERNEL].figures(last=len(bench.stats.stats.data)))
        elif not instrument.machine_bound:  # said, so that the kernel gate reads "not measured", not nothing
            bench.extra_info.update(kernel.not_measured(kernel.UNDER_VALGRIND))
