"""A user's own benchmark test (``benchmark`` + ``concurrency_backend``, without
``concurrency_benchmark``): what the plugin adds around it.

Its rounds are pytest-benchmark's. In time mode each call of ``concurrency_backend.run`` gets its
kernel figures (one op per call); counted, it warms up until its count repeats, as a workload
case does, and its kernel figures and its rounds in other layouts come from passes before the
session (passes.py); with ``memory=True`` (or ``--concurrency-memory``) its function is called
again after its rounds for the memory pass; and its record gets the keys the gate matches on.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Collection

import pytest

from . import passes
from .backends import watchdog
from .measure import driver, kernel, records

KERNEL = pytest.StashKey[driver.KernelPerRun]()  # kernel figures per run call
CALLS = pytest.StashKey[driver.PlainCalls]()  # with the memory pass: what it measured
WATCHED = pytest.StashKey[bool]()  # the call is under its silence watch (``call_watched``)


def is_plain(names: Collection[str]) -> bool:
    """Whether a test with these fixtures is a user's own benchmark test."""
    return (
        "benchmark" in names
        and "concurrency_backend" in names
        and "concurrency_benchmark" not in names
    )


def runs_apart(item, s) -> bool:
    """Whether the test's call runs in a child forked for it (``--concurrency-isolate``; see
    runner/forked.py). Not when counted (the session already runs under valgrind) nor as a side of
    ``--concurrency-against`` (its turns are taken from the session's process)."""
    return (
        s.isolate
        and not s.instrument.fresh_process
        and not s.paired
        and hasattr(os, "waitid")  # Linux, BSD
        and is_plain(item.fixturenames)
    )


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
    older = set(threading.enumerate())
    guard = watchdog.deadline(
        timeout and watchdog.silence(timeout),
        item.nodeid,
        "return, nor end a backend.run call,",
        silence_watch=True,
    )
    item.stash[WATCHED] = True
    try:
        with guard():
            item.ihook.pytest_pyfunc_call(pyfuncitem=item)  # this module's hook stands aside
    except watchdog.WorkloadTimeout as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    finally:
        del item.stash[WATCHED]
        left = watchdog.threads_left(besides=older)
        if left:
            item.warn(
                pytest.PytestWarning(
                    f"{item.nodeid}: the test left non-daemon threads running ({', '.join(t.name for t in left)}); "
                    "Python waits for them before the session's process exits: join them in the test, or run with "
                    "--concurrency-isolate"
                )
            )
            if timeout:
                _exit_without(left, watchdog.silence(timeout))
    return True


#: Threads users' tests left running in the session's process, the longest the process waits for
#: them at exit, and the session's exit status (``session_ended``): see ``_exit_without``.
_left: list[threading.Thread] = []
_exit: dict = {"bound": None, "status": 1}


def exit_bound() -> float | None:
    """How long the process waits for the threads users' tests left, or None: as long as they run."""
    return _exit["bound"] if any(t.is_alive() for t in _left) else None


def session_ended(status: int) -> None:
    _exit["status"] = status


def _exit_without(threads: list[threading.Thread], grace: float) -> None:
    """At the process's exit, Python waits for every non-daemon thread: a thread a test left waiting
    for ever would keep a CI job alive until the job's own limit. The first time, register with
    Python's shutdown (which calls it before that wait, at the process's own exit, not a session's)
    a bounded wait for them, then ``os._exit`` with the session's status."""
    first = not _left
    _left.extend(threads)
    _exit["bound"] = max(_exit["bound"] or 0, grace)
    register = getattr(
        threading, "_register_atexit", None
    )  # CPython 3.9+; private, hence looked up
    if first and register is not None:
        try:
            register(_wait_or_exit)
        except RuntimeError:  # shutting down already
            pass


def _wait_or_exit() -> None:
    until = time.monotonic() + _exit["bound"]
    for thread in _left:
        thread.join(max(0.0, until - time.monotonic()))
    alive = [t.name for t in _left if t.is_alive()]
    if alive:
        sys.stderr.write(
            f"pytest-concurrency: threads users' tests left ({', '.join(alive)}) still run "
            f"{_exit['bound']:g} s after the session: exiting without them, status {_exit['status']}\n"
        )
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(_exit["status"])


def before_call(item, instrument, memory: bool) -> None:
    """Before the test runs: remember what it measures (``memory``), and warm it up when counted."""
    funcargs = getattr(item, "funcargs", {})
    if not is_plain(funcargs):
        return
    bench = funcargs["benchmark"]
    if memory and not passes.kind():  # a pass keeps only what it runs for (passes.py)
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
    params = {
        k: v
        for k, v in getattr(getattr(item, "callspec", None), "params", {}).items()
        if k != "concurrency_backend" and isinstance(v, (str, int, float, bool))
    }
    bench.extra_info.update(
        {
            "concurrency_schema": records.SCHEMA,
            "backend": backend.name,
            "backend_version": backend.version,
            "workload": item.originalname,
            "params": params,
            "unit": "call",
            "ops": 1,
            "task_kind": backend.task_kind,
            "measure": instrument.kind,
        }
    )
    if getattr(bench, "stats", None) is not None:  # it ran rounds: the last one ended last
        bench.extra_info.update(instrument.after_rounds())
        if KERNEL in item.stash:  # each round's run call; the warm-up rounds came first
            bench.extra_info.update(item.stash[KERNEL].figures(last=len(bench.stats.stats.data)))
        elif not instrument.machine_bound:  # from the passes before this session (passes.py)
            bench.extra_info.update(
                passes.kernel_figures(bench.fullname) or kernel.not_measured(kernel.UNDER_VALGRIND)
            )
            others = passes.layout_rounds(bench.fullname)
            if others:  # the gate judges the median over layouts
                bench.extra_info["layouts"] = others
