"""Shards (--concurrency-shard), the verdict file (--concurrency-verdicts), their merge, and
bisection's search.

Most tests run in this process on plain values (the shard of a node id, a baseline filtered, a
verdict file written and read back, merges refused, the search on a made-up history). A few run
real sessions (runpytest_subprocess, timed with a wide threshold: what they check is which
benchmarks each shard judges, not how fast they were); the merge of real shards and a counted
bisection are the slow tier's, and the evidence's (evidence/bisect_evidence.py,
evidence/shard_evidence.py).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
from conftest import needs

from pytest_concurrency import bisection
from pytest_concurrency.__main__ import main as cli
from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.gate import merge, shards, verdict_file
from pytest_concurrency.gate.verdicts import (
    INCONCLUSIVE,
    MISSING,
    NEW,
    REGRESSED,
    UNCHANGED,
    GateResult,
    KernelResult,
    KernelVerdict,
    MemoryResult,
    MemoryVerdict,
    Verdict,
)
from pytest_concurrency.measure.records import Record
from pytest_concurrency.store.history import Baseline

needs_valgrind = needs("valgrind", None if shutil.which("valgrind") else "valgrind is not on PATH")


# -- the shard of a test ------------------------------------------------------------------------


@pytest.mark.once
@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "2", "a/b", "1/1001", ""])
def test_a_bad_shard_is_refused_with_the_fix(text):
    with pytest.raises(shards.ShardError, match="I/N|must be"):
        shards.parse(text)


@pytest.mark.once
def test_a_tests_shard_depends_on_its_node_id_alone():
    ids = [f"tests/test_x.py::test_{i}[n={i}]" for i in range(400)]
    before = {n: shards.of(n, 4) for n in ids}
    grown = ids + [f"tests/test_new.py::test_{i}" for i in range(100)]  # the suite grows
    assert all(shards.of(n, 4) == before[n] for n in ids)
    held = shards.holds(grown, 4)
    assert sum(held) == 500 and min(held) > 100  # about a quarter each
    assert shards.parse(" 2 / 4 ") == shards.Shard(2, 4) and str(shards.Shard(2, 4)) == "2/4"
    assert sum(shards.Shard(i, 4).holds(ids[0]) for i in range(1, 5)) == 1


def _bench(nodeid, workload, samples=(100.0, 101.0, 99.0)):
    return {
        "name": nodeid.rpartition("::")[2],
        "fullname": nodeid,
        "extra_info": {"workload": workload, "params": {}, "backend": "", "measure": "time"},
        "stats": {"data": list(samples)},
    }


def _doc(benches, history=()):
    return {"benchmarks": benches, "pytest_concurrency": {"history": list(history)}}


@pytest.mark.once
def test_a_shard_judges_only_its_part_of_the_baseline_and_its_history():
    ids = [f"t.py::test_{i}" for i in range(20)]
    doc = _doc(
        [_bench(n, n) for n in ids] + [{**_bench("x", "no-node-id"), "fullname": "x"}],
        [
            {
                "benchmarks": [
                    {"workload": n, "params": {}, "backend": "", "samples": [1.0]} for n in ids
                ]
            }
        ],
    )
    kept_total = 0
    for i in (1, 2, 3):
        mine, left = shards.mine(Baseline.of(doc), shards.Shard(i, 3))
        names = {r.workload for r in mine.records}
        assert names == {n for n in ids if shards.of(n, 3) == i} | (
            {"no-node-id"} if i == 1 else set()
        )
        assert {key[0] for key in mine.sessions} == names
        history = {key[0] for key, sessions in mine.sessions.items() if len(sessions) == 2}
        assert history == names - {"no-node-id"}
        assert left == 21 - len(names)
        kept_total += len(names)
    assert kept_total == 21  # each entry judged in exactly one shard
    assert "3 benchmarks of the baseline belong to other shards" in shards.left_out_line(
        3, shards.Shard(1, 3)
    )


# -- the verdict file ---------------------------------------------------------------------------


def _rec(name, median, layouts=()):
    extra = {"workload": name, "params": {}, "backend": "", "measure": "instructions"}
    if layouts:
        extra["layouts"] = [list(rounds) for rounds in layouts]
    return Record(name, {}, "", [median - 1, median, median + 5], extra=extra, name=name)


def _gate(*verdicts):
    return GateResult(
        verdicts=list(verdicts),
        notes=["a note"],
        memory=MemoryResult(
            [MemoryVerdict(("a", "", ""), "kib_per_task", UNCHANGED)], 0.1, [], {("x", "why"): 2}
        ),
        kernel=KernelResult([KernelVerdict(("a", "", ""), "syscalls", UNCHANGED, 1.0, 1.0, 0.0)]),
    )


def _verdicts(shard=None, recs=(), gate=None, exit_status=0, identity=None, positions=None):
    recs = list(recs)
    return verdict_file.Verdicts(
        records=recs,
        gate=gate,
        memory=gate.memory if gate else None,
        exit_status=exit_status,
        tests_failed=False,
        measure="instructions",
        identity=identity
        or {"plugin": "1", "code": "c", "python_build": "p", "machine": "x86_64", "node": "a"},
        shard=shard,
        fullnames={r.key: f"t.py::{r.workload}" for r in recs},
        positions=positions or {r.key: i for i, r in enumerate(recs)},
    )


@pytest.mark.once
def test_a_verdict_file_reads_back_as_written(tmp_path):
    rec = _rec("a", 1000.0, layouts=[[990.0, 991.0], [1010.0]])
    v = Verdict(
        ("a", "", ""),
        REGRESSED,
        1.0,
        2.0,
        change=1.0,
        ci=(0.9, 1.1),
        rounds=(3, 3),
        versions_changed={"lib": ("1", "2")},
        measure="instructions",
        note="where: f +1",
    )
    written = _verdicts(shards.section(shards.Shard(1, 2), [1, 1]), [rec], _gate(v), exit_status=1)
    verdict_file.write(tmp_path / "v.json", written)
    back = verdict_file.read(tmp_path / "v.json")
    assert back.gate is not None and back.gate.verdicts == [v]
    assert back.gate.memory == written.gate.memory and back.gate.kernel == written.gate.kernel
    assert back.records[0].median == rec.median and back.records[0].key == rec.key
    assert (back.exit_status, back.shard, back.positions) == (1, written.shard, written.positions)


@pytest.mark.once
@pytest.mark.parametrize(
    "text, why",
    [
        ("{}", "is not a verdict file"),
        ('{"format": "pytest-concurrency verdicts", "version": 9}', "format version 9"),
        ('{"format": "pytest-concurrency verdicts", "version": 1, "records": [{}]}', "is damaged"),
        # read as sound, then a traceback in the merge (a ShardError; a KeyError in the report)
        (
            '{"format": "pytest-concurrency verdicts", "version": 1, "shard": {"index": 2, '
            '"count": 1, "holds": [1]}}',
            "its shard section is damaged",
        ),
        (
            '{"format": "pytest-concurrency verdicts", "version": 1, "exit_status": 0, '
            '"tests_failed": false, "records": [{"extra_info": {"workload": "w", "backend": "b", '
            '"measure": "x"}, "medians": [1]}]}',
            "extra_info.measure is 'x', not a measure this version knows",
        ),
        (
            '{"format": "pytest-concurrency verdicts", "version": 1, "exit_status": 0, '
            '"tests_failed": false, "records": [], "threshold": -1}',
            "is not a fraction",
        ),
        ("[", "truncated"),
    ],
)
def test_a_file_that_is_no_verdict_file_is_one_line(tmp_path, text, why):
    (tmp_path / "v.json").write_text(text)
    with pytest.raises(verdict_file.VerdictFileError, match=why) as info:
        verdict_file.read(tmp_path / "v.json")
    assert "\n" not in str(info.value)


# -- merged verdicts ----------------------------------------------------------------------------


def _two_shards(change_b=0.0):
    a, b = _rec("a", 100.0), _rec("b", 200.0)
    held = [1, 1]
    va = Verdict(
        a.key,
        UNCHANGED,
        100.0,
        100.0,
        change=0.0,
        threshold=0.01,
        base_threshold=0.01,
        measure="instructions",
    )
    status = REGRESSED if change_b > 0.01 else UNCHANGED
    vb = Verdict(
        b.key,
        status,
        200.0,
        200.0 * (1 + change_b),
        change=change_b,
        threshold=0.01,
        base_threshold=0.01,
        measure="instructions",
    )
    one = _verdicts(shards.section(shards.Shard(1, 2), held), [a], _gate(va), positions={a.key: 5})
    two = _verdicts(
        shards.section(shards.Shard(2, 2), held),
        [b],
        _gate(vb),
        1 if status == REGRESSED else 0,
        positions={b.key: 2},
    )
    return one, two


@pytest.mark.once
def test_merged_verdicts_are_one_runs_summary_order_and_exit_status():
    one, two = _two_shards(change_b=0.05)
    merged = merge.verdicts([("1.json", one), ("2.json", two)])
    assert [v.status for v in merged.gate.verdicts] == [REGRESSED, UNCHANGED]  # the gate's order
    assert [r.workload for r in merged.records] == ["b", "a"]  # the whole collection's order
    assert merged.gate.summary.startswith(
        "FAILED: 1 regressed, 0 improved, 0 inconclusive, 0 new, 0 missing, 1 unchanged"
    )
    assert merged.exit_status == 1 and merged.gate.notes == ["a note"]
    assert merged.gate.memory.not_measured == {("x", "why"): 4}
    one, two = _two_shards()
    assert merge.verdicts([("2.json", two), ("1.json", one)]).exit_status == 0


@pytest.mark.once
def test_a_shard_that_exited_undecided_makes_the_merged_run_exit_undecided_unless_one_failed():
    """~0 s: a shard's 9 (--concurrency-undecided=exit) was read as a status that ended it early
    and won over another shard's regression (1); each shard's UNDECIDED lines were dropped."""
    from pytest_concurrency.gate import undecided

    one, two = _two_shards()
    one.gate.verdicts[0].status = INCONCLUSIVE
    said = undecided.settle(one.gate.verdicts, [one.records[0].key], undecided.Counts())
    one.gate.undecided, one.exit_status = said, Exit.UNDECIDED
    merged = merge.verdicts([("1.json", one), ("2.json", two)])
    assert merged.exit_status == Exit.UNDECIDED
    assert merged.gate.undecided == said and said[0].startswith("UNDECIDED: 1 benchmark ")
    both = copy.deepcopy(one)
    both.shard.update(index=2)
    both.records[0].workload, both.records[0].name = "b", "b"
    both.gate.verdicts[0].key = both.records[0].key
    both.gate.undecided = undecided.settle(
        both.gate.verdicts,
        [both.records[0].key],
        undecided.Counts(why_not="valgrind is not on PATH"),
    )
    both.positions = {both.records[0].key: 2}
    said = merge.verdicts([("1.json", one), ("2.json", both)]).gate.undecided
    assert said[0].startswith("UNDECIDED: 2 benchmarks ") and said[-1] == "valgrind is not on PATH"
    _, failed = _two_shards(change_b=0.05)
    assert merge.verdicts([("1.json", one), ("2.json", failed)]).exit_status == Exit.TESTS_FAILED


@pytest.mark.once
@pytest.mark.parametrize(
    "change, code, why",
    [
        (
            lambda one, two: two.shard.update(index=1),
            Exit.MERGE_COVERAGE,
            "both shard 1/2: overlapping",
        ),
        (
            lambda one, two: two.shard.update(count=3, holds=[1, 1, 0]),
            Exit.MERGE_COVERAGE,
            "different splits",
        ),
        (
            lambda one, two: two.shard.update(holds=[2, 1]),
            Exit.MERGE_COVERAGE,
            "collected different suites",
        ),
        (
            lambda one, two: two.identity.update(plugin="2"),
            Exit.MERGE_MISMATCH,
            "pytest-concurrency version '2'",
        ),
        (
            lambda one, two: two.identity.update(python_build="3.12"),
            Exit.MERGE_MISMATCH,
            "Python build",
        ),
        (
            lambda one, two: two.identity.update(machine="aarch64"),
            Exit.MERGE_MISMATCH,
            "architecture",
        ),
        (lambda one, two: two.records.append(one.records[0]), Exit.MERGE_COVERAGE, "a is in both"),
        (
            lambda one, two: setattr(two, "gate", None),
            Exit.MERGE_COVERAGE,
            "judged against a baseline",
        ),
    ],
)
def test_shards_that_do_not_belong_together_are_refused_in_one_line(change, code, why):
    one, two = _two_shards()
    change(one, two)
    with pytest.raises(merge.MergeError, match=why) as info:
        merge.verdicts([("1.json", one), ("2.json", two)])
    assert info.value.code == code and "\n" not in str(info.value)


@pytest.mark.once
def test_a_missing_shard_is_refused_unless_it_holds_no_benchmark():
    one, two = _two_shards()
    with pytest.raises(merge.MergeError, match=r"shard 2/2 \(1 benchmark tests\) missing") as info:
        merge.verdicts([("1.json", one)])
    assert info.value.code == Exit.MERGE_COVERAGE
    one.shard["holds"] = [2, 0]
    assert merge.verdicts([("1.json", one)]).exit_status == 0


@pytest.mark.once
def test_time_merges_only_from_one_machine_and_counts_from_one_architecture():
    one, two = _two_shards()
    two.identity["node"] = "another-runner"
    assert merge.verdicts([("1.json", one), ("2.json", two)]).exit_status == 0  # counts
    one.measure = two.measure = "time"
    with pytest.raises(merge.MergeError, match="times from different machines do not compare"):
        merge.verdicts([("1.json", one), ("2.json", two)])


# -- real sessions ------------------------------------------------------------------------------

SUITE = """
import pytest

