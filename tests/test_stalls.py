"""A deadlock or stall fails its test on every model instead of hanging the session.

Real pytest sessions on real backends with a 1 s ``--concurrency-timeout``; pytest-timeout
is the safety net that turns a regression (a hang) into a failure of these tests.
"""

from __future__ import annotations

import signal
import time
import types
from pathlib import Path

import pytest
from conftest import needs

from pytest_concurrency import backends, plain_tests, settings
from pytest_concurrency.backends import watchdog
from pytest_concurrency.measure import callgrind

pytestmark = pytest.mark.timeout(300)

INSTALLED = [
    s
    for s in backends.DEFAULT_SPECS + backends.EXTRA_SPECS
    if backends.unavailable_reason(s) is None
]

PLAIN_TESTS = """
def main_of(b, sync_main, async_main):
    return async_main if b.family == "async" else sync_main


def tick(b):
    while True:
        b.sleep(0.01)


async def atick(b):
    while True:
        await b.sleep(0.01)


def test_orphan_get(concurrency_backend):
    b = concurrency_backend

    def main():
        b.channel(0).get()

    async def amain():
        await b.channel(0).get()

    b.run(main_of(b, main, amain))


def test_busy_neighbour(concurrency_backend):
    # A task that keeps sleeping: the model sees no deadlock, only the timeout can end it.
    b = concurrency_backend

    def main():
        b.spawn(tick, b)
        b.channel(0).get()

    async def amain():
        b.spawn(atick, b)
        await b.channel(0).get()

    b.run(main_of(b, main, amain))


def test_after(concurrency_backend):
    # The model still works after a timeout in the same process (eventlet's hub, gevent's).
    b = concurrency_backend

    def main():
        ch = b.channel(1)
        b.spawn(ch.put, 41)
        b.sleep(0.01)
        return ch.get() + 1

    async def amain():
        ch = b.channel(1)
        b.spawn(ch.put, 41)
        await b.sleep(0.01)
        return await ch.get() + 1

    assert b.run(main_of(b, main, amain)) == 42
"""


def _lit(text: str) -> str:
    return text.replace("[", "[[]")


@pytest.mark.parametrize(
    "models",
    [
        pytest.param(
            [s for s in ("asyncio", "gevent", "threading") if s in INSTALLED], id="three-models"
        ),
        pytest.param(INSTALLED, id="every-model", marks=pytest.mark.slow),
    ],
)
def test_plain_test_deadlock_fails_on_every_model(pytester, models):
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "--concurrency-timeout=1",
        f"--concurrency-backends={','.join(models)}",
        "-p",
        "no:randomly",
        timeout=250,
    )
    result.assert_outcomes(failed=2 * len(models), passed=len(models))
    out = result.stdout.str()
    for spec in models:
        # greenlet and gevent see a deadlock with nothing left to run themselves
        if spec not in ("greenlet", "gevent"):
            result.stdout.fnmatch_lines(
                [
                    _lit(
                        f"test_plain.py::test_orphan_get[{spec}]: {spec} run(test_orphan_get.<locals>."
                    )
                    + "*main) did not return within 1 s (deadlock or stall?). Blocked at:",
                ]
            )
        result.stdout.fnmatch_lines(
            [
                _lit(f"test_plain.py::test_busy_neighbour[{spec}]: {spec} run(")
                + "*did not return within 1 s*",
                "*test_plain.py:* in *main: *b.channel(0).get()",
            ]
        )
    assert "raise --concurrency-timeout if the code is just slow" in out
    assert "RuntimeError" not in out  # a stopped event loop's complaint is not the news
    # 14 tests, 12 of them stalled for 1 s: far below pytest-timeout's limit, so no hang
    assert time.monotonic() - started < 250


ASYNC = [
    s for s in ("asyncio", "uvloop", "trio", "anyio[asyncio]", "anyio[trio]") if s in INSTALLED
]


