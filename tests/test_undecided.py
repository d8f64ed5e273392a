"""What time leaves undecided is counted on both sides, and the counts decide (gate/undecided.py,
roles/arbiter.py).

The rules on synthetic verdicts (``once``, milliseconds each); then real sessions of a small
library in a git repository, its base commit counted in valgrind (slow: each counted run is a
base side installed apart and two counted runs of the undecided tests). Time is made to leave a
slowdown undecided the way a shared runner does: two busy loops on this 2-core machine leave the
session less than one free core, a state in which the time gate refuses to judge any slowdown
(gate/interference.py), however large.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import need, needs

from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.gate import paired, undecided
from pytest_concurrency.gate.verdicts import (
    IMPROVED,
    INCONCLUSIVE,
    REGRESSED,
    UNCHANGED,
    GateResult,
    Verdict,
)
from pytest_concurrency.measure import callgrind
from pytest_concurrency.roles import arbiter, argv
from pytest_concurrency.session_end import SessionOutcome

WORK = ("test_mylib.py::test_work", "", "")
NAP = ("test_mylib.py::test_nap", "", "")


def _verdict(key, status, change=0.4, **kw) -> Verdict:
    return Verdict(key, status, change=change, p_value=0.2, **kw)


# -- the rules, on synthetic verdicts ------------------------------------------------------------


@pytest.mark.once
def test_a_counted_regression_fails_and_says_time_could_not_decide_it():
    work, nap = _verdict(WORK, INCONCLUSIVE), _verdict(NAP, INCONCLUSIVE, interference="load")
    result = GateResult([work, nap])
    counts = undecided.Counts({WORK: (REGRESSED, 0.98), NAP: (UNCHANGED, 0.0001)}, base="git:abc")
    said = undecided.settle(result.verdicts, [WORK, NAP], counts)
    assert work.status == REGRESSED and result.failed
    assert (
        "time +40.0% undecided: time could not decide it; instructions +98.00% against git:abc: regressed"
        in work.note
    )
    # the I/O-bound one: counts cannot see a longer wait, so it is never read "unchanged"
    assert nap.status == INCONCLUSIVE
    assert said[0].startswith("UNDECIDED: 1 benchmark neither time nor counts could decide")
    assert said[1:] == [
        "test_mylib.py::test_nap: time +40.0% undecided on a loaded machine; instructions "
        f"unchanged (+0.01% against git:abc): {undecided.NOT_IN_COUNTS}"
    ]


@pytest.mark.once
def test_the_counted_verdicts_own_note_is_kept_where_the_verdict_says_it_not_first():
    """How the counted run saw each benchmark (its layouts, where the instructions went) stays in
    the verdict's note: without it zeroconf's false counted +1.50% could not be explained."""
    work, nap = _verdict(WORK, INCONCLUSIVE), _verdict(NAP, INCONCLUSIVE)
    where = "layout by layout +1.50%, +1.50%; where: +1.0M instr/call: _Py_dict_lookup +218k"
    counts = undecided.Counts(
        {WORK: (REGRESSED, 0.015), NAP: (UNCHANGED, 0.0)},
        base="git:abc",
        notes={WORK: where, NAP: "layout by layout +0.00%, +0.00%"},
    )
    said = undecided.settle([work, nap], [WORK, NAP], counts)
    assert work.note.endswith(f"instructions +1.50% against git:abc: regressed (counted {where})")
    assert nap.note.endswith("(counted layout by layout +0.00%, +0.00%)"), nap.note
    assert not any("layout by layout" in line for line in said), said


@pytest.mark.once
def test_counts_are_judged_at_the_threshold_time_judges_at_before_its_widening():
    """What a quiet machine's time would say: a count within the benchmark's own time threshold
    (7% here, widened to 74% by the baseline's drift) is no regression, and stays undecided."""
    flip, slow = (
        _verdict(k, INCONCLUSIVE, threshold=0.74, base_threshold=0.07) for k in (WORK, NAP)
    )
    counts = undecided.Counts({WORK: (REGRESSED, 0.015), NAP: (REGRESSED, 0.0777)}, base="git:abc")
    said = undecided.settle([flip, slow], [WORK, NAP], counts)
    assert slow.status == REGRESSED and flip.status == INCONCLUSIVE
    assert said[1:] == [
        "test_mylib.py::test_work: time +40.0% undecided; instructions +1.50% against git:abc, "
        f"within the 7% time judges it at: {undecided.NOT_IN_COUNTS}"
    ]
    # against the base, a paired verdict's threshold is never widened: it is the one
    fewer = paired.PairedVerdict(WORK, INCONCLUSIVE, "time", change=0.2, threshold=0.03)
    undecided.settle([fewer], [WORK], undecided.Counts({WORK: (IMPROVED, -0.025)}))
    assert fewer.status == INCONCLUSIVE and "within the 3% time judges it at" in fewer.note


@pytest.mark.once
def test_a_speed_up_stands_where_the_counts_confirm_it_and_is_undecided_where_they_do_not():
    slowed, faster, waits = (
        _verdict(k, IMPROVED, change=-0.46, threshold=0.1, base_threshold=0.07)
        for k in (WORK, NAP, ("waits", "", ""))
    )
    counts = undecided.Counts(
        {WORK: (REGRESSED, 0.109), NAP: (IMPROVED, -0.2), ("waits", "", ""): (UNCHANGED, 0.0)},
        base="git:abc",
    )
    said = undecided.settle([slowed, faster, waits], [WORK, NAP, ("waits", "", "")], counts)
    assert slowed.status == REGRESSED and "instructions +10.90% against git:abc: regressed" in (
        slowed.note
    )
    assert faster.status == IMPROVED and faster.note.endswith(
        "-20.00% against git:abc: fewer, as time said"
    )
    assert waits.status == INCONCLUSIVE
    assert said[1:] == [
        "waits: time -46.0% undecided (faster, in one process: a speed-up is never measured "
        f"again); instructions unchanged (+0.00% against git:abc): {undecided.NOT_IN_COUNTS}"
    ]


@pytest.mark.once
def test_nothing_left_undecided_says_nothing():
    work = _verdict(WORK, INCONCLUSIVE)
    counts = undecided.Counts({WORK: (REGRESSED, 0.1)})
    assert undecided.settle([work], [WORK], counts) == [] and work.status == REGRESSED


@pytest.mark.once
def test_why_nothing_was_counted_is_said_once_for_every_benchmark():
    vs = [_verdict(WORK, INCONCLUSIVE), _verdict(NAP, INCONCLUSIVE)]
    why = "the 2 benchmarks time left undecided stay undecided: valgrind is not on PATH"
    said = undecided.settle(vs, [WORK, NAP], undecided.Counts(why_not=why))
    assert said[0].startswith("UNDECIDED: 2 benchmarks") and said[-1] == why
    assert sum(why in line for line in said) == 1
    assert all(v.status == INCONCLUSIVE for v in vs)


@pytest.mark.once
def test_undecided_is_inconclusive_or_a_suspect_a_second_process_did_not_confirm():
    first = GateResult(
        [
            _verdict(WORK, REGRESSED),  # suspected, then not reproduced: undecided
            _verdict(NAP, INCONCLUSIVE),
            _verdict(("decided", "", ""), REGRESSED),  # reproduced: decided
            _verdict(("quiet", "", ""), UNCHANGED, change=0.01),
            _verdict(("faster", "", ""), IMPROVED, change=-0.3),
        ]
    )
    final = GateResult(
        [
            _verdict(WORK, UNCHANGED, change=0.02),
            _verdict(NAP, INCONCLUSIVE),
            _verdict(("decided", "", ""), REGRESSED),
            _verdict(("quiet", "", ""), UNCHANGED, change=0.01),
            _verdict(("faster", "", ""), IMPROVED, change=-0.3),
        ]
    )
    # an improvement is never measured again: counted (a +10% slowdown read -29.7% beside two
    # busy loops, faster over its controls and slower in raw time; zeroconf's +11%, -46% in both)
    assert undecided.of_stored(first, final) == sorted([WORK, NAP, ("faster", "", "")])
    # unchanged behind a baseline that drifts past the threshold (FastAPI's +7.8% read -0.5% at a
    # load of 30, its sessions 151% apart), or behind a threshold widened past twice the one set
    # (multidict's +10.4% read +4.2% against 41%, its drift 6.9%), is undecided; a drift within
    # the threshold, and a threshold widened a little, decide
    drifting = _verdict(WORK, UNCHANGED, change=-0.005, drift=1.51, threshold=1828.0)
    widened = _verdict(("widened", "", ""), UNCHANGED, change=0.042, drift=0.069, threshold=0.41)
    steady = _verdict(NAP, UNCHANGED, change=0.01, drift=0.03, threshold=0.09)
    for v in (drifting, widened, steady):
        v.base_threshold = 0.07
    both = [drifting, widened, steady]
    assert undecided.of_stored(GateResult(both), GateResult(both)) == sorted(
        [WORK, ("widened", "", "")]
    )
    said = undecided.settle(both, [("widened", "", "")], undecided.Counts())
    assert "time +4.2% undecided (its threshold widened from 7% to 41% by the noise)" in said[1]
    # unchanged within the threshold set, but its own interval reaches past it: a change of the
    # threshold's size is not ruled out (multidict's +10.4% read +4.8%, -16.6% to +32.3%, at 7%)
    wide = _verdict(WORK, UNCHANGED, change=0.048, ci=(-0.166, 0.323), threshold=0.07)
    narrow = _verdict(NAP, UNCHANGED, change=0.057, ci=(0.044, 0.068), threshold=0.07)
    both = [wide, narrow]
    assert undecided.of_stored(GateResult(both), GateResult(both)) == [WORK]
    said = undecided.settle(both, [WORK], undecided.Counts())
    assert "time +4.8% undecided (its interval reaches +32.3%, past the 7% threshold)" in said[1]
    counted = [_verdict(WORK, INCONCLUSIVE, measure="instructions")]  # counts are never re-counted
    assert undecided.of_stored(GateResult(counted), GateResult(counted)) == []


@pytest.mark.once
def test_against_the_base_only_times_inconclusive_verdicts_are_counted():
    verdicts = [
        paired.PairedVerdict(WORK, INCONCLUSIVE, change=0.3, loaded=True),
        paired.PairedVerdict(WORK, INCONCLUSIVE, figure="syscalls", change=0.3),
        paired.PairedVerdict(NAP, UNCHANGED, change=0.0),
    ]
    assert undecided.of_paired(verdicts) == [WORK]
    said = undecided.settle(verdicts, [WORK], undecided.Counts({WORK: (UNCHANGED, 0.0)}))
    assert verdicts[1].note == ""  # a kernel figure is not time's verdict
    assert said[1].startswith("test_mylib.py::test_work: time +30.0% undecided on a loaded machine")


@pytest.mark.once
def test_the_undecided_exit_status_is_its_own_and_a_failure_wins():
    gate = GateResult([_verdict(NAP, INCONCLUSIVE)], undecided=["UNDECIDED: ..."])
    assert SessionOutcome([], gate=gate).status(0) == Exit.OK  # by default: passes, loudly
    assert SessionOutcome([], gate=gate, undecided_exit=True).status(0) == Exit.UNDECIDED
    assert Exit.UNDECIDED not in (Exit.TESTS_FAILED, Exit.NOTHING_JUDGED, Exit.RERECORD_BASELINE)
    gate.verdicts.append(_verdict(WORK, REGRESSED))
    assert SessionOutcome([], gate=gate, undecided_exit=True).status(0) == Exit.TESTS_FAILED


@pytest.mark.once
def test_the_base_of_a_stored_baseline_is_its_clean_commit():
    assert arbiter.base_of({"code": {"commit": "abc123", "dirty": False}}) == ("git:abc123", "")
    spec, why = arbiter.base_of({"code": {"commit": "abc123", "dirty": True}})
    assert spec is None and "with modified files" in why
    spec, why = arbiter.base_of({"code": {}})
    assert spec is None and "records no git commit" in why


# one real session whose base side fails to install: 21-24 s at a load of 8-13 (about 4 s of CPU)
@pytest.mark.once
def test_a_base_that_does_not_install_is_said_in_one_line_with_the_fix(pytester):
    """A counted run against the base, ending as the arbiter's does against a baseline committed
    with the tests alone (no pyproject.toml: pip cannot install the commit): its log read back as
    one line naming the problem, pip's reason and the fix, not pip's output verbatim."""
    pytester.makepyfile(test_a="def test_a(benchmark):\n    benchmark(sum, [1, 2])\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=pytester.path, check=True)
    subprocess.run([*git, "add", "test_a.py"], cwd=pytester.path, check=True)
    subprocess.run([*git, "commit", "-qm", "tests alone"], cwd=pytester.path, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pytester.path, capture_output=True, text=True
    ).stdout.strip()
    spec = f"git:{commit}"
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "--concurrency-measure=instructions",
        f"--concurrency-against={spec}",
    )
    log = pytester.path / "counted.log"
    log.write_text(result.stdout.str() + "\n" + result.stderr.str())
    said = arbiter.failed(result.ret, str(log), spec)
    assert "\n" not in said and " | " not in said, said
    assert said.startswith(f"its base side ({spec}) could not be installed apart: "), said
    assert "Neither 'setup.py' nor 'pyproject.toml' found" in said, said
    assert said.endswith(
        f"the project must install from its tree, as the base side of a count does (in a checkout "
        f"of {commit[:10]}, pip install --no-deps --target DIR . shows the whole error)"
    ), said


@pytest.mark.once
def test_the_counted_run_takes_the_users_command_line_less_what_it_sets_itself():
    args = ["tests", "--concurrency-measure", "time", "--concurrency-against=git:x", "-q"]
    assert argv.without(args, arbiter._REPLACED) == ["tests", "-q"]


@pytest.mark.once
def test_the_counted_run_is_untraced_by_the_suites_coverage(pytester):
    """A suite whose addopts turn pytest-cov on (multidict's ``--cov --cov-context=test``) ran it
    in both counted sides under valgrind; the counted run turns it off, and only where
    pytest-cov is loaded (elsewhere ``--no-cov`` is an unknown option): blocked, then loaded."""
    config = pytester.parseconfig("-p", "no:pytest_cov", "tests")
    assert "--no-cov" not in arbiter.counted_argv(config, "/w", "git:abc", "o", "v")
    need("pytest-cov", None if importlib.util.find_spec("pytest_cov") else "pip install pytest-cov")
    config = pytester.parseconfig("tests")
    argv = arbiter.counted_argv(config, "/w", "git:abc", "/w/only.json", "/w/v.json")
    assert argv[argv.index("--no-cov") + 1 :] == [
        "--concurrency-measure=instructions",
        "--concurrency-against=git:abc",
        "--concurrency-only=/w/only.json",
        "--concurrency-verdicts=/w/v.json",
    ]


@pytest.mark.once
def test_the_reports_say_it_first():
    from pytest_concurrency.report import markdown, terminal

    gate = GateResult(
        [_verdict(NAP, INCONCLUSIVE)], undecided=["UNDECIDED: 1 benchmark ...", "nap: time"]
    )
    assert terminal.render_summary(gate)[0] == "UNDECIDED: 1 benchmark ..."
    lines = markdown.render([], gate).splitlines()
    assert lines[2] == "**:warning: UNDECIDED: 1 benchmark ...**" and lines[4] == "- nap: time"
    against = paired.PairedResult([], undecided=["UNDECIDED: 1 benchmark ..."])
    assert terminal.paired_lines(against)[1] == "UNDECIDED: 1 benchmark ..."
    assert markdown.render_paired(against).splitlines()[2].startswith("**:warning: UNDECIDED")


# -- real sessions --------------------------------------------------------------------------------

LIB = """
import time

__version__ = "1.0"
FACTOR = {factor}
NAP_MS = {nap}


def work(n=20000):
    total = 0
    for i in range(n * FACTOR):
        total += i * i
    return total


def nap():
    time.sleep(NAP_MS / 1000)
"""

TESTS = """
import mylib


def test_work(benchmark):
    benchmark.pedantic(mylib.work, rounds=20)


def test_nap(benchmark):
    benchmark.pedantic(mylib.nap, rounds=20)
"""

PYPROJECT = (Path(__file__).parent / "data" / "mylib.pyproject.toml").read_text()


def _library(root: Path, factor: int, nap: int) -> None:
    (root / "mylib").mkdir(parents=True, exist_ok=True)
    (root / "mylib" / "__init__.py").write_text(LIB.format(factor=factor, nap=nap))


@pytest.fixture
def project(pytester):
    """mylib and its tests, committed: the commit a baseline saved here records."""
    _library(pytester.path, 1, 5)
    (pytester.path / "pyproject.toml").write_text(PYPROJECT.format(version="1.0"))
    pytester.makepyfile(test_mylib=TESTS)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=pytester.path, check=True)
    subprocess.run([*git, "add", "mylib", "pyproject.toml", "test_mylib.py"], cwd=pytester.path)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=pytester.path, check=True)
    return pytester


