"""The memory gate through real pytest sessions on real backends: a leak fails the build.

``LEAKY`` is the cancel workload with tasks that keep their own frame alive after they were
cancelled (or torn down), and handles to every task kept by main: what a library that forgets
to let go of a cancelled task does. A task's frame on multiprocessing lives in its own process,
which ends, so there the kept handles (process objects, pipes) are what leaks. The plain cancel
workload is the control: the same tasks, nothing kept.
"""

from __future__ import annotations

import re
import sys

import pytest

from pytest_concurrency import backends

LEAKY = '''
import sys

from pytest_concurrency.workloads.cancel import Cancel, _ablocked, _blocked

KEPT = []


def _leaky(*args):
    try:
        return _blocked(*args)
    finally:
        KEPT.append(sys._getframe())


async def _aleaky(*args):
    try:
        return await _ablocked(*args)
    finally:
        KEPT.append(sys._getframe())


class KeepsHandles:
    """The backend, except that every task it spawns is kept for good."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def spawn(self, fn, *args):
        task = self._real.spawn(fn, *args)
        KEPT.append(task)
        return task

    def __reduce__(self):  # a task's process gets the plain backend
        return self._real.__reduce__()


class Leaky(Cancel):
    name = "leaky"
    sync_task, async_task = staticmethod(_leaky), staticmethod(_aleaky)

    def run(self, backend, params):
        return super().run(KeepsHandles(backend), params)


LEAKY = Leaky()
'''

TEST = """
import pytest

@pytest.mark.concurrency(workloads=[{workload!r}])
def test_cancel(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""

CANCELLING = [
    s
    for s in (*backends.DEFAULT_SPECS, "trio", "anyio[asyncio]", "anyio[trio]")
    if s != "threading" and backends.unavailable_reason(s) is None
]


#: The fast tier runs one model (gevent: C stacks and a hub); the slow tier every other cancelling
#: one, a session each, so that xdist's workers share them (in one session: 219 s on 2 cores).
FIRST = "gevent" if "gevent" in CANCELLING else CANCELLING[0]
MODELS = [
    pytest.param([FIRST], id="one-model"),
    *(
        pytest.param([spec], id=spec, marks=pytest.mark.slow)
        for spec in CANCELLING
        if spec != FIRST
    ),
]


def session(pytester, models, workload: str, *args):
    pytester.makepyfile(leaky=LEAKY, test_cancel=TEST.format(workload=workload))
    return pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-scale=smoke",
        "-p",
        "no:cacheprovider",
        f"--concurrency-backends={','.join(models)}",
        *args,
    )


@pytest.mark.timeout(900)
@pytest.mark.parametrize("models", MODELS)
def test_a_leak_of_cancelled_tasks_fails_the_build_without_a_baseline_on_every_model(
    pytester, models
):
    result = session(pytester, models, "leaky:LEAKY", "--concurrency-report-md=report.md")
    text = result.stdout.str()
    assert result.ret == 1, text
    assert (
        re.search(r"\d+ passed", text) and "failed" not in text.split("=")[-1]
    )  # the tests pass; the gate fails
    for spec in models:
        for case in (
            "end=cancel,tasks=10,wait=get",
            "end=cancel,tasks=10,wait=sleep",
            "end=abandon,tasks=10,wait=get",
        ):
            line = rf"leaky\[{case}\] on {re.escape(spec)}: keeps [\d.]+ (KiB|B) per task per round in the Python heap \(leak\)"
            assert re.search(line, text.replace("\n    ", " ")), (
                f"no leak line for {spec} {case}:\n{text}"
            )
    report = (pytester.path / "report.md").read_text()
    assert "**Memory leaks (fail the build): rounds keep what their tasks held**" in report
    assert f"leaky[end=cancel,tasks=10,wait=get] on {models[0]}: keeps" in report


@pytest.mark.once
@pytest.mark.timeout(900)
@pytest.mark.parametrize("models", MODELS)
def test_the_same_cancellations_without_the_leak_pass_and_the_report_says_so(pytester, models):
    result = session(pytester, models, "cancel", "--concurrency-save-baseline=base.json")
    text = result.stdout.str()
    assert result.ret == 0, text
    assert "memory passed" in text and "(leak)" not in text
    # the saved run re-rendered: the same memory block, from the file alone
    report = pytester.run(
        sys.executable, "-m", "pytest_concurrency", "report", "base.json", "--width=200"
    )
    assert report.ret == 0, report.stdout.str() + report.stderr.str()
    assert "memory passed: no leak" in report.stdout.str()
