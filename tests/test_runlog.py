"""The run log (--concurrency-history): a file a run, never rewritten, joined by copying; drawn as
a static site in the branch's order; imported from baselines and verdict files.

The site in a real browser is tests/test_history_browser.py's (slow tier)."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _documents import document_from_records

from pytest_concurrency.__main__ import main as cli
from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.gate import verdict_file
from pytest_concurrency.gate import verdicts as V
from pytest_concurrency.measure.records import Record
from pytest_concurrency.report import runlog, site, trend
from pytest_concurrency.store import baseline, history
from pytest_concurrency.store.history import Baseline

# version-independent (files written and read, pages made, the plugin's own mechanics in real
# sessions): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

DAY = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
URL = "https://github.com/owner/repo"


def rec(backend="gevent", seconds=1e-3, rounds=9, **extra) -> Record:
    samples = [seconds * (1 + 0.01 * (i % 3 - 1)) for i in range(rounds)]
    # as a session's record: its extra_info names it too (a verdict file is read from it)
    extra.update(workload="ring", params={"n": 10}, backend=backend, ops=100, unit="hop")
    return Record("ring", {"n": 10}, backend, samples, ops=100, unit="hop", extra=extra)


def regressed(r: Record, change=0.25) -> V.GateResult:
    v = V.Verdict(r.key, V.REGRESSED, 1e-3, 1.25e-3, change=change, p_value=1e-4, threshold=0.1)
    return V.GateResult([v])


def run(recs, commit: str, hours: int, gate=None, branch="main", measure="time") -> dict:
    return runlog.run_document(
        recs,
        code=runlog.Code(commit, False, branch),
        measure=measure,
        date=DAY + dt.timedelta(hours=hours),
        gate=gate,
        machine={"node": "test"},
        libraries={},
    )


# -- the record file -----------------------------------------------------------------------------


def test_a_run_file_holds_each_benchmarks_figures_and_the_verdicts_words(tmp_path):
    timed = rec(syscalls_per_op=2.0, csw_per_op=0.5, kib_per_task=3.5)
    counted = Record(
        "spawn",
        {"n": 4},
        "asyncio",
        [1000.0] * 5,
        ops=4,
        unit="task",
        extra={"measure": "instructions", "layouts": [[1100.0] * 5, [900.0] * 5]},
    )
    memory = V.MemoryResult([V.MemoryVerdict(timed.key, "kib_per_task", V.LEAKED, 1.0, 3.5)])
    doc = runlog.run_document(
        [timed, counted],
        code=runlog.Code("ab" * 20, True, "feature"),
        measure="time",
        date=DAY,
        gate=regressed(timed),
        memory=memory,
        node_ids={timed.key: "test_x.py::test_ring[gevent]"},
    )
    path = runlog.write(tmp_path, doc)
    back = runlog.read(path)
    assert back["commit"] == "ab" * 20 and back["dirty"] is True and back["branch"] == "feature"
    assert back["date"] == "2026-03-01T00:00:00Z" and back["python"]["minor"]
    first, second = back["benchmarks"]
    assert first["test"] == "test_x.py::test_ring[gevent]" and first["rounds"] == 9
    assert first["median"] == pytest.approx(1e-5)  # per op: 1 ms a round of 100 hops
    assert first["low"] < first["median"] < first["high"]
    assert (
        first["kernel"] == {"syscalls": 2.0, "csw": 0.5} and first["memory"]["kib_per_task"] == 3.5
    )
    assert second["layouts"] == [250.0, 275.0, 225.0]  # each layout's median per op
    words = {v["figure"]: v for v in back["verdicts"]}
    assert words["time"]["status"] == V.REGRESSED and "+25.0%" in words["time"]["words"]
    assert words["memory:kib_per_task"]["status"] == V.LEAKED


def test_the_medians_interval_is_the_order_statistics_95_percent():
    def interval(samples):
        figures = runlog.figures(Record("ring", {}, "gevent", samples, ops=1))
        return figures["low"], figures["high"]

    assert interval([float(x) for x in range(20)]) == (5, 14)  # ranks 6 and 15 of 20
    assert interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few rounds: their range


def test_each_run_is_a_new_file_and_none_is_ever_rewritten(tmp_path):
    doc = run([rec()], "c" * 40, 0)
    first = runlog.write(tmp_path, doc)
    before = Path(first).read_bytes()
    second = runlog.write(tmp_path, doc)  # the same run written again: a file of its own
    assert first != second and Path(first).read_bytes() == before
    assert re.fullmatch(r"20260301T000000-cccccccccccc-[0-9a-f]{8}\.run\.json", Path(second).name)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_folders_of_several_jobs_and_shards_join_by_copying(tmp_path):
    jobs = [tmp_path / "job1", tmp_path / "job2"]
    runlog.write(jobs[0], run([rec("gevent")], "a" * 40, 0))
    runlog.write(jobs[1], run([rec("asyncio")], "a" * 40, 0))  # the other shard, same commit
    runlog.write(jobs[1], run([rec("gevent"), rec("asyncio")], "b" * 40, 1))
    joined = tmp_path / "all"
    joined.mkdir()
    for job in jobs:
        for f in job.iterdir():
            shutil.copy(f, joined)
    runs = runlog.read_folder(joined)
    assert len(runs) == 3
    made = site.Site(trend.order(runs))
    assert [len(s.points) for s in made.series.values()] == [2, 2]


def test_a_damaged_or_foreign_file_is_refused_in_one_line(tmp_path, capsys):
    runlog.write(tmp_path, run([rec()], "a" * 40, 0))
    bad = tmp_path / "x.run.json"
    bad.write_text(json.dumps({"format": runlog.FORMAT, "version": 1, "measure": "time"}))
    assert cli(["history", str(tmp_path), "--html", str(tmp_path / "site")]) == Exit.TOOL_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.run.json" in err and "'date' is not text" in err
    assert not (tmp_path / "site").exists()
    good = run([rec()], "a" * 40, 0)
    bad.write_text(json.dumps({**good, "measure": "sundial"}))
    with pytest.raises(runlog.RunLogError, match="measure 'sundial' is not one of"):
        runlog.read(bad)
    # a value of another type, wherever the site reads it: one line, not a traceback
    for field, value, says in [
        ("params", [1], "'params' is list, not dict"),
        ("median", "fast", "'median' is str, not int"),
        ("kernel", {"csw": "many"}, "kernel figure 'csw' is not a number"),
    ]:
        benchmark = {**good["benchmarks"][0], field: value}
        bad.write_text(json.dumps({**good, "benchmarks": [benchmark]}))
        with pytest.raises(runlog.RunLogError, match=re.escape(says)):
            runlog.read(bad)


# -- the order -----------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commits(repo: Path, n: int) -> list[str]:
    git(repo, "init", "-q", "-b", "main")
    out = []
    for i in range(n):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        out.append(git(repo, "rev-parse", "HEAD"))
    return out


def test_runs_are_in_the_branchs_commit_order_not_their_upload_or_dates(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = commits(repo, 3)
    git(repo, "checkout", "-q", "-b", "side")
    git(repo, "commit", "-q", "--allow-empty", "-m", "side")
    side = git(repo, "rev-parse", "HEAD")
    # the newest commit measured first (a re-run of an old commit came later), and a pull request's
    runs = [
        run([rec()], shas[2], 0),
        run([rec()], shas[0], 5),
        run([rec()], side, 6, branch="side"),
        run([rec()], shas[1], 1),
    ]
    ordered = trend.order(runs, repo, "main")
    assert [r["commit"] for r in ordered.runs] == shas
    assert "main's commits" in ordered.how and "1 run(s) of commits not on it" in ordered.how
    by_date = trend.order(runs)  # no repository: their dates, and the site says so
    assert [r["commit"] for r in by_date.runs] == [shas[2], shas[1], shas[0]]
    assert "not of a branch's commits: no git repository given" in by_date.how
    # a repository that holds none of them (the current directory, by default): not all left out
    elsewhere = trend.order([run([rec()], "e" * 40, 0)], repo, "main")
    assert len(elsewhere.runs) == 1 and "none of the runs' commits is on main" in elsewhere.how


# -- importing -----------------------------------------------------------------------------------


def test_baselines_sessions_and_verdict_files_are_imported_as_runs(tmp_path, capsys):
    meta = {
        "schema_version": baseline.SCHEMA_VERSION,
        "python": {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"},
        "backends": {},
        "libraries": {},
        "cpu_count": 2,
        "calibration": {"version": 1, "ns_per_iteration": 270.0},
    }
    doc = None
    for i, seconds in enumerate((1e-3, 2e-3, 3e-3)):
        session = document_from_records([rec(seconds=seconds)], meta)
        session[baseline.SECTION]["code"] = {"commit": f"{i}" * 40, "dirty": False}
        doc = history.merge(session, doc and Baseline.of(doc), 5)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(doc))
    r = rec()
    v = verdict_file.Verdicts([r], regressed(r), None, exit_status=1, tests_failed=False)
    vf = tmp_path / "verdicts.json"
    verdict_file.write(vf, v)
    folder = tmp_path / "runs"
    assert cli(["history", "import", str(folder), str(vf)]) == Exit.TOOL_USAGE
    assert "names no commit; give it with --commit" in capsys.readouterr().err
    assert not folder.exists()  # nothing of a refused import is written
    code = cli(["history", "import", str(folder), str(base), str(vf), "--commit", "f" * 40])
    assert code == Exit.OK and "4 run(s) from 2 file(s)" in capsys.readouterr().out
    runs = runlog.read_folder(folder)
    medians = sorted(
        (r["commit"][0], r["benchmarks"][0]["median"])
        for r in runs
        if r["source"] != "verdicts verdicts.json"
    )
    assert medians == [
        ("0", pytest.approx(1e-5)),
        ("1", pytest.approx(2e-5)),
        ("2", pytest.approx(3e-5)),
    ]
    (imported,) = [r for r in runs if r["commit"] == "f" * 40]
    assert (
        imported["verdicts"][0]["status"] == V.REGRESSED
        and imported["benchmarks"][0]["low"] is None
    )


# -- the site ------------------------------------------------------------------------------------

HOSTILE = 'evil</script><img src="https://x.test/a.png">'


def a_history(tmp_path: Path) -> tuple[Path, list[dict]]:
    folder = tmp_path / "runs"
    runs = []
    for i in range(6):
        slow = 1.3 if i >= 4 else 1.0
        recs = [rec("gevent", 1e-3 * slow), rec("asyncio", 2e-3), rec(HOSTILE, 1e-3)]
        gate = regressed(recs[0]) if i == 4 else None
        runs.append(run(recs, f"{i:x}" * 40, i, gate))
    for i in (6, 7):  # counted runs: their own chart
        counted = rec("gevent", 5e5, measure="instructions")
        runs.append(run([counted], f"{i:x}" * 40, i, measure="instructions"))
    for doc in runs:
        runlog.write(folder, doc)
    return folder, runs


def test_the_site_has_an_index_a_page_a_case_and_the_regressions_all_offline(tmp_path, capsys):
    folder, runs = a_history(tmp_path)
    out = tmp_path / "site"
    assert (
        cli(
            ["history", str(folder), "--html", str(out), "--repo-url", URL, "--repo", str(tmp_path)]
        )
        == 0
    )
    assert "3 pages of 8 runs written" in capsys.readouterr().out
    index = (out / "index.html").read_text()
    data = json.loads(re.search(r'id="data">(.*?)</script>', index, re.S).group(1))
    rows = [(r["model"], r["measure"]) for r in data["rows"]]
    assert rows == [
        ("asyncio", "time"),
        (HOSTILE, "time"),
        ("gevent", "instructions"),
        ("gevent", "time"),
    ]
    gevent = data["rows"][3]
    assert gevent["runs"] == 6 and gevent["latest"] == "13.0 µs/hop"
    assert data["rows"][2]["latest"] == "5.00k instr/hop"
    assert gevent["spark"].count(",") == 6  # one vertex a run
    (page,) = (out / "c").iterdir()
    text = page.read_text()
    # time and counts apart: a chart each; the three timed models on one
    assert (
        text.count("<svg") == 2 and "<h2>time per op" in text and "<h2>instructions per op" in text
    )
    assert text.count('class="point"') == 3 * 6 + 2
    marker = re.search(r'<a class="regression-link" href="([^"]+)">', text)
    assert marker and marker.group(1) == f"{URL}/commit/{'4' * 40}"
    assert "+25.0%" in text
    regressions = (out / "regressions.html").read_text()
    assert regressions.count("<tr>") == 2 and f"{URL}/commit/{'4' * 40}" in regressions
    for name in ("index.html", "regressions.html", f"c/{page.name}"):
        html = (out / name).read_text()
        # nothing is fetched when viewed: no external script, style, image or font
        assert not re.search(r"<script[^>]+src|<link|<img|@import|url\(", html), name
        assert "</script><img" not in html  # the hostile name stays text
    assert "\\u003c/script>" in index


def test_newest_regressions_come_first(tmp_path):
    runs = [run([rec()], f"{i}" * 40, i, regressed(rec())) for i in range(3)]
    text = site.Site(trend.order(runs), URL).regressions()
    dates = re.findall(r"<td>(2026-03-01T0\d:00:00Z)</td>", text)
    assert dates == ["2026-03-01T02:00:00Z", "2026-03-01T01:00:00Z", "2026-03-01T00:00:00Z"]


def test_a_pull_requests_summary_links_each_benchmark_to_its_page(tmp_path, capsys):
    folder, runs = a_history(tmp_path)
    url = "https://owner.github.io/repo"
    assert (
        cli(["history", str(folder), "--pr-summary", "--site-url", url, "--commit", "4" * 10]) == 0
    )
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert f"[their history]({url}/index.html)" in lines[0]
    assert "**regressed +25.0%**" in lines[4] and "| ring[n=10] on gevent |" in lines[4]
    (page,) = {m for m in re.findall(rf"\({re.escape(url)}/c/([^)#]+)#", text)}
    assert (page, len(lines)) == (f"{site.slug('ring[n=10]')}.html", 7)
    assert "<img" not in text and "](https://x.test" not in text  # the hostile name is inert


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ["--html", "S", "--repo-url", "javascript:alert(1)"],
            "give an http:// or https:// address",
        ),
        (["--pr-summary"], "--pr-summary needs --site-url"),
        ([], "say what to make"),
    ],
)
def test_usage_errors_say_the_fix(tmp_path, capsys, args, says):
    runlog.write(tmp_path, run([rec()], "a" * 40, 0))
    assert cli(["history", str(tmp_path), *args]) == Exit.TOOL_USAGE
    assert says in capsys.readouterr().err


# -- real sessions -------------------------------------------------------------------------------

SUITE = """
import os
import pytest

