"""A user's own benchmark test (``benchmark`` + ``concurrency_backend``, without
``concurrency_benchmark``): what the plugin adds around it.

Its rounds are pytest-benchmark's. In time mode each call of ``concurrency_backend.run`` gets its
kernel figures (one op per call); counted, it warms up until its count repeats, as a workload
case does, and its kernel figures and its rounds in other layouts come from passes before the
session (passes.py); with ``memory=True`` (or ``--concurrency-memory``) its function is called
again after its rounds for the memory pass; and its record gets the keys the gate matches on.
"""

import contextlib
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Collection

import pytest

from . import benchmark_adapter as adapter
from .backends import watchdog
from .measure import PROFILE_HERE, control, driver, models, records

#: kernel figures per ``run`` call (``concurrency_backend``), or per group of rounds (others)
KERNEL = pytest.StashKey["driver.KernelPerRun | driver.KernelPerRounds"]()
CONTROL = pytest.StashKey[control.Bracket]()  # the controls timed beside its rounds
CALLS = pytest.StashKey[driver.PlainCalls]()  # with the memory pass: what it measured
WATCHED = pytest.StashKey[bool]()  # the call is under its silence watch (``call_watched``)
APART = pytest.StashKey[bool]()  # in the child a test's call runs in (``call_apart``)
WHOLE_BODY = pytest.StashKey[bool]()  # a marked test whose whole body is the measured call
IN_BODY = pytest.StashKey[bool]()  # inside one measured call of it
#: when the last round of a test with ``benchmark`` alone ended (``note_rounds``): its silence watch
ROUND_ENDED = pytest.StashKey[list]()
#: pytest-codspeed's markers: the whole test is the benchmark (it takes no benchmark fixture).
BODY_MARKERS = ("benchmark", "codspeed_benchmark")


def measured_here(names: Collection[str]) -> bool:
    """Whether a test with these fixtures is a user's benchmark measured in the session's process:
    it uses pytest-benchmark's ``benchmark`` (with ``concurrency_backend`` or not), not the
    built-in workloads' ``concurrency_benchmark``."""
    return "benchmark" in names and "concurrency_benchmark" not in names


def measure_whole_bodies(items) -> None:
    """pytest-codspeed's style (``@pytest.mark.benchmark`` on a test that takes no benchmark
    fixture): the test gets pytest-benchmark's ``benchmark`` fixture, and its whole body becomes
    the measured call (``call_whole_body``), as pytest-codspeed measures it."""
    for item in items:
        names = getattr(item, "fixturenames", None)
        function = getattr(item, "obj", None)
        if names is None or function is None or "concurrency_benchmark" in names:
            continue
        if "benchmark" in inspect.signature(function).parameters:
            continue  # pytest-benchmark's own marker (settings) on a test that takes the fixture
        if any(item.get_closest_marker(m) for m in BODY_MARKERS):
            if "benchmark" not in names:  # (the parametrized items of a function share the list)
                names.append("benchmark")  # set up with the test's other fixtures
            item.stash[WHOLE_BODY] = True


def call_whole_body(item) -> bool | None:
    """A marked test's call: its body, as pytest would call it, measured by pytest-benchmark's
    fixture; None for any other test (or from inside the measured call)."""
    if not item.stash.get(WHOLE_BODY, False) or item.stash.get(IN_BODY, False):
        return None

    def body() -> None:
        item.stash[IN_BODY] = True
        try:
            item.ihook.pytest_pyfunc_call(pyfuncitem=item)  # async tests: their plugin's hook
        finally:
            item.stash[IN_BODY] = False

    item.funcargs["benchmark"](body)
    return True


def is_plain(names: Collection[str]) -> bool:
    """Whether a test with these fixtures is a user's own benchmark test."""
    return (
        "benchmark" in names
        and "concurrency_backend" in names
        and "concurrency_benchmark" not in names
    )


def runs_apart(item, settings) -> bool:
    """Whether the test's call runs in a child forked for it (``--concurrency-isolate``; see
    runner/forked.py): a benchmark test measured here, with ``concurrency_backend`` or with
    ``benchmark`` alone. Not when counted (the session already runs under valgrind) nor as a side
    of ``--concurrency-against`` (its turns are taken from the session's process)."""
    return (
        settings.isolate
        and not settings.instrument.fresh_process
        and not settings.paired
        and hasattr(os, "waitid")  # Linux, BSD
        and measured_here(item.fixturenames)
    )


def bound(item, settings) -> float | None:
    """The ``--concurrency-timeout`` that bounds the test's call, or None: a test that takes
    ``concurrency_backend`` always (its run calls have the default deadline), one with
    ``benchmark`` alone only when the timeout is given (option or ini): without it, it runs as
    long as it would without the plugin."""
    return settings.timeout if is_plain(item.fixturenames) or settings.timeout_given else None


