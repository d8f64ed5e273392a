"""The fixture and its selection, through real pytest runs (pytester) on real backends."""

from __future__ import annotations

import importlib.util

import pytest

from pytest_concurrency import backends

INSTALLED = [s for s in backends.DEFAULT_SPECS if backends.unavailable_reason(s) is None]


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)


USER_TEST = """
def test_model(concurrency_backend):
    if concurrency_backend.family == "async":
        async def main(b):
            ch = b.channel(1)
            t = b.spawn(ch.put, 41)
            item = await ch.get()
            await t.join()
            return item + 1
    else:
        def main(b):
            ch = b.channel(None)
            ch.put(41)
            return ch.get() + 1
    assert concurrency_backend.run(main, concurrency_backend) == 42
"""


def test_fixture_yields_every_installed_model(pytester):
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(
        passed=len(INSTALLED), skipped=len(backends.DEFAULT_SPECS) - len(INSTALLED)
    )
    for spec in INSTALLED:
        result.stdout.fnmatch_lines([f"*test_model[[]{glob_escape(spec)}] PASSED*"])


def test_all_seven_models_are_params_when_installed(pytester):
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess("--collect-only", "-q")
    ids = [line for line in result.stdout.lines if "test_model[" in line]
    assert len(ids) == 7
    assert any("uvloop" in i for i in ids) and any("multiprocessing[forkserver]" in i for i in ids)


def test_missing_model_is_skipped_with_its_reason(pytester, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "uvloop" else real_find_spec(name, *a),
    )
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest("-rs", "--concurrency-backends=uvloop,asyncio")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*uvloop: uvloop not installed (pip install uvloop)*"])


@pytest.mark.once
def test_unknown_backend_is_a_usage_error_listing_valid_ones(pytester):
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess("--concurrency-backends=gevent,gevnt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown concurrency backend 'gevnt'; valid: threading, multiprocessing*"]
    )


@pytest.mark.once
def test_selection_from_option_and_ini(pytester):
    pytester.makepyfile(USER_TEST)
    pytester.makeini("[pytest]\nconcurrency_backends = threading, asyncio\n")
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess("-v", "--concurrency-backends=asyncio")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_model?asyncio?*PASSED*"])


@pytest.mark.once
def test_marker_narrows_one_test(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.concurrency(backends=["asyncio", "threading"])
        def test_narrow(concurrency_backend):
            assert concurrency_backend.name in ("asyncio", "threading")

        def test_wide(concurrency_backend):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-v", "--concurrency-backends=asyncio,gevent")
    result.stdout.fnmatch_lines(["*test_narrow?asyncio?*PASSED*"])
    assert "test_narrow[threading]" not in result.stdout.str()  # not selected for the session
    assert "test_narrow[gevent]" not in result.stdout.str()
    result.assert_outcomes(passed=3)


def test_task_exception_fails_the_test_naming_the_backend(pytester):
    pytester.makepyfile(
        """
        def boom(n):
            raise ValueError(f"bad input {n}")

        async def aboom(n):
            boom(n)

        def test_failing_task(concurrency_backend):
            b = concurrency_backend
            if b.family == "async":
                async def main():
                    await b.spawn(aboom, 7).join()
            else:
                def main():
                    b.spawn(boom, 7).join()
            b.run(main)
        """
    )
    result = pytester.runpytest_subprocess(
        "--concurrency-backends=threading,gevent,asyncio,greenlet"
    )
    result.assert_outcomes(failed=4)
    for spec in ("threading", "gevent", "asyncio", "greenlet"):
        result.stdout.fnmatch_lines(
            [f"*TaskFailed: [[]{spec}] task *boom raised ValueError: bad input 7*"]
        )


@pytest.mark.skipif(
    backends.unavailable_reason("eventlet") is not None, reason="eventlet not installed"
)
def test_eventlet_under_warnings_as_errors(pytester):
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess("-W", "error", "--concurrency-backends=eventlet")
    result.assert_outcomes(passed=1)


@pytest.mark.once
@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="pytest-xdist not installed")
def test_a_projects_xdist_addopts_are_set_aside_for_a_benchmark_session(pytester):
    """One session: -n in the project's addopts (as many projects have it) neither refuses a
    benchmark session nor measures benchmarks side by side."""
    pytester.makeini("[pytest]\naddopts = --numprocesses=2\n")
    pytester.makepyfile("def test_bench(benchmark):\n    benchmark(sum, range(100))\n")
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-backends=asyncio", "-p", "no:cacheprovider"
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*pytest-xdist's -n 2 set aside: benchmarks are measured one at a time*"]
    )
    result.stdout.fnmatch_lines(["*1 passed*"])
    assert "workers [" not in result.stdout.str()  # no xdist worker ran it


