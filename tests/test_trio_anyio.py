"""trio and anyio: what the generic tests (test_backends, test_workloads, test_stalls, which
run every model including these) cannot show.

How capacities map onto memory object streams, that failures come out as the contract's
``TaskFailed`` and never as trio's exception groups, that a stalled run is stopped by the
watchdog through the run's own task group (trio's scheduler must never see the timeout
raised into it), that these models run clean under ``-W error`` (anyio warns about memory
streams left open), and the README's recipe for a library built on anyio.
"""

from __future__ import annotations

import importlib.util
import math
import time
from importlib import metadata

import pytest

from pytest_concurrency import backends
from pytest_concurrency.backends import base

pytestmark = pytest.mark.timeout(300)

SPECS = backends.EXTRA_SPECS
INSTALLED = [s for s in SPECS if backends.unavailable_reason(s) is None]


def load(spec: str) -> base.Backend:
    reason = backends.unavailable_reason(spec)
    if reason:
        pytest.skip(reason)
    return backends.load(spec)


def _lit(text: str) -> str:  # fnmatch reads [...] as a character class
    return text.replace("[", "[[]")


# --- registry and attributes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("missing", "spec", "reason"),
    [
        ("trio", "trio", "trio not installed (pip install trio)"),
        ("trio", "anyio[trio]", "trio not installed (pip install trio)"),
        ("trio", "anyio[asyncio]", None),
        ("anyio", "anyio", "anyio not installed (pip install anyio)"),
        ("anyio", "anyio[trio]", "anyio not installed (pip install anyio)"),
        ("anyio", "trio", None),
        ("uvloop", "anyio[uvloop]", "uvloop not installed (pip install uvloop)"),
    ],
)
def test_missing_library_is_named_with_its_install_hint(monkeypatch, missing, spec, reason):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == missing else real_find_spec(name, *a),
    )
    assert backends.unavailable_reason(spec) == reason


def test_missing_trio_skips_its_models_in_a_run(pytester, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "trio" else real_find_spec(name, *a),
    )
    pytester.makepyfile(
        "def test_model(concurrency_backend):\n    assert concurrency_backend.family == 'async'\n"
    )
    result = pytester.runpytest("-rs", "--concurrency-backends=trio,anyio[trio],anyio[asyncio]")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*SKIPPED*trio: trio not installed (pip install trio)*",
            "*SKIPPED*anyio[[]trio]: trio not installed (pip install trio)*",
        ]
    )


def test_specs_are_canonical_and_unknown_variants_are_named():
    assert backends.canonical("anyio") == "anyio[asyncio]"
    assert backends.parse_list("trio, anyio[trio], ANYIO") == [
        "trio",
        "anyio[trio]",
        "anyio[asyncio]",
    ]
    with pytest.raises(backends.UnknownBackend, match=r"'anyio\[curio\]'.*anyio\[trio\]"):
        backends.canonical("anyio[curio]")


@pytest.mark.parametrize("spec", SPECS)
def test_declares_what_the_other_models_declare(spec):
    b = load(spec)
    assert (b.name, b.family, b.task_kind) == (spec, "async", "light")
    assert b.has_sockets and not b.isolation_only and b.max_parallel is None
    assert b.version == metadata.version(spec.partition("[")[0])


# --- channels ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize(("capacity", "buffer"), [(0, 0), (5, 5), (None, math.inf)])
def test_capacity_maps_to_max_buffer_size(spec, capacity, buffer):
    # 0 stays 0: trio's and anyio's zero-size buffer is already a true rendezvous
    # (test_backends checks the behaviour); None is their unbounded, math.inf.
    async def main(b):
        ch = b.channel(capacity)
        # put is the library's own send, no wrapper of ours: a hop costs what the library costs
        return ch.put.__self__.statistics().max_buffer_size

    b = load(spec)
    assert b.run(main, b) == buffer


@pytest.mark.parametrize("capacity", [-1, 1.5])
def test_bad_capacity_is_named(capacity):
    with pytest.raises(
        ValueError, match=f"channel capacity must be None or an int >= 0, got {capacity}"
    ):
        load("trio").channel(capacity)


@pytest.mark.parametrize("spec", SPECS)
def test_channels_are_closed_when_their_run_ends(spec):
    async def main(b):
        return b.channel(0), b.channel(None)

    b = load(spec)
    for ch in b.run(main, b):  # closed: anyio cannot warn when they are collected
        stats = ch.put.__self__.statistics()
        kind = (
            "streams" if hasattr(stats, "open_send_streams") else "channels"
        )  # anyio's names, trio's
        assert (getattr(stats, f"open_send_{kind}"), getattr(stats, f"open_receive_{kind}")) == (
            0,
            0,
        )


