"""Controls timed beside the rounds in real sessions (measure/control.py): every way a round is
timed brings one control figure a round, and a baseline saved from them judges the next session
over them. Two real sessions (~10 s in all on the 2-core machine), on one Python: the controls
are the plugin's own arithmetic around pytest-benchmark's rounds."""

import json

import pytest

pytestmark = pytest.mark.once

SUITE = """
import threading
import time


def work(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def test_pure(benchmark):
    assert benchmark(work, 3000) == work(3000)


def test_with_a_model(benchmark, concurrency_backend):
    if concurrency_backend.family == "async":
        async def main():
            return work(3000)
    else:
        def main():
            return work(3000)
    assert benchmark(concurrency_backend.run, main) == work(3000)


def test_waits(benchmark):
    def handed_over():
        # The thread sleeps before it answers, so the round's thread surely blocks in wait():
        # a thread that answers at once can beat the wait on 2 cores (0.286 waits a round in CI).
        done = threading.Event()
        threading.Thread(target=lambda: (time.sleep(0.001), done.set())).start()
        done.wait()

    benchmark(handed_over)


def test_seed(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""

ARGS = (
    "-p",
    "no:cacheprovider",
    "--benchmark-only",
    "--benchmark-max-time=0.05",
    "--concurrency-backends=asyncio",
    "--concurrency-scale=smoke",
    "-k",
    "pure or with_a_model or waits or (seed and ring)",
)


@pytest.mark.slow
@pytest.mark.essential
def test_every_timed_round_carries_its_controls_and_the_next_session_is_judged_over_them(pytester):
    pytester.makepyfile(test_suite=SUITE)
    base = pytester.path / "base.json"
    saved = pytester.runpytest_subprocess(*ARGS, f"--concurrency-save-baseline={base}")
    assert saved.ret == 0, saved.stdout.str()[-3000:]
    doc = json.loads(base.read_text())
    by_name = {b["name"]: b for b in doc["benchmarks"]}
    assert any("seed" in name for name in by_name), sorted(by_name)
    for name, b in by_name.items():
        extra, rounds = b["extra_info"], len(b["stats"]["data"])
        assert len(extra["control_factor"]) == rounds, name
        assert extra["control_version"] >= 1 and extra["control_cost"] > 0, name
    assert by_name["test_waits"]["extra_info"]["control_waits"] >= 1  # its thread waits
    assert by_name["test_pure"]["extra_info"]["control_waits"] < 0.5

    judged = pytester.runpytest_subprocess(
        *ARGS, f"--concurrency-baseline={base}", "--concurrency-report-md=report.md"
    )
    assert judged.ret in (0, 1), judged.stdout.str()[-3000:]  # a verdict, whatever the machine did
    report = (pytester.path / "report.md").read_text()
    assert "decided over its controls" in report or "over its controls" in judged.stdout.str()


def test_rounds_measured_in_a_worker_bring_their_controls(pytester):
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "run.json"
    result = pytester.runpytest_subprocess(
        *ARGS[:-2], "-k", "seed and ring", "--concurrency-isolate", f"--benchmark-json={out}"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    benches = json.loads(out.read_text())["benchmarks"]
    assert benches
    for b in benches:
        extra = b["extra_info"]
        assert len(extra["control_factor"]) == len(b["stats"]["data"]), b["name"]
