"""The regression gate through real pytest sessions: save, compare, fail, report.

These check the gate's mechanics, not its statistics (evidence/gate_evidence.py measures
those on realistic noise): the workload is timer-dominated (each round sleeps 20 ms on
the model's own timer), the threshold is 20%, and the injected slowdown is +60% on one
backend, chosen by an environment variable. Noise cannot be mistaken for either; and as
timers do not scale with CPU speed, normalizing by the calibration is turned off.
"""

from __future__ import annotations

import json

import pytest

#: In a test project: whether this is the first process to call it with ``path`` (it makes the file).
FIRST_PROCESS = """
import os


def first_process(path):
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False
"""

NAP = (
    FIRST_PROCESS
    + '''
import os
from pytest_concurrency.workloads import Outcome


class Nap:
    """Two tasks each sleep `ms` on the model's timer, joined: one real run per round."""
    name = "nap"
    unit = "task"

    def cases(self, scale):
        return [{"ms": 20}]

    def rounds(self, scale):
        return 10, 1

    def unsupported(self, backend, params):
        return None

    slow_here = None

    def run(self, backend, params):
        seconds = params["ms"] / 1000
        if backend.name == os.environ.get("SLOW_BACKEND"):
            if Nap.slow_here is None:
                # SLOW_ONCE=FILE: only the first process to run it is slow, like a process whose
                # layout or neighbour slowed it for its whole life (the file says one was)
                once = os.environ.get("SLOW_ONCE")
                Nap.slow_here = not once or first_process(once)
            if Nap.slow_here:
                seconds *= 1.6
        if backend.family == "async":
            async def main():
                tasks = [backend.spawn(backend.sleep, seconds) for _ in range(2)]
                for t in tasks:
                    await t.join()
        else:
            def main():
                tasks = [backend.spawn(backend.sleep, seconds) for _ in range(2)]
                for t in tasks:
                    t.join()
        backend.run(main)
        return Outcome(2)


NAP = Nap()
'''
)

