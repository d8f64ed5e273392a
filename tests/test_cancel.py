"""Task.cancel() on every model that has it, and the cancel workload's own checks.

The cancel workload runs on every model in test_workloads.py; here: what ``join`` says
after ``cancel``, that threads refuse instead of pretending, and that a task which ignores
its cancellation, or has no cleanup, makes the round fail (a workload that can be fast and
wrong is wrong).
"""

from __future__ import annotations

import pytest

from pytest_concurrency import backends, workloads
from pytest_concurrency.backends.base import TaskCancelled, Unsupported
from pytest_concurrency.workloads import WorkloadError
from pytest_concurrency.workloads.cancel import Cancel

pytestmark = pytest.mark.timeout(120)  # a cancel that does not cancel would hang, not fail

CANCELLING = [s for s in backends.DEFAULT_SPECS + backends.EXTRA_SPECS if s != "threading"]


def backend(spec: str):
    reason = backends.unavailable_reason(spec)
    if reason:
        pytest.skip(reason)
    return backends.load(spec)


def _sleeper(backend, seconds):
    backend.sleep(seconds)
    return "woke"


async def _asleeper(backend, seconds):
    await backend.sleep(seconds)
    return "woke"


def _cancel_one(be, seconds):
    """(what join of a cancelled sleeper raised, what a finished task's join returns after a cancel)."""
    if be.family == "async":

        async def main():
            long, short = be.spawn(_asleeper, be, seconds), be.spawn(_asleeper, be, 0)
            await short.join()
            short.cancel()  # it already ended: cancel is a no-op, its result stands
            long.cancel()
            try:
                await long.join()
            except TaskCancelled as exc:
                return exc, await short.join()
            return None, await short.join()
    else:

        def main():
            long, short = be.spawn(_sleeper, be, seconds), be.spawn(_sleeper, be, 0)
            short.join()
            short.cancel()
            long.cancel()
            try:
                long.join()
            except TaskCancelled as exc:
                return exc, short.join()
            return None, short.join()

    return be.run(main)


@pytest.mark.parametrize("spec", CANCELLING)
def test_join_of_a_cancelled_task_says_so_and_a_finished_one_keeps_its_result(spec):
    be = backend(spec)
    error, result = _cancel_one(be, 600)
    assert (
        isinstance(error, TaskCancelled)
        and f"[{be.name}]" in str(error)
        and "cancelled" in str(error)
    )
    assert result == "woke"


def test_threads_are_not_cancelled_but_refused_with_the_reason():
    be = backend("threading")

    def main():
        task = be.spawn(_sleeper, be, 0)
        try:
            task.cancel()
        finally:
            task.join()

    with pytest.raises(Unsupported, match="no way to stop a thread"):
        be.run(main)
    reason = workloads.get("cancel").unsupported(be, workloads.get("cancel").cases("smoke")[0])
    assert "threading has no way to cancel a task" in reason


# -- the checks catch a wrong run ---------------------------------------------------------


def _ignores(backend, wait, ready, gate, left, ident):
    try:
        ready.put(ident)
        try:
            backend.sleep(3600) if wait == "sleep" else gate.get()
        except BaseException:
            pass
        left.ran_past.put(ident)
        return ident
    finally:
        left.cleaned.put(ident)


async def _aignores(backend, wait, ready, gate, left, ident):
    try:
        await ready.put(ident)
        try:
            await (backend.sleep(3600) if wait == "sleep" else gate.get())
        except BaseException:
            pass
        left.ran_past.put(ident)
        return ident
    finally:
        left.cleaned.put(ident)


def _no_cleanup(backend, wait, ready, gate, left, ident):
    ready.put(ident)
    backend.sleep(3600) if wait == "sleep" else gate.get()


async def _ano_cleanup(backend, wait, ready, gate, left, ident):
    await ready.put(ident)
    await (backend.sleep(3600) if wait == "sleep" else gate.get())


class Ignores(Cancel):
    sync_task, async_task = staticmethod(_ignores), staticmethod(_aignores)


class NoCleanup(Cancel):
    sync_task, async_task = staticmethod(_no_cleanup), staticmethod(_ano_cleanup)


@pytest.mark.parametrize("spec", ["greenlet", "gevent", "asyncio", "trio"])
@pytest.mark.parametrize(
    ("faulty", "params", "message"),
    [
        (
            Ignores(),
            {"tasks": 5, "wait": "get", "end": "cancel"},
            "5 of 5 cancelled tasks returned instead of ending cancelled",
        ),
        (
            Ignores(),
            {"tasks": 5, "wait": "get", "end": "abandon"},
            "5 task(s) ran past their cancel point",
        ),
        (
            NoCleanup(),
            {"tasks": 5, "wait": "sleep", "end": "cancel"},
            "cleanup (finally) ran for 0 of 5 tasks",
        ),
        (
            NoCleanup(),
            {"tasks": 5, "wait": "get", "end": "abandon"},
            "cleanup (finally) ran for 0 of 5 tasks",
        ),
    ],
    ids=["ignores-cancel", "ignores-teardown", "no-finally", "no-finally-abandoned"],
)
def test_a_wrong_cancellation_is_caught(spec, faulty, params, message):
    be = backend(spec)
    workloads.get("cancel").run(be, params)  # the right tasks pass the same case
    with pytest.raises(WorkloadError, match=message.replace("(", r"\(").replace(")", r"\)")):
        faulty.run(be, params)


def test_bad_params_name_the_fix():
    be = backend("asyncio")
    with pytest.raises(ValueError, match="wait 'poll' unknown; use one of get, sleep"):
        workloads.get("cancel").run(be, {"tasks": 3, "wait": "poll", "end": "cancel"})
    with pytest.raises(ValueError, match="end 'drop' unknown; use one of cancel, abandon"):
        workloads.get("cancel").run(be, {"tasks": 3, "wait": "get", "end": "drop"})