@pytest.mark.parametrize("n", range(8))
def test_sum(benchmark, n):
    benchmark(sum, range(100 + n))
"""
WIDE = (
    "--benchmark-only",
    "-p",
    "no:cacheprovider",
    "--benchmark-max-time=0.02",
    "--concurrency-threshold=500",
)


def _statuses(path):
    v = verdict_file.read(path)
    return {r.key: r for r in v.records}, {vd.key: vd.status for vd in v.gate.verdicts}, v


@pytest.mark.slow
@pytest.mark.essential
def test_shards_judge_their_part_and_merge_into_the_unsharded_runs_verdicts(pytester, capsys):
    """Cost: 6 real sessions, 2 saving (~1-2 s each) and 3 judging (5-10 s each: the machine's
    speed is calibrated at their start and end), about 30 s at rest and 60 s under load."""
    pytester.makepyfile(test_bench=SUITE)
    assert (
        pytester.runpytest_subprocess(
            *WIDE, "--concurrency-shard=1/2", "--concurrency-save-baseline=s1.json"
        ).ret
        == 0
    )
    assert (
        pytester.runpytest_subprocess(
            *WIDE, "--concurrency-shard=2/2", "--concurrency-save-baseline=s2.json"
        ).ret
        == 0
    )
    assert (
        cli(
            [
                "merge",
                str(pytester.path / "base.json"),
                str(pytester.path / "s1.json"),
                str(pytester.path / "s2.json"),
            ]
        )
        == 0
    )
    whole = pytester.runpytest_subprocess(
        *WIDE, "--concurrency-baseline=base.json", "--concurrency-verdicts=whole.json"
    )
    assert whole.ret == 0, whole.stdout.str()
    for i in (1, 2):
        result = pytester.runpytest_subprocess(
            *WIDE,
            f"--concurrency-shard={i}/2",
            "--concurrency-baseline=base.json",
            f"--concurrency-verdicts=v{i}.json",
        )
        assert result.ret == 0
        result.stdout.fnmatch_lines(
            [f"*shard {i}/2: * benchmarks of the baseline belong to other shards*"]
        )
        _, statuses, _ = _statuses(pytester.path / f"v{i}.json")
        assert MISSING not in statuses.values() and NEW not in statuses.values()
    capsys.readouterr()
    code = cli(
        [
            "merge",
            "--verdicts",
            str(pytester.path / "v1.json"),
            str(pytester.path / "v2.json"),
            "--markdown",
            str(pytester.path / "m.md"),
            "--output",
            str(pytester.path / "merged.json"),
        ]
    )
    assert code == 0 and "2 shard file(s) merged: exit status 0" in capsys.readouterr().out
    recs, merged, _ = _statuses(pytester.path / "merged.json")
    whole_recs, unsharded, _ = _statuses(pytester.path / "whole.json")
    assert merged.keys() == unsharded.keys() and len(merged) == 8
    assert list(recs) == list(whole_recs)  # one run's order
    assert (pytester.path / "m.md").read_text().startswith("## Concurrency benchmarks")


@pytest.mark.once
def test_an_empty_shard_passes_and_says_so(pytester):
    """Cost: 1 real session (~1 s)."""
    pytester.makepyfile(test_bench="def test_one(benchmark):\n    benchmark(sum, range(10))\n")
    empty = next(i for i in (1, 2, 3, 4) if shards.of("test_bench.py::test_one", 4) != i)
    result = pytester.runpytest_subprocess(
        *WIDE,
        f"--concurrency-shard={empty}/4",
        "--concurrency-save-baseline=b.json",
        "--concurrency-verdicts=v.json",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"*shard {empty}/4 holds none of the suite's 1 benchmark tests*"])
    assert not (pytester.path / "b.json").exists()
    assert verdict_file.read(pytester.path / "v.json").shard["holds"][empty - 1] == 0


# -- bisection's search, on a made-up history ----------------------------------------------------


class FakeHistory:
    def __init__(self, n, culprits, broken=()):
        self.points = [bisection.Point(f"c{i}") for i in range(n)]
        self.culprits, self.broken = culprits, set(broken)  # benchmark -> first slow point

    def prepare(self, i):
        return f"did not build ({i})" if i in self.broken else ("/", {})


def _search(history, monkeypatch):
    s = bisection.Search(history, [], "instructions", "/nonexistent", lambda line: None)

    def counted(i, cwd, env):
        if i == 0:
            return bisection.Step(i, "saved")
        slow = {k: f"{k}: +2.0% (where: f)" for k, at in history.culprits.items() if i >= at}
        return bisection.Step(i, "judged", regressed=slow)

    monkeypatch.setattr(s, "_counted", counted)
    return s


@pytest.mark.once
@pytest.mark.parametrize("culprit", [1, 7, 16, 30, 31])
def test_the_search_finds_the_commit_in_about_log2_n_runs(monkeypatch, culprit):
    s = _search(FakeHistory(32, {"t": culprit}), monkeypatch)
    (found,) = bisection.search(s)
    assert (found.first_bad, found.last_good) == (culprit, culprit - 1)
    runs = sum(st.status != "skipped" for st in s.steps.values())
    assert runs <= 6  # the good end, then log2(32) steps, the bad end a step like the others


@pytest.mark.once
def test_each_benchmark_gets_its_own_first_crossing_and_skipped_steps_move_to_a_neighbour(
    monkeypatch,
):
    s = _search(FakeHistory(32, {"a": 9, "b": 20}, broken={16, 17}), monkeypatch)
    found = {f.benchmark: (f.last_good, f.first_bad) for f in bisection.search(s)}
    assert found == {"a": (8, 9)}  # the first crossing; b crossed later, and no step saw it
    s = _search(FakeHistory(32, {"a": 9, "b": 20}, broken={16, 17}), monkeypatch)
    found = {f.benchmark: (f.last_good, f.first_bad) for f in bisection.search(s, each=True)}
    assert found == {"a": (8, 9), "b": (19, 20)}
    assert s.steps[16].status == "skipped"


@pytest.mark.once
def test_nothing_crossed_and_a_broken_end_each_have_their_exit(monkeypatch):
    s = _search(FakeHistory(8, {}), monkeypatch)
    with pytest.raises(bisection.BisectError, match="nothing crossed the threshold") as info:
        bisection.search(s)
    assert info.value.code == Exit.NOTHING_CROSSED
    assert len(s.steps) == 4 and 7 in s.steps  # the good end, then log2(8) steps to the bad end
    with pytest.raises(bisection.BisectError, match="the bad end c7 did not build") as info:
        bisection.search(_search(FakeHistory(8, {}, broken={7}), monkeypatch))
    assert info.value.code == Exit.END_BROKEN
    with pytest.raises(bisection.BisectError, match="the good end c0 did not build") as info:
        bisection.search(_search(FakeHistory(8, {"t": 3}, broken={0}), monkeypatch))
    assert info.value.code == Exit.END_BROKEN


@pytest.mark.once
def test_releases_are_the_indexs_from_good_to_bad():
    listed = lambda name: ["2.0", "1.10", "1.9", "1.9.1", "1.10rc1", "0.9"]
    r = bisection.Releases("yarl==1.9..yarl==2.0", listed)
    assert [p.name for p in r.points] == ["yarl==1.9", "yarl==1.9.1", "yarl==1.10", "yarl==2.0"]
    assert [p.name for p in bisection.Releases("yarl==1.9..1.10", listed).points][
        -1
    ] == "yarl==1.10"
    for spec, why in [
        ("yarl==2.0..yarl==1.9", "must come before"),
        ("yarl..2", "write PKG==GOOD"),
        ("yarl==1.8..yarl==2.0", "1.8 is not on the index"),
    ]:
        with pytest.raises(bisection.BisectError, match=why):
            bisection.Releases(spec, listed)


@pytest.mark.once
def test_bisect_json_over_a_baseline_is_refused_before_anything_runs(tmp_path):
    """~1 s (refused before git is asked anything). On the code before it, the baseline was
    replaced by the steps and findings at the end of the bisection."""
    shutil.copy(os.path.join(os.path.dirname(__file__), "data", "run_a.json"), tmp_path / "b.json")
    before = (tmp_path / "b.json").read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "pytest_concurrency", "bisect", "--good", "a", "--bad", "b"]
        + ["--json", "b.json", "--", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--json=b.json: 'b.json' exists and is not a bisection's JSON" in done.stderr
    assert (tmp_path / "b.json").read_bytes() == before


@pytest.mark.once
def test_bisect_outside_a_git_checkout_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_concurrency",
            "bisect",
            "--measure",
            "time",
            "--good",
            "a",
            "--bad",
            "b",
            "--",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: not a git checkout") and done.stderr.count("\n") == 1, (
        done.stderr
    )
    json.dumps(done.stderr)


# -- bisection, counted, on a real git history -----------------------------------------------------

LIB = "def work(n={n}):\n    total = 0\n    for i in range(n):\n        total += i * 3 % 7\n    return total\n"


def _commit(repo, message):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    run = lambda *a: subprocess.run(
        ["git", *a], cwd=repo, check=True, capture_output=True, text=True, env={**os.environ, **env}
    )
    run("add", "-A")
    run("commit", "-q", "-m", message)
    return run("rev-parse", "HEAD").stdout.strip()


@pytest.mark.slow
@needs_valgrind
def test_bisect_names_the_commit_that_made_a_function_2_percent_slower(tmp_path):
    """Cost: 4 counted runs of a one-test suite under valgrind (three layouts each), 3-5 min.
    8 commits, the 6th makes the loop 2% longer; the user's tree and worktrees are left as they were."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "test_lib.py").write_text(
        "import lib\n\n\ndef test_work(benchmark):\n    benchmark(lib.work)\n"
    )
    shas = []
    for i in range(8):
        (repo / "lib.py").write_text(LIB.format(n=20400 if i >= 5 else 20000))
        (repo / "NOTES.txt").write_text(f"note {i}\n")
        shas.append(_commit(repo, f"commit {i}"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_concurrency",
            "bisect",
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--json",
            str(tmp_path / "b.json"),
            "--",
            "test_lib.py",
            "--benchmark-only",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads((tmp_path / "b.json").read_text())
    assert [f["first_bad"] for f in found["found"]] == [shas[5][:10]]
    assert found["runs"] <= 4  # the good end, then log2(7) steps
    assert "where:" in found["found"][0]["line"]
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
    )
    worktrees = subprocess.run(
        ["git", "worktree", "list"], cwd=repo, capture_output=True, text=True
    )
    assert status.stdout == "" and worktrees.stdout.count("\n") == 1


# -- bisection stopped: a Ctrl-C, a SIGTERM, a SIGKILL -------------------------------------------

#: A suite whose test stays in its first step until the bisection is stopped, having said it started.
STALLED = (
    "import os, time\n\n\ndef test_stalls(benchmark):\n"
    "    with open(os.environ['STEP_STARTED'], 'w') as f:\n        f.write(str(os.getpid()))\n"
    "    time.sleep(600)\n"
)


def _stalled_history(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "test_stalls.py").write_text(STALLED)
    shas = []
    for i in range(3):
        (repo / "NOTES.txt").write_text(f"note {i}\n")
        shas.append(_commit(repo, f"commit {i}"))
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "STEP_STARTED": str(tmp_path / "started")}
    return repo, shas, env