#: What a test watched for silence did not do (``call_watched``, ``call_apart``): its signs of life
NO_RUN_ENDED = "no backend.run call ended"
NO_ROUND_ENDED = "no round of its benchmark ended"


def watch(request, backend, instrument, apart: bool) -> None:
    """From the ``concurrency_backend`` fixture: read the kernel around each ``run`` call (time
    mode; under valgrind the figures would be valgrind's). A test that runs ``apart`` is watched
    in its child (``call_apart``)."""
    if instrument.machine_bound and is_plain(request.fixturenames) and not apart:
        request.node.stash[KERNEL] = driver.KernelPerRun(backend)
        request.addfinalizer(request.node.stash[KERNEL].close)


def call_apart(item, instrument, timeout: float | None, prepare: Callable[[], None]) -> bool | None:
    """The test's call, in a child forked for it (``runs_apart``; runner/forked.py): ``prepare()``
    (``before_call``) and kernel figures done there (counters opened here would count this
    process), ``after_call`` too (the memory pass, the record's keys), so that here it has nothing
    left to add. Each ``backend.run`` call that ends is a sign of life, or each round of a test
    with ``benchmark`` alone. In the child, None: the call itself runs."""
    from .runner import forked

    if item.stash.get(APART, False):
        return None
    bench, backend = item.funcargs["benchmark"], item.funcargs.get("concurrency_backend")

    def child() -> dict:
        item.stash[APART] = True
        if instrument.machine_bound and backend is not None:
            item.stash[KERNEL] = driver.KernelPerRun(backend)
        prepare()
        reply = _call(item)
        after_call(item, instrument, reply["outcome"] == "passed", lambda fullname: {})
        control_figures(item)
        reply["bench"] = {
            **adapter.sent_record(bench),
            "group": bench.group,
            "extra_info": bench.extra_info,
        }
        return reply

    def signs(tick: Callable[[], None]) -> None:
        if backend is not None:
            forked.after_each_run(backend, tick)
        else:
            driver.after_each_round(bench, tick)

    try:
        reply, silent, how = forked.run(child, signs, timeout)
    except OSError as exc:
        adapter.mark_used(bench, "in the test's own process, which could not start")
        pytest.fail(
            f"{item.nodeid}: no process could be started for the test (--concurrency-isolate): "
            f"{exc}. The user's process limit (ulimit -u) or memory is reached: raise it, or run "
            "without --concurrency-isolate.",
            pytrace=False,
        )
    finally:
        if CALLS in item.stash:
            del item.stash[CALLS]
    _apply(item, reply, silent, how, timeout, NO_RUN_ENDED if backend else NO_ROUND_ENDED)
    return True


def _apply(
    item, reply: dict | None, silent: bool, how: str | None, timeout: float | None, unsaid: str
) -> None:
    bench = item.funcargs["benchmark"]
    if reply is None:  # it may have measured, in the child: not "the fixture was not used"
        adapter.mark_used(bench, "in the test's own process, which ended without a result")
    if silent and timeout:  # only a session with a timeout watches for silence
        pytest.fail(
            f"{item.nodeid}: for {watchdog.silence(timeout):g} s {unsaid} and the test did not "
            "return, so its process was killed with every process it started (--concurrency-timeout "
            f"{timeout:g} s, and a grace). Its threads' stacks are in the captured stderr. Deadlock or "
            "stall? Raise --concurrency-timeout if the test is just slow.",
            pytrace=False,
        )
    if reply is None:
        pytest.fail(
            f"{item.nodeid}: the test's process ended without a result: {how or 'exit status 0'}. "
            "It ran apart from the session (--concurrency-isolate), which goes on; its last "
            "output is in the captured stdout and stderr.",
            pytrace=False,
        )
    _take_record(bench, reply["bench"])
    if reply["threads"]:
        item.warn(
            pytest.PytestWarning(
                f"{item.nodeid}: the test left non-daemon threads running ({', '.join(reply['threads'])}); "
                "they ended with its process, but in the session's own process they would keep it from "
                "exiting: join them in the test"
            )
        )
    outcome = reply["outcome"]
    if outcome == "skipped":
        pytest.skip(reply["message"])
    if outcome == "xfailed":
        pytest.xfail(reply["message"])
    if outcome == "failed":
        raise pytest.fail.Exception(reply["message"], pytrace=False)


def _take_record(bench, sent: dict) -> None:
    """pytest-benchmark's record of the child's rounds, made here as the fixture would have."""
    if sent["group"] is not None:  # before the record, which takes it
        bench.group = sent["group"]
    bench.extra_info.update(sent["extra_info"])
    adapter.take_record(bench, sent)


