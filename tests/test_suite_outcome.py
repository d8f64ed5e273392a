"""The plugin never changes the outcome of the suite it joins: no benchmarked function is called
after its test has ended, and no warning of the plugin's reaches a suite run with
``filterwarnings = error``.

The suite below is the shape that broke a real asyncio library's build: its event loop and its
loopback server are fixtures, its benchmark calls ``loop.run_until_complete``, and its ini turns
every warning into an error. Each call of the benchmarked function is written to a file with
whether its fixtures were alive, so that a call after teardown (the session's end timing a
suspect again used to make six of them) fails the test that looks, not only the suite.
``--concurrency-remeasure=every`` makes every benchmark's first verdict want a second session (its
test run again in a fresh process), as load does on a shared runner, without needing the load.
"""

import json
import re
from pathlib import Path

import pytest

PYPROJECT = (Path(__file__).parent / "data" / "mylib.pyproject.toml").read_text()

SUITE = """
import asyncio
import os

import pytest

CALLS = os.environ["CALLS_FILE"]


def said(what):
    with open(CALLS, "a") as fh:
        fh.write(what + "\\n")


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def server(loop):
    async def echo(reader, writer):
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    served = loop.run_until_complete(asyncio.start_server(echo, "127.0.0.1", 0))
    state = {"port": served.sockets[0].getsockname()[1], "alive": True}
    yield state
    state["alive"] = False
    served.close()
    loop.run_until_complete(served.wait_closed())


def test_round_trip(benchmark, loop, server):
    async def once():
        reader, writer = await asyncio.open_connection("127.0.0.1", server["port"])
        writer.write(b"ping\\n")
        await writer.drain()
        assert await reader.readline() == b"ping\\n"
        writer.close()
        await writer.wait_closed()

    def call():
        said("alive" if server["alive"] else "torn down")
        loop.run_until_complete(once())  # a closed loop: "Event loop is closed", never awaited

    benchmark.pedantic(call, rounds=5, warmup_rounds=1)


def test_pure(benchmark, loop):
    benchmark(sum, range(200))


def test_model(benchmark, concurrency_backend, server):
    async def hop():
        return 1

    def call():
        said("model-alive" if server["alive"] else "torn down")
        return concurrency_backend.run(hop)

    assert benchmark.pedantic(call, rounds=5) == 1
"""

INI = """
[pytest]
filterwarnings =
    error
"""

#: a high threshold: the A/A must pass on a loaded machine; the subject is the second session.
#: One model for test_model (with --concurrency-isolate, its calls run in a child of their own)
ARGS = (
    "--benchmark-only",
    "--concurrency-threshold=500",
    "-p",
    "no:cacheprovider",
    "--concurrency-backends=asyncio",
    "--benchmark-max-time=0.05",  # test_pure's rounds: how many is not the subject here
)


@pytest.fixture
def suite(pytester, monkeypatch):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(INI)
    calls = pytester.path / "calls.txt"
    monkeypatch.setenv("CALLS_FILE", str(calls))
    return pytester, calls


def _phases(calls) -> list[str]:
    return calls.read_text().split() if calls.exists() else []


# ~8 s alone (16 s in the fast tier's parallel run): two sessions of three small benchmarks, the
# second with a second session of each (a fresh process). In the session's process on every Python:
# the fast tier's one real session of the time gate (how an event loop's teardown goes differs
# between Pythons); isolated with the memory pass (one session for both) in the slow tier.
@pytest.mark.parametrize(
    "mode",
    [
        pytest.param((), id="in-process"),
        pytest.param(
            ("--concurrency-isolate", "--concurrency-memory"),
            id="isolate-memory",
            # ~12 s: its memory pass, and a child per test, twice
            marks=[pytest.mark.slow, pytest.mark.essential],
        ),
    ],
)
def test_a_second_session_runs_the_tests_again_and_adds_no_warning(suite, mode):
    pytester, calls = suite
    base = pytester.path / "base.json"
    saved = pytester.runpytest_subprocess(*ARGS, *mode, f"--concurrency-save-baseline={base}")
    saved.assert_outcomes(passed=3)
    first = len(_phases(calls))
    judged = pytester.runpytest_subprocess(
        *ARGS, *mode, f"--concurrency-baseline={base}", "--concurrency-remeasure=every"
    )
    out = judged.stdout.str() + judged.stderr.str()
    assert judged.ret == 0, out
    judged.assert_outcomes(passed=3, warnings=0)
    assert "Traceback" not in out and "Exception" not in out, out  # none unraisable either
    phases = _phases(calls)
    assert "torn down" not in phases, phases
    # the second session's rounds were taken, in tests run again: more calls than the first
    # session made, all alive; a model's test too (isolated: in the child its rounds ran in)
    assert len(phases) - first > first, (first, len(phases))
    model = [phases[:first].count("model-alive"), phases[first:].count("model-alive")]
    assert model[1] >= model[0] + 5, model  # its 5 rounds again (pedantic's rounds=5)
    assert "could not be" not in out and "first verdict stands" not in out