def _bisect(repo, shas, env, json_path=None):
    """A time bisection of the stalled suite, in a session of its own (a terminal's Ctrl-C reaches
    the whole group)."""
    command = [sys.executable, "-m", "pytest_concurrency", "bisect", "--measure", "time"]
    command += ["--good", shas[0], "--bad", shas[-1]]
    command += ["--json", str(json_path)] if json_path else []
    return subprocess.Popen(
        [*command, "--", "test_stalls.py", "-q"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _in_its_first_step(proc, started):
    deadline = time.monotonic() + 150  # 29 s at a load of 16 on 2 cores
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def _worktrees(repo):
    done = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
    return done.stdout.splitlines()


@pytest.mark.once
@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_stopped_bisection_names_its_step_leaves_nothing_and_exits_2(tmp_path, stop):
    """Cost: a bisection's start and its first step's pytest start: 3.8 CPU s (22-28 s by the
    clock at a load of 16-34 on 2 cores). A Ctrl-C (to the terminal's process group) and a SIGTERM
    (to the bisection alone, as ``timeout`` and a cancelled CI job send it) alike: one line naming
    the step, exit 2, no traceback, no --json, and neither the worktree nor the checkout in TMPDIR
    left. On main: a traceback and -2; a SIGTERM left both."""
    repo, shas, env = _stalled_history(tmp_path)
    proc = _bisect(repo, shas, env, tmp_path / "b.json")
    try:
        _in_its_first_step(proc, tmp_path / "started")
        assert len(_worktrees(repo)) == 2 and os.listdir(tmp_path / "tmp")  # it made both
        if stop == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    how = "Ctrl-C" if stop == "ctrl-c" else "SIGTERM"
    assert err == (
        f"bisect: interrupted ({how}) while counting {shas[0][:10]} (commit 0) (step 1 of about 3); "
        "nothing left behind\n"
    ), out + err
    assert proc.returncode == Exit.INTERRUPTED
    assert len(_worktrees(repo)) == 1
    assert os.listdir(tmp_path / "tmp") == [] and not (tmp_path / "b.json").exists()


@pytest.mark.once
def test_what_a_killed_bisection_left_the_next_one_removes_at_its_start(tmp_path):
    """Cost: a bisection's start and its first step's pytest start, then a bisection refused at
    once: 5 CPU s (28 s by the clock at a load of 16). SIGKILL leaves the worktree registered and
    the checkout in TMPDIR (nothing can clean up then); the step's pytest dies with it; the next
    bisection in the repository removes both before anything else, and says so."""
    repo, shas, env = _stalled_history(tmp_path)
    proc = _bisect(repo, shas, env)
    step = None
    try:
        _in_its_first_step(proc, tmp_path / "started")
        while not step:  # its pid, written as it started
            step = (tmp_path / "started").read_text()
        step = psutil.Process(int(step))
        proc.kill()
        proc.communicate(timeout=60)
        step.wait(timeout=30)  # its step's pytest ended with it
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error, AttributeError):
            step.kill()  # (a bisection before PDEATHSIG left it sleeping)
    (left,) = os.listdir(tmp_path / "tmp")
    assert len(_worktrees(repo)) == 2
    again = subprocess.run(
        [sys.executable, "-m", "pytest_concurrency", "bisect", "--good", "HEAD", "--bad", "HEAD"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert again.returncode == Exit.TOOL_USAGE, again.stderr  # refused: the same commit twice
    assert "bisect: removed what a bisection that was killed left: " in again.stdout
    assert left in again.stdout
    assert os.listdir(tmp_path / "tmp") == [] and len(_worktrees(repo)) == 1
    assert not (repo / ".git" / "worktrees").exists() or not os.listdir(repo / ".git" / "worktrees")


@pytest.mark.once
def test_a_bisections_directory_is_a_leftover_only_once_its_lock_is_free(tmp_path, monkeypatch):
    """No session: a running bisection's directory (its lock held) is never swept, whatever its
    name's pid says; once the lock is free it is."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    work, lock = bisection.work_dir()
    assert os.path.basename(work).startswith(f"{bisection.PREFIX}{os.getpid()}-")
    assert bisection.sweep(None) == [] and os.path.isdir(work)
    os.close(lock)
    assert bisection.sweep(None) == [os.path.realpath(work)] and not os.path.exists(work)


@pytest.mark.once
def test_merged_shards_none_of_whose_benchmarks_the_baseline_holds_are_nothing_judged():
    one, two = _two_shards()
    for v in (one, two):
        v.gate.verdicts = [Verdict(r.key, NEW) for r in v.records]
    merged = merge.verdicts([("1.json", one), ("2.json", two)])
    assert merged.exit_status == Exit.NOTHING_JUDGED
    assert "no benchmark in common with this run (2 new, 0 missing" in merged.nothing_judged
    two.gate.verdicts[0].status = UNCHANGED  # one benchmark compared: judged
    assert merge.verdicts([("1.json", one), ("2.json", two)]).exit_status == Exit.OK