# --- tasks ------------------------------------------------------------------------------


class Abort(BaseException):
    pass


async def _raise_base(b):
    raise Abort("not an Exception")


async def _park_until_cancelled(b, ch, log):
    try:
        await ch.get()  # nothing is ever put
    finally:
        log.append("cancelled")


@pytest.mark.parametrize("spec", SPECS)
def test_errors_come_out_as_themselves_not_as_exception_groups(spec):
    async def main_raises(b):
        raise KeyError("from main")

    async def task_raises_base_exception(b):
        await b.spawn(_raise_base, b).join()

    b = load(spec)
    with pytest.raises(KeyError, match="from main"):
        b.run(main_raises, b)
    with pytest.raises(Abort, match="not an Exception"):
        b.run(task_raises_base_exception, b)


@pytest.mark.timeout(60)  # waiting for the parked task would hang
@pytest.mark.parametrize("spec", SPECS)
def test_tasks_alive_when_main_returns_are_cancelled_not_awaited(spec):
    log = []

    async def main(b):
        b.spawn(_park_until_cancelled, b, b.channel(0), log)
        await b.sleep(0.01)  # let it start
        return "main done"

    b = load(spec)
    assert b.run(main, b) == "main done"
    assert log == ["cancelled"]


@pytest.mark.parametrize("spec", SPECS)
def test_nested_run_is_refused_and_the_outer_run_goes_on(spec):
    async def inner(b):
        return "inner"

    async def outer(b):
        with pytest.raises(
            RuntimeError, match=r"run\(\) called inside a running .* run\(\); await main instead"
        ):
            b.run(inner, b)
        ch = b.channel(0)  # the refused call left the outer run's group and channels alone
        b.spawn(ch.put, "still running")
        return await ch.get()

    b = load(spec)
    assert b.run(outer, b) == "still running"


def test_spawn_outside_run_names_the_fix():
    b = load("anyio[asyncio]")
    with pytest.raises(
        RuntimeError,
        match=r"anyio\[asyncio\]: spawn\(\) must be called inside anyio\[asyncio\] run\(\)",
    ):
        b.spawn(_raise_base, b)


TASK_FAILS = """
async def worker(x):
    raise ValueError(f"bad item {x}")


def test_joined(concurrency_backend):
    b = concurrency_backend

    async def main():
        await b.spawn(worker, 3).join()

    b.run(main)


def test_unjoined(concurrency_backend):
    b = concurrency_backend

    async def main():
        b.spawn(worker, 4)
        await b.sleep(0.05)

    b.run(main)
"""


@pytest.mark.skipif(not INSTALLED, reason="neither trio nor anyio installed")
def test_failed_task_fails_the_test_naming_the_backend(pytester):
    pytester.makepyfile(test_fails=TASK_FAILS)
    result = pytester.runpytest_subprocess(
        f"--concurrency-backends={','.join(INSTALLED)}", timeout=120
    )
    result.assert_outcomes(failed=2 * len(INSTALLED))
    for spec in INSTALLED:
        result.stdout.fnmatch_lines(
            [_lit(f"*TaskFailed: [{spec}] task worker raised ValueError: bad item 3")]
        )
        result.stdout.fnmatch_lines(
            [_lit(f"*TaskFailed: [{spec}] task worker raised ValueError: bad item 4")]
        )
    assert "ExceptionGroup" not in result.stdout.str()


# --- stalls -----------------------------------------------------------------------------


STALLS = """
import time


async def block_the_loop(b):
    time.sleep(30)  # a synchronous call: the loop cannot run the watchdog's cancellation


def test_blocked_loop(concurrency_backend):
    b = concurrency_backend

    async def main():
        await b.spawn(block_the_loop, b).join()

    b.run(main)


def test_deadlocked_tasks(concurrency_backend):
    b = concurrency_backend

    async def wait_for(ch):
        return await ch.get()

    async def main():
        first, second = b.channel(0), b.channel(0)
        b.spawn(wait_for, first)
        await second.get()

    b.run(main)


def test_after(concurrency_backend):
    # The model still works after both kinds of stop, in the same process.
    b = concurrency_backend

    async def main():
        ch = b.channel(0)
        b.spawn(ch.put, 41)
        return await ch.get() + 1

    assert b.run(main) == 42
"""