@pytest.mark.once
def test_a_suspect_not_measured_again_keeps_its_first_verdict_and_says_why(tmp_path):
    """In-process and cheap: what ``for_suspects`` hands the session's end, when the fresh
    process measured some of the suspects and not others."""
    from types import SimpleNamespace

    from pytest_concurrency.measure.records import Record
    from pytest_concurrency.roles import remeasure

    rec = Record("w", {}, "asyncio", "", [1.0, 1.0, 1.0], {})
    second = remeasure.SecondSessions(None, SimpleNamespace(remeasure="suspects"))
    second._run = lambda ids, found: found.update({rec.key: rec}) or ""
    keys = [rec.key, ("x", "", "asyncio"), ("y", "", "gevent")]
    found, messages = second.for_suspects(
        keys, [], {rec.key: "t.py::w", ("x", "", "asyncio"): "t.py::x"}
    )
    assert found == {rec.key: rec}
    assert len(messages) == 2 and all("first verdict stands" in m for m in messages)
    assert "recorded no rounds there" in messages[0] and "x on asyncio" in messages[0]
    second._run = lambda ids, found: "the fresh process exited 4: no such option"
    found, messages = second.for_suspects(keys[:1], [], {rec.key: "t.py::w"})
    assert found == {} and "exited 4: no such option" in messages[0]


# ~60 s alone (130 s loaded): two counted sessions under valgrind; not essential, as counted
# against the base below runs counted sessions of the same strict suite
@pytest.mark.slow
def test_a_counted_session_adds_no_warning_to_a_strict_suite(suite):
    pytester, calls = suite
    base = pytester.path / "base.json"
    counted = ("--concurrency-measure=instructions", "--concurrency-layouts=1")
    saved = pytester.runpytest_subprocess(*ARGS, *counted, f"--concurrency-save-baseline={base}")
    assert saved.ret == 0, saved.stdout.str() + saved.stderr.str()
    judged = pytester.runpytest_subprocess(*ARGS, *counted, f"--concurrency-baseline={base}")
    out = judged.stdout.str() + judged.stderr.str()
    assert judged.ret == 0, out
    judged.assert_outcomes(passed=3, warnings=0)
    assert "Traceback" not in out and "Exception" not in out, out
    assert "torn down" not in _phases(calls)
    assert json.loads(base.read_text())["pytest_concurrency"]["measure"] == "instructions"


LIB = """
def work(n=2000):
    return sum(i * i for i in range(n))
"""

LIB_SUITE = (
    SUITE
    + """

import mylib


def test_library(benchmark, loop):
    assert benchmark(mylib.work) == sum(i * i for i in range(2000))
"""
)


@pytest.mark.slow  # the base side installed, two sessions of 3 benchmarks: ~40 s timed, ~100 s counted
@pytest.mark.essential
@pytest.mark.parametrize("measure", ["time", "instructions"])
def test_against_the_base_adds_no_warning_to_a_strict_suite(suite, measure):
    pytester, calls = suite
    for root in (pytester.path, pytester.path / "base"):  # the same code on both sides
        (root / "mylib").mkdir(parents=True)
        (root / "mylib" / "__init__.py").write_text(LIB)
        (root / "pyproject.toml").write_text(PYPROJECT.format(version="1.0"))
    pytester.makepyfile(test_suite=LIB_SUITE)
    layouts = ("--concurrency-layouts=1",) if measure == "instructions" else ()
    result = pytester.runpytest_subprocess(
        *ARGS, f"--concurrency-measure={measure}", *layouts, "--concurrency-against=base"
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    assert "Traceback" not in out and "Exception" not in out and "Warning" not in out, out
    assert "unchanged" in out and not re.search(r"\b[1-9]\d* regress|REGRESSED", out), out
    assert "torn down" not in _phases(calls)