TEST = """
import pytest

@pytest.mark.concurrency(workloads=["naps:NAP"])
def test_nap(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(naps=NAP, test_naps=TEST)
    return pytester


# Tests that judge wall time run alone (``serial``) in the slow tier: beside other work the gate
# rightly calls a slowdown inconclusive, so a contributor's busy machine would fail them. The fast
# tier saves and judges time on every Python in tests/test_suite_outcome.py (an A/A, a second
# session in the test). The usage errors run anywhere.
def run(suite, *args, backends="asyncio,threading,greenlet"):
    return suite.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-threshold=20",
        "--concurrency-machine-tolerance=900",
        f"--concurrency-backends={backends}",
        *args,
    )


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.essential
def test_aa_passes_and_slowdown_fails_naming_the_backend(suite, monkeypatch):
    base = suite.path / "base.json"
    run(suite, f"--concurrency-save-baseline={base}").assert_outcomes(passed=3)
    doc = json.loads(base.read_text())
    assert doc["pytest_concurrency"]["python"]["minor"]
    assert all(b["stats"]["data"] for b in doc["benchmarks"])  # raw samples kept

    same = run(suite, f"--concurrency-baseline={base}")
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*Gate: 0 regressions*"])

    monkeypatch.setenv("SLOW_BACKEND", "greenlet")
    slow = run(suite, f"--concurrency-baseline={base}")
    assert slow.ret == pytest.ExitCode.TESTS_FAILED
    slow.stdout.fnmatch_lines(["*Gate: 1 regression*", "*nap[[]ms=20] on greenlet*+*%*p=*"])
    out = slow.stdout.str()
    assert "reproduced by a second session" in " ".join(out.split())
    assert "on asyncio: " not in out.split("Regressions")[1].split("\n\n")[0]


@pytest.mark.slow
@pytest.mark.serial
def test_a_slowdown_that_does_not_reproduce_does_not_fail_the_build(suite, monkeypatch):
    base = suite.path / "base.json"
    run(suite, f"--concurrency-save-baseline={base}").assert_outcomes(passed=3)
    monkeypatch.setenv("SLOW_BACKEND", "greenlet")
    monkeypatch.setenv("SLOW_ONCE", str(suite.path / "slowed"))  # the session's process only
    result = run(suite, f"--concurrency-baseline={base}")
    out = " ".join(result.stdout.str().split())
    assert result.ret == 0, out
    assert "not reproduced: the first session measured +" in out
    assert (
        "1 suspected regression(s) re-measured in a second session (their tests run again in a fresh process), 0 reproduced"
        in out
    )


@pytest.mark.slow
@pytest.mark.serial
def test_faster_run_is_reported_as_stale_baseline(suite, monkeypatch):
    base = suite.path / "base.json"
    monkeypatch.setenv("SLOW_BACKEND", "asyncio")
    run(suite, f"--concurrency-save-baseline={base}").assert_outcomes(passed=3)
    monkeypatch.delenv("SLOW_BACKEND")
    result = run(suite, f"--concurrency-baseline={base}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*1 improved*", "*baseline is stale*refresh*"])


@pytest.mark.slow
@pytest.mark.serial
def test_new_and_missing_benchmarks_are_listed(suite):
    base = suite.path / "base.json"
    run(suite, f"--concurrency-save-baseline={base}", backends="asyncio,threading").assert_outcomes(
        passed=2
    )
    result = run(suite, f"--concurrency-baseline={base}", backends="asyncio,greenlet")
    out = result.stdout.str()
    assert "1 new" in out and "1 missing" in out, out
    result.stdout.fnmatch_lines(["*nap[[]ms=20] on greenlet*", "*nap[[]ms=20] on threading*"])


@pytest.mark.slow
@pytest.mark.serial
def test_baseline_from_another_python_is_refused_unless_allowed(suite):
    base = suite.path / "base.json"
    run(suite, f"--concurrency-save-baseline={base}", backends="asyncio").assert_outcomes(passed=1)
    doc = json.loads(base.read_text())
    doc["pytest_concurrency"]["python"]["minor"] = "3.9"
    doc["pytest_concurrency"]["python"]["version"] = "3.9.18"
    base.write_text(json.dumps(doc))
    refused = run(suite, f"--concurrency-baseline={base}", backends="asyncio")
    assert refused.ret != 0
    out = " ".join(refused.stdout.str().split())  # the explanation wraps at 80 columns
    assert "recorded on CPython 3.9.18 and this run is CPython 3." in out
    assert "--concurrency-allow-cross-python" in out
    allowed = run(
        suite,
        f"--concurrency-baseline={base}",
        "--concurrency-allow-cross-python",
        backends="asyncio",
    )
    assert allowed.ret == 0, allowed.stdout.str()


@pytest.mark.slow
@pytest.mark.serial
def test_markdown_report_is_written(suite, monkeypatch):
    base, md = suite.path / "base.json", suite.path / "out" / "report.md"
    md.parent.mkdir()
    run(suite, f"--concurrency-save-baseline={base}").assert_outcomes(passed=3)
    # greenlet, not threads: a thread's slowdown on a busier machine is inconclusive (the load rule)
    monkeypatch.setenv("SLOW_BACKEND", "greenlet")
    run(suite, f"--concurrency-baseline={base}", f"--concurrency-report-md={md}")
    text = md.read_text()
    assert "| backend |" in text
    regressed_rows = [
        line for line in text.splitlines() if line.startswith("|") and "REGRESSED" in line
    ]
    assert len(regressed_rows) == 1 and "greenlet" in regressed_rows[0], text


@pytest.mark.once
@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        ("", "empty"),
        ('{"benchmarks": [', "is truncated"),
        ('{"benchmarks": [], "machine_info": {}}', "is a plain pytest-benchmark file"),
        ('{"results": []}', "JSON from another tool"),
    ],
    ids=["missing", "empty", "truncated", "pytest-benchmark", "other-tool"],
)
def test_bad_baseline_is_a_usage_error_before_any_benchmark_runs(suite, content, message):
    base = suite.path / "base.json"
    if content is not None:
        base.write_text(content)
    result = run(suite, f"--concurrency-baseline={base}", backends="asyncio")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str(), result.stderr.str()
    assert "passed" not in result.stdout.str()  # refused up front, not after a long run


def sessions_in(path) -> dict:
    """backend -> how many sessions of it the baseline file holds."""
    doc = json.loads(path.read_text())
    counts = {b["extra_info"]["backend"]: 1 for b in doc["benchmarks"]}
    for entry in doc["pytest_concurrency"]["history"]:
        for b in entry["benchmarks"]:
            counts[b["backend"]] += 1
    return counts


@pytest.mark.slow
@pytest.mark.serial
def test_saving_again_adds_a_session_and_a_speed_change_restarts_that_benchmark(suite, monkeypatch):
    base = suite.path / "base.json"
    for n in (1, 2, 3):
        result = run(suite, f"--concurrency-save-baseline={base}")
        result.stdout.fnmatch_lines(
            [f"*baseline with 3 benchmarks written to*({n} session(s), at most 5 kept)*"]
        )
    assert sessions_in(base) == {"asyncio": 3, "threading": 3, "greenlet": 3}

    monkeypatch.setenv("SLOW_BACKEND", "greenlet")  # the code changed: greenlet is 60% slower now
    result = run(
        suite, f"--concurrency-save-baseline={base}"
    )  # one session cannot tell it from a disturbance
    out = " ".join(result.stdout.str().split())
    assert "nap[ms=20] on greenlet measured +" in out and "flagged disturbed" in out
    assert sessions_in(base) == {"asyncio": 4, "threading": 4, "greenlet": 4}
    result = run(
        suite, f"--concurrency-save-baseline={base}"
    )  # a second one confirms the new speed
    out = " ".join(result.stdout.str().split())
    assert (
        "nap[ms=20] on greenlet changed speed (+" in out
        and "earlier baseline sessions were dropped" in out
    )
    assert sessions_in(base) == {"asyncio": 5, "threading": 5, "greenlet": 1}

    run(suite, f"--concurrency-save-baseline={base}", "--concurrency-baseline-sessions=1")
    assert sessions_in(base) == {"asyncio": 1, "threading": 1, "greenlet": 1}


@pytest.mark.slow
@pytest.mark.serial
def test_a_baseline_of_several_sessions_gates_like_one(suite, monkeypatch):
    base = suite.path / "base.json"
    for _ in range(3):
        run(
            suite, f"--concurrency-save-baseline={base}", backends="asyncio,greenlet"
        ).assert_outcomes(passed=2)
    same = run(suite, f"--concurrency-baseline={base}", backends="asyncio,greenlet")
    assert same.ret == 0, same.stdout.str()
    monkeypatch.setenv("SLOW_BACKEND", "asyncio")
    slow = run(suite, f"--concurrency-baseline={base}", backends="asyncio,greenlet")
    assert slow.ret == pytest.ExitCode.TESTS_FAILED
    slow.stdout.fnmatch_lines(["*Gate: 1 regression*", "*nap[[]ms=20] on asyncio*+*%*p=*"])


@pytest.mark.once
def test_save_refuses_to_overwrite_a_file_that_is_not_a_baseline(suite):
    notes = suite.path / "notes.json"
    notes.write_text("my notes\n")
    result = run(suite, f"--concurrency-save-baseline={notes}", backends="asyncio")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "exists and is not a baseline" in result.stderr.str()
    assert notes.read_text() == "my notes\n"


@pytest.mark.slow
@pytest.mark.serial
def test_a_busier_machine_makes_a_threading_slowdown_inconclusive(suite, monkeypatch):
    import subprocess
    import sys

    base = suite.path / "base.json"
    run(suite, f"--concurrency-save-baseline={base}", backends="threading").assert_outcomes(
        passed=1
    )
    monkeypatch.setenv("SLOW_BACKEND", "threading")
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # keeps one core busy
    try:
        result = run(suite, f"--concurrency-baseline={base}", backends="threading")
    finally:
        hog.kill()
        hog.wait()
    out = " ".join(result.stdout.str().split())
    assert result.ret == 0, out[
        out.find("Gate:") :
    ]  # the verdicts, not the tables a report would cut
    # with one core of two busy, the starved rule names it first (gate/interference.py)
    assert "cannot be told from the load" in out and (
        "threads need free cores" in out or "less than one free core of 2" in out
    )


PLAIN = (
    FIRST_PROCESS
    + """