@pytest.mark.skipif(not INSTALLED, reason="neither trio nor anyio installed")
@pytest.mark.parametrize(
    "models",
    [
        pytest.param(
            [s for s in INSTALLED if s in ("trio", "anyio[asyncio]")] or INSTALLED[:1],
            id="trio-and-anyio",
        ),
        pytest.param(INSTALLED, id="every-variant", marks=pytest.mark.slow),
    ],
)
def test_stall_fails_after_the_timeout_on_trio_and_anyio(pytester, models):
    # trio's scheduler must never see the timeout: raised into it, trio reports a
    # TrioInternalError and abandons its tasks. A cancelled run comes back as Stopped,
    # which the report must not show either: the stall is the news.
    pytester.makepyfile(test_stalls=STALLS)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-W",
        "error",
        "--concurrency-timeout=1",
        f"--concurrency-backends={','.join(models)}",
        "-p",
        "no:randomly",
        timeout=240,
    )
    result.assert_outcomes(failed=2 * len(models), passed=len(models))
    for spec in models:
        result.stdout.fnmatch_lines(
            [
                _lit(
                    f"test_stalls.py::test_blocked_loop[{spec}]: {spec} run(test_blocked_loop.<locals>.main) "
                    "did not return within 1 s (deadlock or stall?). Blocked at:"
                ),
                "  running (holding the loop):",
                "*test_stalls.py:* in block_the_loop: time.sleep(30)*",
            ]
        )
        result.stdout.fnmatch_lines(
            [
                _lit(
                    f"test_stalls.py::test_deadlocked_tasks[{spec}]: {spec} run(test_deadlocked_tasks.<locals>.main) "
                    "did not return within 1 s (deadlock or stall?). Blocked at:"
                ),
            ]
        )
        # one call per task: asyncio lists its tasks in no fixed order
        result.stdout.fnmatch_lines(
            [
                "  task test_deadlocked_tasks.<locals>.main*:",
                "*test_stalls.py:* in main: await second.get()",
            ]
        )
        result.stdout.fnmatch_lines(
            ["  task *wait_for*:", "*test_stalls.py:* in wait_for: return await ch.get()"]
        )
    out = result.stdout.str()
    for noise in ("TrioInternalError", "ExceptionGroup", "Stopped", "RuntimeError"):
        assert noise not in out, noise
    # each stall ends after 1 s (+1 s grace for the blocked loop), not after the 30 s sleep
    assert time.monotonic() - started < 30 * len(models)


# --- warnings as errors, and the README's recipe -------------------------------------------


ANYIO_LIBRARY = """
import pytest


async def fan_out(b, n):
    results = b.channel(None)

    async def one(i):
        await b.sleep(0)
        await results.put(i)

    for i in range(n):
        b.spawn(one, i)
    return sorted([await results.get() for _ in range(n)])


@pytest.mark.concurrency(backends=["anyio[asyncio]", "anyio[trio]"])
def test_my_fan_out(benchmark, concurrency_backend):
    got = benchmark.pedantic(concurrency_backend.run, args=(fan_out, concurrency_backend, 50), rounds=3)
    assert got == list(range(50))
"""


@pytest.mark.skipif(
    backends.unavailable_reason("anyio[trio]") is not None,
    reason="anyio and trio not both installed",
)
@pytest.mark.slow
def test_every_workload_and_the_recipe_run_clean_under_warnings_as_errors(pytester):
    from pathlib import Path

    seeds = Path(__file__).parents[1] / "benchmarks" / "test_seeds.py"
    pytester.makepyfile(test_seeds=seeds.read_text(), test_library=ANYIO_LIBRARY)
    result = pytester.runpytest_subprocess(
        "-v",
        "-W",
        "error",
        "--benchmark-only",
        "--concurrency-scale=smoke",
        "--concurrency-rounds=3",
        f"--concurrency-backends={','.join(INSTALLED)}",
        "-p",
        "no:randomly",
        timeout=240,
    )
    # the recipe's marker narrows it to its two models, whatever the command line selects
    result.stdout.fnmatch_lines(
        [
            "*test_my_fan_out[[]anyio[[]asyncio]] PASSED*",
            "*test_my_fan_out[[]anyio[[]trio]] PASSED*",
        ]
    )
    outcomes = result.parseoutcomes()
    assert (
        outcomes.get("passed", 0) > 2 * len(INSTALLED)
        and "failed" not in outcomes
        and "errors" not in outcomes
    ), result.stdout.str()
    assert "Warning" not in result.stdout.str()


def test_marker_selects_models_outside_the_default_run_unless_the_command_line_narrows(pytester):
    pytester.makepyfile(test_library=ANYIO_LIBRARY)
    plain = pytester.runpytest("-v", "--benchmark-disable")  # no selection: the marker's two models
    plain.assert_outcomes(passed=2)
    narrowed = pytester.runpytest(
        "-v", "--benchmark-disable", "--concurrency-backends=asyncio,anyio[trio]"
    )
    narrowed.assert_outcomes(passed=1)
    narrowed.stdout.fnmatch_lines(["*test_my_fan_out[[]anyio[[]trio]] PASSED*"])