# slow: two sessions, one of them with two xdist workers (the three sessions in one test took
# 52 s of the fast tier's run here, load 5; issue 49)
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="pytest-xdist not installed")
def test_a_projects_xdist_addopts_stay_for_plain_test_runs(pytester):
    """The control: the same addopts in plain test runs keep their workers, as without the plugin."""
    pytester.makeini("[pytest]\naddopts = --numprocesses=2\n")
    pytester.makepyfile("def test_bench(benchmark):\n    benchmark(sum, range(100))\n")
    result = pytester.runpytest_subprocess(
        "--concurrency-backends=asyncio", "-p", "no:cacheprovider"
    )
    assert result.ret == 0 and "set aside" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*2 workers*", "*1 passed*"])  # its workers, as without the plugin
    result = pytester.runpytest_subprocess(
        "--benchmark-disable", "--concurrency-backends=asyncio", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)


@pytest.mark.once
@pytest.mark.parametrize(
    "option, message",
    [
        ("--concurrency-scale=huge", "unknown scale 'huge'; use one of smoke, default, seed"),
        ("--concurrency-threshold=ten", "'ten' is not a percentage; write e.g. 10 or 10%"),
        ("--concurrency-threshold=-5", "out of range"),
        ("--concurrency-timeout=0", "'0' is out of range; allowed: 0.01 to 86,400"),
        ("--concurrency-rounds=many", "'many' is not a number"),
        # the parent "directory" is the test file itself (root may write anywhere else)
        (
            "--concurrency-save-baseline=test_bad_option_values_are_usage_errors.py/b.json",
            "is not a writable directory",
        ),
        ("--concurrency-report-md=.", "is a directory; give a file path"),
    ],
)
def test_bad_option_values_are_usage_errors(pytester, option, message):
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


@pytest.mark.once
def test_unknown_workload_in_marker_names_the_valid_ones(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.concurrency(workloads=["rnig"])
        def test_case(concurrency_case, concurrency_benchmark):
            concurrency_benchmark(concurrency_case)
        """
    )
    result = pytester.runpytest_subprocess("--benchmark-only")
    assert result.ret != 0
    assert (
        "unknown workload 'rnig'; valid: ring, chain, io, spawn, switch"
        in result.stdout.str() + result.stderr.str()
    )


@pytest.mark.once
def test_every_option_the_readme_and_the_ci_recipe_use_exists(pytester):
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    help_text = pytester.runpytest("--help").stdout.str()
    examples = root / "examples"
    for doc in (root / "README.md", *sorted(examples.glob("*.yml"))):
        flags = set(re.findall(r"--concurrency-[a-z]+(?:-[a-z]+)*", doc.read_text()))
        assert flags, doc
        unknown = sorted(f for f in flags if not re.search(re.escape(f) + r"[=\s]", help_text))
        assert not unknown, f"{doc.name} uses options the plugin lacks: {unknown}"


@pytest.mark.once
def test_refusing_to_save_over_a_file_says_what_to_do_instead(pytester):
    pytester.makepyfile(USER_TEST)
    pytester.path.joinpath("notes.json").write_text("my notes, not JSON\n")
    result = pytester.runpytest_subprocess("--concurrency-save-baseline=notes.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "'notes.json' exists and is not a baseline" in err and "is not valid JSON" in err
    assert (
        "to another path, e.g. --concurrency-save-baseline=baseline.json, or move that file away"
        in err
    )
    # the refused command itself is no advice
    assert (
        "re-create it with" not in err
        and "pytest --benchmark-only --concurrency-save-baseline=notes.json" not in err
    )
    assert pytester.path.joinpath("notes.json").read_text() == "my notes, not JSON\n"