@contextmanager
def busy_cores(n: int = 2):
    """``n`` busy loops: on 2 cores, less than one free core for the session (a loaded runner)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _run(project, *args):
    """A session of the project; counted, its tests in one layout (the changes here are far
    beyond one layout's 2%; three cost twice the time)."""
    return project.runpytest_subprocess(
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "--concurrency-layouts=1",
        *args,
        timeout=3000,
    )


def _said(result) -> str:
    return " ".join(result.stdout.str().split())


# 40 min at a load of 30 (minutes on a quiet machine): a save, then a session beside two busy
# loops whose two undecided tests are counted on both sides (the base commit installed apart; two
# counted runs of two tests)
@pytest.mark.slow
@pytest.mark.essential
@pytest.mark.timeout(3600)  # 20-30 min at a load of 30 on 2 cores
@needs("valgrind", callgrind.unavailable_reason())
def test_a_stored_baselines_undecided_slowdowns_are_counted_and_the_counts_decide(project):
    _run(project, "--concurrency-save-baseline=base.json").assert_outcomes(passed=2)
    _library(project.path, 2, 10)  # twice the work, twice the sleep: uncommitted, as a PR's tree
    with busy_cores():
        result = _run(project, "--concurrency-baseline=base.json", "--concurrency-report-md=r.md")
    out = _said(result)
    assert result.ret == Exit.TESTS_FAILED, out
    commit = json.loads((project.path / "base.json").read_text())["pytest_concurrency"]["code"]
    said, base = _said_err(result), f"on both sides (base: git:{commit['commit']})"
    if f"counting 2 tests {base}" in said:
        # the CPU-bound slowdown: time could not decide it, the counts did
        assert "time could not decide it; instructions +" in out and "regressed" in out
    else:  # time confirmed twice the work in a second process (a quiet runner): the nap alone
        assert f"counting 1 test {base}" in said, said
    assert "Regressions (fail the build): test_mylib.py::test_work: " in out, out
    # the I/O-bound one: counts cannot see a longer sleep, and say so first
    gate_part = out[out.index("UNDECIDED") :]
    assert gate_part.startswith("UNDECIDED: 1 benchmark neither time nor counts could decide"), out
    assert gate_part.index("UNDECIDED") < gate_part.index("Gate: 1 regression")
    # beside the busy loops time reads the nap either way (+x% or -11.7% once): undecided either way
    assert re.search(r"test_mylib\.py::test_nap: time [+-]\d", gate_part), gate_part
    assert undecided.NOT_IN_COUNTS in gate_part, gate_part
    report = (project.path / "r.md").read_text().splitlines()
    assert report[2].startswith("**:warning: UNDECIDED: 1 benchmark"), report[:6]


def _said_err(result) -> str:
    return " ".join(result.stderr.str().split())


# tens of minutes at a load of 30: a save; beside two busy loops, the I/O-bound slowdown alone, counted
# on both sides (unchanged): exit 0 by default, said first; then without valgrind, exit 9
@pytest.mark.slow
@pytest.mark.timeout(3600)
@needs("valgrind", callgrind.unavailable_reason())
def test_counts_unchanged_where_time_moved_pass_loudly_or_exit_with_their_own_status(project):
    _run(project, "--concurrency-save-baseline=base.json").assert_outcomes(passed=2)
    _library(project.path, 1, 10)  # only the sleep is longer
    with busy_cores():
        result = _run(project, "--concurrency-baseline=base.json")
    out = _said(result)
    if "test_mylib.py::test_nap: time +" not in out:  # time judged it after all: nothing to count
        pytest.skip(f"time decided the slowdown beside the busy loops: {out[out.find('Gate:') :]}")
    assert result.ret == Exit.OK, out
    # said first, before the gate's verdicts; at a load of 30 the unchanged test_work can be
    # undecided beside it (its counts unchanged too): the nap must be among them
    first = " ".join(out[out.index("UNDECIDED: ") : out.index("Gate:")].split())
    assert re.match(r"UNDECIDED: \d+ benchmarks? neither time nor counts could decide", first), out
    nap = first.partition("test_mylib.py::test_nap: time +")[2].split(" test_mylib.py::")[0]
    assert "instructions unchanged (" in nap and undecided.NOT_IN_COUNTS in nap, first


# 9.5 min with the next test at a load of 30: a save, then one session beside two busy loops with valgrind off PATH
@pytest.mark.slow
def test_without_valgrind_undecided_stays_undecided_and_the_option_exits_9(project, monkeypatch):
    _run(project, "--concurrency-save-baseline=base.json").assert_outcomes(passed=2)
    _library(project.path, 2, 10)
    no_valgrind = project.path / "bin"
    no_valgrind.mkdir()
    for tool in ("git",):  # the session needs git (its code identity), not valgrind
        (no_valgrind / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{no_valgrind}")
    with busy_cores():
        result = _run(project, "--concurrency-baseline=base.json", "--concurrency-undecided=exit")
    out = _said(result)
    assert result.ret == Exit.UNDECIDED, out
    assert "UNDECIDED: 2 benchmarks neither time nor counts could decide" in out
    assert out.count("stay undecided: valgrind is not on PATH") == 1, out
    assert "counting" not in _said_err(result)


# ~10 s alone, 80 s at a load of 30: a save and an A/A that time decides (a threshold no load
# reaches): nothing is counted
@pytest.mark.slow
def test_nothing_is_counted_when_time_decided_everything(project):
    _run(project, "--concurrency-save-baseline=base.json").assert_outcomes(passed=2)
    result = _run(
        project,
        "--concurrency-baseline=base.json",
        "--concurrency-threshold=900",
        "--concurrency-undecided=exit",
    )
    assert result.ret == Exit.OK, _said(result)
    assert "undecided" not in _said(result) + _said_err(result)


AGAINST_TEST = """
import mylib


def test_work(benchmark, concurrency_backend):
    benchmark(concurrency_backend.run, mylib.work)
"""


# 38 min at a load of 30 (minutes on a quiet machine): pip installs the base side; a pair of
# timed sessions beside two busy loops (inconclusive: loaded), then that test counted on both sides
@pytest.mark.slow
@pytest.mark.essential
@pytest.mark.timeout(3600)
@needs("valgrind", callgrind.unavailable_reason())
def test_against_the_base_what_time_leaves_undecided_is_counted_and_fails(pytester):
    for root, factor in (
        (pytester.path / "base", 1),
        (pytester.path, 2),
    ):  # the head: twice the work
        _library(root, factor, 5)
        (root / "pyproject.toml").write_text(PYPROJECT.format(version="1.0"))
    pytester.makepyfile(test_mylib=AGAINST_TEST)
    with busy_cores():
        result = _run(
            pytester,
            "--concurrency-backends=threading",
            "--concurrency-against=base",
            "--concurrency-report-md=r.md",
        )
    out = _said(result)
    assert result.ret == Exit.TESTS_FAILED, out
    assert "undecided: counting 1 test on both sides (base: " in _said_err(result), out
    assert "test_work on threading: regressed (" in out, out
    assert "time undecided on a loaded machine: time could not decide it; instructions +" in out
    assert "against the base FAILED: time 1 regressed" in out
    assert "| **regressed** |" in (pytester.path / "r.md").read_text()


@pytest.mark.once
def test_the_judge_step_counts_only_the_undecided_and_its_summary_follows_the_counts():
    """gate/judge.judge on synthetic sessions (tests/test_gate.py's): a +15% slowdown in three
    rounds is inconclusive; only its key is handed to the counts, and their regression fails."""
    from test_gate import baseline_of, meta, run

    from pytest_concurrency.gate.compare import GateSettings
    from pytest_concurrency.gate.judge import judge

    asked = []

    def count(keys):
        asked.append(list(keys))
        return undecided.Counts({k: (REGRESSED, 0.12) for k in keys}, base="git:abc")

    records = run(2, rounds=3, slower={"uvloop": 1.15})
    judged = judge(baseline_of(1, rounds=3), records, meta(), GateSettings(), count=count)
    # and an unchanged one whose three rounds' interval reaches past the 7% threshold
    slowed = {v.key for v in judged.gate.verdicts if v.key[2] == "uvloop"}
    reaching = {v.key for v in judged.gate.verdicts if v.key[2] != "uvloop" and v.ci[1] > 0.07}
    assert slowed and len(asked) == 1 and set(asked[0]) == slowed | reaching
    assert judged.gate.failed and judged.gate.undecided == []
    assert judged.gate.summary.startswith("FAILED"), judged.gate.summary
    # nothing undecided: nothing counted
    asked.clear()
    judge(baseline_of(1), run(2), meta(), GateSettings(), count=count)
    assert asked == []


@pytest.mark.once
def test_unchanged_time_beside_a_load_that_left_no_free_core_is_counted_and_the_counts_decide():
    """Less than one free core hides a slowdown as well as it shows one: beside busy loops at a
    load of 8, zeroconf's send made 10% slower read -0.6% over its controls, "unchanged", and was
    never counted. Such a benchmark is handed to the counts like an inconclusive one."""
    from test_gate import baseline_of, meta, run

    from pytest_concurrency.gate.compare import GateSettings
    from pytest_concurrency.gate.judge import judge

    asked = []

    def count(keys):
        asked.append(list(keys))
        return undecided.Counts({k: (REGRESSED, 0.10) for k in keys}, base="git:abc")

    records = run(2)
    starved = records[0]
    starved.extra["foreign_cpu"] = 1.5  # of the 2 cores: half a core left
    judged = judge(baseline_of(1), records, meta(), GateSettings(), count=count)
    (verdict,) = [v for v in judged.gate.verdicts if v.key == starved.key]
    assert asked == [[starved.key]], asked
    assert verdict.status == REGRESSED and "time could not decide it" in verdict.note
    assert "on a loaded machine" in verdict.note, verdict.note
    assert "1.50 CPU cores busy" in verdict.interference
    starved.extra["foreign_cpu"] = 0.3  # a core and a half free: time's "unchanged" stands
    asked.clear()
    judge(baseline_of(1), records, meta(), GateSettings(), count=count)
    assert asked == []


def _counted(layouts: list[float]):
    """A plain test's counts in each layout (three rounds a layout, agreeing)."""
    from pytest_concurrency.measure.records import Record

    rounds = [[c, c * 1.0001, c * 0.9999] for c in layouts]
    extra = {"measure": "instructions", "layouts": rounds[1:]}
    return Record("test_x.py::test_build", {}, "", rounds[0], extra=extra, name="test_build")


@pytest.mark.once
def test_what_counts_alone_could_not_decide_is_said_first_and_may_exit_with_its_own_status():
    """A counted judgement has nothing to settle its inconclusive verdicts: yarl's ``URL.build``
    with work sized to +1% of its saved count read +1.07% in one layout and +0.86% in the other,
    inconclusive, and in 4 judgements of 10 with nothing else flagged the run passed with it
    listed among the others (evidence/count_cost/matrix-c94a93e-median.jsonl). It is said first
    now, as time's undecided are, and --concurrency-undecided=exit ends the run with 9."""
    from _documents import document_from_records

    from pytest_concurrency import measure
    from pytest_concurrency.gate.compare import GateSettings
    from pytest_concurrency.gate.judge import judge
    from pytest_concurrency.store import baseline
    from pytest_concurrency.store.history import Baseline

    meta = baseline.current_meta({}, None, measure.instrument("instructions"))
    base = Baseline.of(document_from_records([_counted([1e6, 1e6])], meta))
    judged = judge(base, [_counted([1.0107e6, 1.0086e6])], meta, GateSettings(threshold=0.01))
    (v,) = judged.gate.verdicts
    assert v.status == INCONCLUSIVE
    headline, line = judged.gate.undecided
    assert headline.startswith("UNDECIDED: 1 benchmark their counts could not decide: this run")
    assert line.startswith("test_x.py::test_build: instructions +0.96% undecided (layout by layout")
    outcome = SessionOutcome([], gate=judged.gate, undecided_exit=True)
    assert outcome.status(0) == Exit.UNDECIDED
    # decided (beyond the threshold in every layout): nothing is undecided
    judged = judge(base, [_counted([1.02e6, 1.021e6])], meta, GateSettings(threshold=0.01))
    assert judged.gate.verdicts[0].status == REGRESSED and judged.gate.undecided == []