import os, time
import pytest

SLOW = 2.5 if os.environ.get("SLOW") else 1.0


# slow in the first process that imports it only: an offset of that process, not of the code
BURST = SLOW if SLOW > 1 and first_process(os.environ["BURST_FILE"]) else 1.0


def nap(ms):
    time.sleep(ms / 1000)


def test_slow(benchmark):
    benchmark.pedantic(nap, args=(20 * SLOW,), rounds=15)


def test_burst(benchmark):
    benchmark.pedantic(nap, args=(20 * BURST,), rounds=15)


@pytest.fixture
def resource():
    state = {"open": True}
    yield state
    state["open"] = False


def test_closed(benchmark, resource):
    def once():
        if not resource["open"]:
            raise RuntimeError("the resource is closed")
        nap(20 * SLOW)
    benchmark.pedantic(once, rounds=15)
"""
)


@pytest.mark.slow
@pytest.mark.serial  # ~8 s: three tests of 15 rounds of 20-50 ms sleeps, two sessions
def test_a_users_own_test_is_timed_again_before_its_regression_fails_the_build(
    pytester, monkeypatch
):
    pytester.makepyfile(test_plain=PLAIN)
    base = pytester.path / "base.json"
    args = (
        "--concurrency-threshold=20",
        "--concurrency-machine-tolerance=900",
        "-p",
        "no:randomly",
    )
    saved = pytester.runpytest_subprocess(
        "--benchmark-only", f"--concurrency-save-baseline={base}", *args
    )
    saved.assert_outcomes(passed=3)
    monkeypatch.setenv("SLOW", "1")
    monkeypatch.setenv("BURST_FILE", str(pytester.path / "burst"))
    result = pytester.runpytest_subprocess(
        "--benchmark-only", f"--concurrency-baseline={base}", *args
    )
    out = " ".join(result.stdout.str().split())
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    # test_closed's second session too: its test run again, its fixture set up again
    said = "3 suspected regression(s) re-measured in a second session (their tests run again in a fresh process), 2 reproduced"
    assert said in out, out
    assert (
        "test_plain.py::test_burst: " in out
        and "not reproduced: the first session measured +" in out
    )
    assert "the resource is closed" not in out and "first verdict stands" not in out
    regressions = out.split("Regressions")[1]
    assert "test_plain.py::test_slow: " in regressions and "reproduced by a second session" in out
    assert "test_plain.py::test_closed: " in regressions
