"""A stored counted gate's counts that moved, counted again in a session started otherwise
(roles/recount.py, gate/recounted.py): a change of the code moves them there too; a count that
follows how its process started does not, and reads inconclusive, never unchanged. And each save
into a counted baseline starts otherwise than the sessions already in it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import needs

from pytest_concurrency.backends import child_env
from pytest_concurrency.gate import recounted
from pytest_concurrency.gate.recounted import IMPROVED, INCONCLUSIVE, REGRESSED
from pytest_concurrency.gate.verdicts import UNCHANGED, GateResult, Verdict
from pytest_concurrency.measure import callgrind
from pytest_concurrency.measure.records import Record
from pytest_concurrency.roles import counting
from pytest_concurrency.roles.argv import started_otherwise
from pytest_concurrency.store import baseline

needs_valgrind = needs("valgrind", callgrind.unavailable_reason())
DATA = Path(__file__).parent / "data"


def _verdict(name: str, status: str, change: float) -> Verdict:
    return Verdict((name, "", ""), status, change=change, measure="instructions")


def _record(name: str, samples: list, **extra) -> Record:
    return Record(name, {}, "", samples, extra={"measure": "instructions", **extra})


def test_only_counts_that_moved_either_way_are_suspects():
    result = GateResult(
        [
            _verdict("up", REGRESSED, 0.03),
            _verdict("down", IMPROVED, -0.02),
            _verdict("same", UNCHANGED, 0.001),
            _verdict("unsure", INCONCLUSIVE, 0.012),
        ]
    )
    assert recounted.suspects(result) == [("up", "", ""), ("down", "", "")]


def test_a_move_stands_only_where_the_second_start_up_moved_it_the_same_way():
    first = GateResult(
        [
            _verdict("real", REGRESSED, 0.031),
            _verdict("drawn", REGRESSED, 0.012),
            _verdict("flipped", IMPROVED, -0.015),
            _verdict("untouched", UNCHANGED, 0.0),
        ]
    )
    second = GateResult(
        [
            _verdict("real", REGRESSED, 0.029),
            _verdict("drawn", UNCHANGED, 0.001),
            _verdict("flipped", REGRESSED, 0.013),
            _verdict("untouched", UNCHANGED, 0.0),
        ]
    )
    again = {v.key: _record(v.key[0], [1.0]) for v in first.verdicts[:3]}
    result = recounted.reproduce(first, second, again)
    status = {v.key[0]: v.status for v in result.verdicts}
    assert status == {
        "real": REGRESSED,
        "drawn": INCONCLUSIVE,
        "flipped": INCONCLUSIVE,
        "untouched": UNCHANGED,
    }
    notes = {v.key[0]: v.note for v in result.verdicts}
    assert "moved in a second session started otherwise too (first +3.10%)" in notes["real"]
    assert "+1.20% in this session, +0.10% in a second one started otherwise" in notes["drawn"]
    assert result.notes[0].startswith("3 count(s) that moved counted again")
    assert result.notes[0].endswith("1 moved there too")


def test_the_second_session_gives_its_rounds_and_the_first_keeps_its_other_figures():
    first = [
        _record("moved", [100.0, 101.0], layouts=[[102.0]], syscalls_per_op=3.0),
        _record("kept", [50.0], layouts=[[50.0]]),
    ]
    again = {("moved", "", ""): _record("moved", [90.0, 91.0], layouts=[[92.0], [93.0]])}
    moved, kept = recounted.replaced(first, again)
    assert moved.samples == [90.0, 91.0] and moved.layouts == [[90.0, 91.0], [92.0], [93.0]]
    assert moved.extra["syscalls_per_op"] == 3.0  # the first session's kernel figure
    assert kept is first[1]


#: Two counted tests: one whose work grows with what the process was started with (its command
#: line names a baseline: the first, judging session's does, the recount's does not), as yarl's
#: URL builds follow the bytes of the command line; one slowed by a variable every process of the
#: judgement inherits, as a change of the code moves every start-up.
SUITE = """
import os
import sys


def test_follows_the_start_up(benchmark):
    extra = 400 if any(a.startswith("--concurrency-baseline") for a in sys.argv) else 0
    benchmark(sorted, list(range(3000 + extra, 0, -1)))


def test_slowed(benchmark):
    extra = 400 if os.environ.get("SLOWED") else 0
    benchmark(sorted, list(range(3000 + extra, 0, -1)))
"""


@pytest.mark.slow  # a counted save, a counted judgement and its recount: 60-120 s, loaded
@pytest.mark.essential
@needs_valgrind
def test_a_moved_count_stands_only_where_a_second_start_up_moves_it_too(pytester, monkeypatch):
    pytester.makepyfile(test_counts=SUITE)
    base, verdicts = pytester.path / "base.json", pytester.path / "verdicts.json"
    counted = ["-p", "no:cacheprovider", "--concurrency-measure=instructions"]
    saved = pytester.runpytest_subprocess(
        *counted, f"--concurrency-save-baseline={base}", timeout=900
    )
    assert saved.ret == 0, saved.stdout.str()
    monkeypatch.setenv("SLOWED", "1")
    judged = pytester.runpytest_subprocess(
        *counted,
        f"--concurrency-baseline={base}",
        f"--concurrency-verdicts={verdicts}",
        timeout=900,
    )
    out = judged.stdout.str()
    judged.stderr.fnmatch_lines(["*2 tests counted again in a session started otherwise*"])
    judged.stdout.fnmatch_lines(
        [
            "*2 count(s) that moved counted again in a session started otherwise*",
            "*1 moved there too",
        ]
    )
    assert judged.ret == 1, out  # the slowdown fails the build; the tests themselves passed
    judged.assert_outcomes(passed=2)
    status = {
        v["key"][0].rpartition("::")[2]: (v["status"], v["note"])
        for v in json.loads(verdicts.read_text())["gate"]["verdicts"]
    }
    assert status["test_slowed"][0] == REGRESSED, status
    assert "moved in a second session started otherwise too" in status["test_slowed"][1]
    assert status["test_follows_the_start_up"][0] == INCONCLUSIVE, status
    assert "its count follows how the process started" in status["test_follows_the_start_up"][1]


def test_a_save_into_a_baseline_of_k_sessions_starts_k_pads_over(tmp_path):
    def saved_before(path) -> int:
        settings = SimpleNamespace(save_baseline=str(path) if path else None)
        return counting.Launcher(None, settings)._saved_before()

    held = tmp_path / "held.json"
    shutil.copy(DATA / "saved_baseline.json", held)
    sessions = len(baseline.load(held).calibrations)
    assert sessions >= 1
    assert saved_before(held) == sessions
    assert saved_before(None) == 0 and saved_before(tmp_path / "absent.json") == 0
    (tmp_path / "junk.json").write_text("not json")  # the counted session says what is wrong
    assert saved_before(tmp_path / "junk.json") == 0
    assert started_otherwise(0) == {}
    (pad,) = started_otherwise(sessions + 1).values()
    assert len(pad) == (sessions + 1) * len(started_otherwise(1)[child_env.START_PAD])
    # a baseline may keep 100 sessions; an environment string holds 128 KiB at most
    assert max(len("".join(started_otherwise(n).values())) for n in range(101)) < 128 * 1024