def _callspec_id(item) -> str:
    callspec = getattr(item, "callspec", None)
    return callspec.id if callspec is not None else ""


def _call(item) -> dict:
    """Call the test function as pytest would (this module's hook stands aside in the child)."""
    try:
        item.ihook.pytest_pyfunc_call(pyfuncitem=item)
    except pytest.skip.Exception as exc:
        return {"outcome": "skipped", "message": exc.msg}
    except pytest.xfail.Exception as exc:
        return {"outcome": "xfailed", "message": exc.msg}
    except BaseException:
        excinfo = pytest.ExceptionInfo.from_current()
        return {"outcome": "failed", "message": str(item.repr_failure(excinfo))}
    return {"outcome": "passed"}


def call_watched(item, timeout: float | None) -> bool | None:
    """In the session's process: the test's call, failed instead of hung when for
    ``watchdog.silence(timeout)`` no ``backend.run`` call ends (a test with ``benchmark`` alone: no
    round of its benchmark) and it does not return (each run has its own deadline; this bounds the
    code around them), and warned about when it leaves non-daemon threads running, which would keep
    the session from exiting. ``timeout`` None: not watched for silence (``bound``). None when not
    a benchmark test measured here (or already inside its watch): pytest calls it as usual."""
    if not measured_here(item.fixturenames) or item.stash.get(WATCHED, False):
        return None
    older = set(threading.enumerate())
    guard: Callable = contextlib.nullcontext
    if timeout and is_plain(item.fixturenames):
        guard = watchdog.deadline(
            watchdog.silence(timeout),
            item.nodeid,
            "return, nor end a backend.run call,",
            silence_watch=True,
        )
    elif timeout and ROUND_ENDED in item.stash:
        ended = item.stash[ROUND_ENDED]
        guard = watchdog.deadline(
            watchdog.silence(timeout),
            item.nodeid,
            "return, nor end a round of its benchmark,",
            silence_watch=True,
            alive=lambda: ended[0],
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
            bound = exit_wait(timeout)
            item.warn(
                pytest.PytestWarning(
                    f"{item.nodeid}: the test left non-daemon threads running ({', '.join(t.name for t in left)}); "
                    f"the session's process waits for them at most {bound:g} s when it exits: join "
                    "them in the test, or run with --concurrency-isolate"
                )
            )
            _exit_without(left, bound)
    return True


#: The longest a session's process waits at its exit for threads users' tests left running, in
#: every role (the user's session, a pass, the counted session, a side): a counted session's long
#: round timeout once made it wait 20 minutes and more.
EXIT_WAIT_S = 30.0


def exit_wait(timeout: float | None) -> float:
    """How long the process waits for threads a test left: ``EXIT_WAIT_S``, or less with a short
    ``--concurrency-timeout`` (its silence bound)."""
    return min(EXIT_WAIT_S, watchdog.silence(timeout)) if timeout else EXIT_WAIT_S


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
    register = getattr(threading, "_register_atexit", None)  # private (3.9+), hence looked up
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


def note_rounds(item) -> None:
    """Before the test runs, first of what wraps its rounds (so that a counted warm-up's calls are
    noted too): when each round of a test with ``benchmark`` alone ends (outside its timer, a
    store), for its silence watch (``call_watched``)."""
    bench = getattr(item, "funcargs", {}).get("benchmark")
    if (
        not is_plain(item.fixturenames)
        and adapter.is_fixture(bench)  # not pytest-codspeed's
        and ROUND_ENDED not in item.stash
    ):
        ended = item.stash[ROUND_ENDED] = [time.monotonic()]
        driver.after_each_round(bench, lambda: ended.__setitem__(0, time.monotonic()))


def bracket_rounds(item, instrument, aside=contextlib.nullcontext) -> None:
    """Before any benchmark test's call, a workload case's included: a control timed beside each
    of its rounds (control.py), when time is measured; inside a side's turn (``before_call``)."""
    bench = getattr(item, "funcargs", {}).get("benchmark")
    if (
        instrument.machine_bound
        and adapter.is_fixture(bench)  # not pytest-codspeed's (see before_call)
        and getattr(bench, "enabled", False)
        and CONTROL not in item.stash
    ):
        item.stash[CONTROL] = control.beside(bench, aside)


def control_figures(item) -> None:
    """After its call: the controls of its measured rounds into its record (rounds measured
    elsewhere, in a worker or a child, brought theirs)."""
    bracket = item.stash.get(CONTROL, None)
    bench = getattr(item, "funcargs", {}).get("benchmark")
    if bracket is not None and bench is not None and adapter.measured(bench):
        bench.extra_info.update(bracket.figures(len(adapter.fixture_rounds(bench))))


def before_call(item, instrument, memory: bool, paired: bool = False) -> None:
    """Before the test runs (and before a side of --concurrency-against, ``paired``, makes its
    rounds take turns): read the kernel around its rounds, when it has no ``concurrency_backend``
    (``watch`` reads that one's ``run`` calls); time a control beside each round (any benchmark
    test, a workload case's included); remember what it measures, for the memory pass
    (``memory``); and warm it up when counted."""
    funcargs = getattr(item, "funcargs", {})
    # pytest-codspeed's fixture (--codspeed) passes for pytest-benchmark's by ``__class__``, not type
    if not measured_here(funcargs) or not adapter.is_fixture(funcargs["benchmark"]):
        bracket_rounds(item, instrument)  # a workload case's rounds (none under --codspeed)
        return  # (the session says it judges nothing with --codspeed)
    bench = funcargs["benchmark"]
    if instrument.machine_bound and KERNEL not in item.stash and getattr(bench, "enabled", False):
        item.stash[KERNEL] = driver.KernelPerRounds(bench, one_a_round=paired)
    # around the kernel's readings, its work set aside from theirs (the controls' system calls
    # are not the test's)
    kernel = item.stash.get(KERNEL, None)
    aside = kernel.aside if isinstance(kernel, driver.KernelPerRounds) else contextlib.nullcontext
    bracket_rounds(item, instrument, aside)
    if memory:
        item.stash[CALLS] = driver.PlainCalls(bench)
    if instrument.exact:
        driver.WarmUntilStable(bench, instrument)


def after_call(
    item,
    instrument,
    passed: bool,
    counted_elsewhere: Callable[[str], dict],
    profile: str = PROFILE_HERE,
) -> None:
    """After the test ran: its record's keys, kernel figures and (if it passed) memory pass.
    ``counted_elsewhere(fullname)``: what passes before a counted session found for it (roles);
    ``profile``: where its last round's profile is read (``Instrument.after_rounds``)."""
    _label(item, instrument, counted_elsewhere, profile)
    if isinstance(item.stash.get(KERNEL, None), driver.KernelPerRounds):
        item.stash[KERNEL].close()  # (``watch`` closes a ``run`` call's at teardown)
    bench = getattr(item, "funcargs", {}).get("benchmark")
    calls = item.stash.get(CALLS, None)
    if passed and calls is not None and bench is not None and adapter.measured(bench):
        bench.extra_info.update(calls.memory_figures())


#: A record's parameter holding its test's parametrization id, when a parameter is not a plain value
CASE_ID = "id"


def _label(item, instrument, counted_elsewhere: Callable[[str], dict], profile: str) -> None:
    """Give the test the keys the gate matches on (a ``concurrency_benchmark`` test has them):
    its model, its name and its parameters."""
    funcargs = getattr(item, "funcargs", {})
    bench, backend = funcargs.get("benchmark"), funcargs.get("concurrency_backend")
    if bench is None or not measured_here(funcargs) or "backend" in bench.extra_info:
        return
    given = getattr(getattr(item, "callspec", None), "params", {})
    params = {
        k: v
        for k, v in given.items()
        if k != "concurrency_backend" and isinstance(v, (str, int, float, bool))
    }
    objects = len(params) < len(given) - ("concurrency_backend" in given)
    if backend is not None:
        model = {"backend": backend.name, "backend_version": backend.version}
        model["task_kind"] = backend.task_kind
        name = item.originalname
    else:  # a suite's own benchmark: the model its parametrization names, if any
        model, params = models.of_parametrization(params, _callspec_id(item))
        name = item.nodeid.partition("[")[0]  # unique in the suite, as pytest names it
    if objects:
        # a parameter that is an object (an implementation, a class): its id tells the tests
        # apart, or multidict's C and pure-Python tests were one benchmark, judged one by the other
        params[CASE_ID] = _callspec_id(item)
    bench.extra_info.update(
        {
            "concurrency_schema": records.SCHEMA,
            **model,
            "workload": name,
            "params": params,
            "unit": "call",
            "ops": 1,
            "measure": instrument.kind,
        }
    )
    if adapter.measured(bench):  # it ran rounds: the last one ended last
        bench.extra_info.update(instrument.after_rounds(profile=profile))
        if KERNEL in item.stash:  # each round's run call; the warm-up rounds came first
            bench.extra_info.update(
                item.stash[KERNEL].figures(last=len(adapter.fixture_rounds(bench)))
            )
        elif not instrument.machine_bound:  # kernel figures and other layouts: from passes
            bench.extra_info.update(counted_elsewhere(bench.fullname))