@pytest.mark.parametrize("n", range(2))
def test_sum(benchmark, n):
    benchmark(sum, range(100 + n))
    assert not os.environ.get("FAIL_ONE") or n == 0
"""
QUICK = ("--benchmark-only", "-p", "no:cacheprovider", "--benchmark-max-time=0.02")


def test_a_session_adds_one_run_with_its_commit_branch_and_figures(pytester):
    """Cost: one real session without a baseline, ~2 s at rest."""
    pytester.makepyfile(test_bench=SUITE)
    (sha,) = commits(pytester.path, 1)
    result = pytester.runpytest_subprocess(*QUICK, "--concurrency-history=runs")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*run added to the history: *runs*.run.json"])
    (doc,) = runlog.read_folder(pytester.path / "runs")
    assert (doc["commit"], doc["branch"], doc["measure"]) == (sha, "main", "time")
    assert sorted(b["test"] for b in doc["benchmarks"]) == [
        "test_bench.py::test_sum[0]",
        "test_bench.py::test_sum[1]",
    ]
    assert all(b["low"] <= b["median"] <= b["high"] for b in doc["benchmarks"])


def test_a_session_whose_benchmark_test_failed_adds_no_run(pytester, monkeypatch):
    """Cost: one real session without a baseline, ~2 s at rest."""
    pytester.makepyfile(test_bench=SUITE)
    monkeypatch.setenv("FAIL_ONE", "1")
    pytester.makeini("[pytest]\nconcurrency_history = runs\n")  # the ini key, this time
    failed = pytester.runpytest_subprocess(*QUICK)
    assert failed.ret == Exit.TESTS_FAILED
    failed.stdout.fnmatch_lines(["*no run added to the history runs: 1 benchmark test failed*"])
    assert not (pytester.path / "runs").exists()


def test_a_run_against_the_base_is_refused_before_it_starts(pytester):
    """Cost: a usage error at start-up, ~1 s."""
    pytester.makepyfile(test_bench=SUITE)
    result = pytester.runpytest_subprocess(
        "--concurrency-against=git:HEAD", "--concurrency-history=runs"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--concurrency-history: a run against the base is not kept yet" in result.stderr.str()
    assert not (pytester.path / "runs").exists()