@pytest.mark.skipif(not ASYNC, reason="no async model installed")
def test_stalled_round_of_an_async_model_shows_only_the_stall(pytester):
    pytester.makepyfile(
        misbehaving="""
from pytest_concurrency.workloads import Outcome


class Hang:
    name, unit = "hang", "call"

    def cases(self, scale):
        return [{"size": 1}]

    def rounds(self, scale):
        return 2, 0

    def unsupported(self, backend, params):
        return None

    def run(self, backend, params):
        async def main():
            await backend.channel(0).get()
        backend.run(main)
        return Outcome(1)


HANG = Hang()
"""
    )
    pytester.makepyfile(
        test_cases="""
import pytest

@pytest.mark.concurrency(workloads=["misbehaving:HANG"])
def test_case(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""
    )
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-timeout=1",
        f"--concurrency-backends={','.join(ASYNC)}",
        timeout=120,
    )
    result.assert_outcomes(failed=len(ASYNC))
    for spec in ASYNC:
        result.stdout.fnmatch_lines(
            [
                _lit(
                    f"hang[size=1] on {spec} did not finish a round within 1 s (deadlock or stall?). Blocked at:"
                ),
                "  task *Hang.run.<locals>.main*:",
                "    *misbehaving.py:* in main: await backend.channel(0).get()",
            ]
        )
    out = result.stdout.str()
    assert "RuntimeError" not in out and "Event loop stopped" not in out, out


def test_deadline_gives_back_an_alarm_armed_by_someone_else():
    # pytest-timeout's signal method arms SIGALRM too; a round must not disarm it.
    fired = []

    def handler(*args):
        fired.append(True)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with watchdog.deadline(5, "outer")():
            with watchdog.deadline(0.05, "inner, ignored: the outer deadline is in charge")():
                time.sleep(0.2)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < left <= 30
        assert signal.getsignal(signal.SIGALRM) is handler and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_deadline_raises_with_the_blocked_line():
    import threading

    lock = threading.Lock()
    lock.acquire()
    with pytest.raises(watchdog.WorkloadTimeout) as info:
        with watchdog.deadline(0.2, "the lock test", "get the lock")():
            lock.acquire()  # never released
    message = str(info.value)
    assert message.startswith(
        "the lock test did not get the lock within 0.2 s (deadlock or stall?)"
    )
    assert (
        "in test_deadline_raises_with_the_blocked_line: lock.acquire()  # never released" in message
    )


@pytest.mark.timeout(0)  # pytest-timeout's own alarm would be the one in charge (the last part)
def test_a_silence_watch_starts_again_as_each_run_ends_and_stands_aside_for_another_alarm():
    """A user's test's watch (plain_tests.call_watched) bounds the code between its ``run`` calls,
    not the whole test: 0.6 s outside runs in all passes a 0.3 s watch when no stretch is that long."""
    watch = watchdog.deadline(
        0.3, "the test", "return, nor end a backend.run call,", silence_watch=True
    )
    with watch():
        for _ in range(6):
            time.sleep(0.1)
            with watchdog.deadline(5, "a run")():
                pass
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # nothing left armed
    with pytest.raises(
        watchdog.WorkloadTimeout,
        match="the test did not return, nor end a backend.run call, within 0.3 s",
    ):
        with watch():
            with watchdog.deadline(5, "a run")():
                pass
            time.sleep(2)
    previous = signal.signal(signal.SIGALRM, lambda *args: None)
    try:  # pytest-timeout's alarm is in charge: the watch arms nothing
        signal.setitimer(signal.ITIMER_REAL, 30)
        with watch():
            time.sleep(0.5)
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.once
@pytest.mark.timeout(0)  # pytest-timeout's own alarm would be the one in charge
def test_a_watch_told_of_signs_of_life_fires_only_after_none_and_not_in_an_excused_wait():
    """A test with ``benchmark`` alone (plain_tests.call_watched): each round's end is a sign of
    life, read when the alarm comes; a side's wait for its turn (``excused``) does not count. 1 s of
    rounds and a 0.6 s turn pass a 0.3 s watch; 2 s without a sign do not. (~2.5 s, no session)"""
    last = [time.monotonic()]
    watch = watchdog.deadline(
        0.3,
        "the test",
        "return, nor end a round of its benchmark,",
        silence_watch=True,
        alive=lambda: last[0],
    )
    with pytest.raises(
        watchdog.WorkloadTimeout,
        match="the test did not return, nor end a round of its benchmark, within 0.3 s",
    ):
        with watch():
            for _ in range(5):
                time.sleep(0.2)
                last[0] = time.monotonic()
            with watchdog.excused():
                time.sleep(0.6)
            time.sleep(0.2)  # the turn's end was a sign too
            last[0] = time.monotonic()
            passed = True
            time.sleep(2)
    assert passed
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # nothing left armed


#: A test with pytest-benchmark's fixture alone whose round never ends, and one after it
BENCHMARK_ALONE_HANGS = """
import time

def test_hangs(benchmark):
    benchmark(time.sleep, 3600)

def test_after(benchmark):
    benchmark.pedantic(sum, args=(range(100),), rounds=3)
"""


@pytest.mark.once
@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_a_test_with_benchmark_alone_past_a_given_timeout_fails_by_name_and_the_session_goes_on(
    pytester, isolate
):
    """~6 s each alone, 3.3 CPU s (a 1 s timeout: 3.1 s without a round's end):
    ``time.sleep(3600)`` inside ``benchmark(...)`` was never stopped, with or without
    --concurrency-isolate, until an outer timeout killed the session. In the session's process SIGALRM stops it, naming where it waited;
    isolated, its child is killed."""
    pytester.makepyfile(test_hangs=BENCHMARK_ALONE_HANGS)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-timeout=1",
        "-p",
        "no:randomly",
        *(["--concurrency-isolate"] if isolate else []),
        timeout=180,  # 3.3 CPU s, 63-67 s by the clock at a load of 38 on 2 cores
    )
    result.assert_outcomes(failed=1, passed=1)
    if isolate:
        result.stdout.fnmatch_lines(
            [
                "*test_hangs.py::test_hangs: for 3.1 s no round of its benchmark ended and the "
                "test did not return, so its process was killed with every process it started*",
                "*in test_hangs*",  # its stack, dumped before the kill
            ]
        )
    else:
        result.stdout.fnmatch_lines(
            [
                "*test_hangs.py::test_hangs did not return, nor end a round of its benchmark, "
                "within 3.1 s (deadlock or stall?). Blocked at:",
                "*Raise --concurrency-timeout*" if False else "*raise --concurrency-timeout*",
            ]
        )


@pytest.mark.once
def test_only_a_given_timeout_bounds_a_test_with_benchmark_alone(pytester):
    """With the plugin installed a test passes or fails as without it: the default timeout (120 s)
    bounds the plugin's rounds and ``run`` calls, not a suite's own test with ``benchmark`` alone,
    which only a timeout given on the command line or in the ini file bounds. (No session.)"""
    alone = types.SimpleNamespace(fixturenames=["benchmark"])
    with_model = types.SimpleNamespace(fixturenames=["benchmark", "concurrency_backend"])
    pytester.makeini("[pytest]\n")
    default = settings.from_config(pytester.parseconfig())
    assert default.timeout == 120.0 and not default.timeout_given
    assert plain_tests.bound(alone, default) is None
    assert plain_tests.bound(with_model, default) == 120.0
    for given in (["--concurrency-timeout=5"], ["-o", "concurrency_timeout=5"]):
        chosen = settings.from_config(pytester.parseconfig(*given))
        assert plain_tests.bound(alone, chosen) == plain_tests.bound(with_model, chosen) == 5.0


MYLIB = "__version__ = '1.0'\n"


@pytest.mark.slow
@pytest.mark.timeout(1200)  # counted, under load: a pass, two layouts' passes, the counted session
@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(
            "counted",
            marks=needs("valgrind", callgrind.unavailable_reason()),
        ),
        "against",
    ],
)
def test_counted_or_against_the_base_a_test_with_benchmark_alone_past_the_timeout_fails(
    pytester, mode
):
    """Counted, 75 CPU s (3.5 min by the clock at a load of 20): the pass at full speed, each
    layout's counted pass and the counted session (under valgrind) each stop it, the warm-up's
    calls counted as signs of life. Against the base, 15 CPU s (3 min at that load: pip installs the
    base side): each side stops it, and its wait for the other side's turn does not count."""
    pytester.makepyfile(test_hangs=BENCHMARK_ALONE_HANGS)
    if mode == "counted":
        args = ["--concurrency-measure=instructions"]
    else:
        (pytester.path / "base" / "mylib").mkdir(parents=True)
        (pytester.path / "base" / "mylib" / "__init__.py").write_text(MYLIB)
        (pytester.path / "base" / "pyproject.toml").write_text(
            (Path(__file__).parent / "data" / "mylib.pyproject.toml")
            .read_text()
            .format(version="1.0")
        )
        args = ["--concurrency-against=base"]
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-timeout=1", "-p", "no:randomly", *args, timeout=1100
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_hangs.py::test_hangs did not return, nor end a round of its benchmark, "
            "within 3.1 s (deadlock or stall?). Blocked at:"
        ]
    )
