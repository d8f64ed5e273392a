"""``python -m pytest_concurrency report``: re-render and compare saved runs, fail clearly on bad files."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_concurrency.__main__ import main
from pytest_concurrency.measure.records import Document

# version-independent (the report command on saved files): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

DATA = Path(__file__).parent / "data"
A, B = str(DATA / "run_a.json"), str(DATA / "run_b.json")
ROOT = Path(__file__).resolve().parent.parent


def _row(text: str, title: str, backend: str) -> str:
    block = text.split(title + "\n", 1)[1].split("\n\n", 1)[0]
    (line,) = [line for line in block.splitlines() if line.split()[0] == backend]
    return line


def test_renders_one_file(capsys):
    assert main(["report", B, "--width", "80"]) == 0
    out = capsys.readouterr().out
    for rec in Document.of(json.loads(Path(B).read_text())).records:
        assert rec.workload in out
    assert "ring [m=1000,n=100]" in out and "Gate:" not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_compares_two_files(capsys):
    rc = main(["report", A, B, "--width", "100"])
    out = capsys.readouterr().out
    base = {r.key: r for r in Document.of(json.loads(Path(A).read_text())).records}
    cur = {r.key: r for r in Document.of(json.loads(Path(B).read_text())).records}
    key = ("ring", "m=1000,n=100", "gevent")
    change = statistics.median(cur[key].samples) / statistics.median(base[key].samples) - 1
    line = _row(out, "ring [m=1000,n=100]", "gevent")
    assert f"{change * 100:+.1f}%" in line
    assert "missing" in _row(out, "ring [m=1000,n=10]", "eventlet")
    assert "new" in _row(out, "switch [switches=100000]", "uvloop")
    assert "REGRESSED" in line and rc == 1  # the gate judged: a 20% slowdown on 9 samples


def test_changes_only_when_the_first_file_is_no_baseline(tmp_path, capsys):
    doc = json.loads(Path(A).read_text())
    doc.pop("pytest_concurrency")  # a plain --benchmark-json file
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(doc))
    assert main(["report", str(plain), B, "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "changes only, no verdicts" in out
    assert "+20.0%" in _row(out, "ring [m=1000,n=100]", "gevent")
    assert "REGRESSED" not in out


def test_writes_markdown_and_charts(tmp_path, capsys):
    md = tmp_path / "out" / "report.md"
    args = ["report", A, B, "--markdown", str(md)]
    has_mpl = True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        has_mpl = False
    if has_mpl:
        args += ["--plot", str(tmp_path / "charts")]
    main(args)
    text = md.read_text(encoding="utf-8")
    assert text.startswith("## Concurrency benchmarks") and "| backend |" in text
    if has_mpl:
        assert (tmp_path / "charts" / "ring-scaling-n.png").is_file()


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "does not exist; check the path"),
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "not pytest-benchmark JSON"),
        (
            '{"benchmarks": [{"name": "t", "extra_info": {}, "stats": {"data": [1]}}]}',
            "none from pytest-concurrency",
        ),
    ],
)
def test_bad_file_names_the_file_and_the_problem(tmp_path, capsys, content, problem):
    bad = tmp_path / "bad-run.json"
    if content is not None:
        bad.write_text(content)
    assert main(["report", A, str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and problem in err


BROKEN_SECTIONS = {
    "unknown schema": ({"schema_version": 99}, "has schema version 99"),
    "broken history": ({"history": "x"}, "pytest_concurrency.history is a string, not a list"),
    "broken calibration": (
        {"calibration": {"ns_per_iteration": "x"}},
        "pytest_concurrency.calibration.ns_per_iteration is a string",
    ),
}


@pytest.mark.parametrize("name", BROKEN_SECTIONS)
@pytest.mark.parametrize("first", [True, False], ids=["as A", "as B"])
def test_a_baseline_the_gate_refuses_is_refused_with_one_line(tmp_path, capsys, name, first):
    """~0 s: these were rendered as "changes only, no verdicts", exit 0."""
    change, problem = BROKEN_SECTIONS[name]
    doc = json.loads(Path(A).read_text())
    doc["pytest_concurrency"].update(change)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["report", *((str(bad), B) if first else (A, str(bad)))]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "bad.json" in err and problem in err, err
    assert out == ""


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["report", A, "--width", "10"])
    assert exc.value.code == 2 and "too narrow" in capsys.readouterr().err
    assert main(["report", A, B, A]) == 2
    assert "one or two files" in capsys.readouterr().err


def test_module_entry_point_help_and_exit_status():
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "pytest_concurrency", *a], cwd=ROOT, capture_output=True, text=True
    )
    helped = run("report", "--help")
    assert helped.returncode == 0 and "A.json" in helped.stdout and "--markdown" in helped.stdout
    missing = run("report", "does-not-exist.json")
    assert missing.returncode == 2 and "'does-not-exist.json' does not exist" in missing.stderr


def test_the_exit_statuses_pytest_names_are_pytests_own_and_print_as_numbers():
    from pytest_concurrency.exit_codes import Exit

    ours = [e for e in Exit if e < Exit.RERECORD_BASELINE]  # pytest 9.2 adds 6, unused here
    assert [(e.name, int(e)) for e in ours] == [(c.name, int(c)) for c in pytest.ExitCode][:6]
    assert (str(Exit.NOTHING_JUDGED), f"{Exit.TOOL_USAGE}") == ("8", "2")  # on 3.10 too


def test_matrix_has_a_line_per_case_and_bolds_the_fastest(capsys):
    from pytest_concurrency.report import tables

    recs = Document.of(json.loads(Path(A).read_text())).records
    assert main(["report", A, "--matrix"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    backends = sorted({r.backend for r in recs})
    assert header == ["case"] + backends
    cases = {r.key[:2] for r in recs}
    assert len(lines) == 2 + len(cases)
    ring = [r for r in recs if r.workload == "ring" and r.params.get("n") == 100]
    fastest = min(ring, key=lambda r: r.median)
    (line,) = [ln for ln in lines if ln.startswith("| ring [m=1000,n=100]")]
    cells = [c.strip() for c in line.strip("|").split("|")][1:]
    assert cells[backends.index(fastest.backend)] == f"**{tables.per_op_text(fastest)}**"
    assert sum(c.startswith("**") for c in cells) == 1


def _as_go(path: str, out: Path) -> str:
    """``path`` with only its ring [m=1000,n=100] row, labelled as the Go reference program's."""
    doc = json.loads(Path(path).read_text())
    doc["benchmarks"] = [
        {**b, "extra_info": {**b["extra_info"], "backend": "go"}}
        for b in doc["benchmarks"]
        if b["extra_info"]["backend"] == "gevent"
        and b["extra_info"]["params"] == {"m": 1000, "n": 100}
    ]
    out.write_text(json.dumps(doc))
    return str(out)


def test_a_native_row_is_shown_not_gated_as_in_the_session_unless_asked(tmp_path, capsys):
    # the same 20% slowdown that fails as gevent's (test_compares_two_files): a native reference
    # row passes as the live gate would judge it (--concurrency-gate-native: --gate-native)
    a, b = _as_go(A, tmp_path / "a.json"), _as_go(B, tmp_path / "b.json")
    assert main(["report", a, b, "--width", "100"]) == 0
    assert "native reference, not gated" in capsys.readouterr().out
    assert main(["report", a, b, "--width", "100", "--gate-native"]) == 1
    assert "REGRESSED" in capsys.readouterr().out


def test_a_threshold_for_one_backend_is_the_sessions_own(capsys):
    # gevent's +20% fails at the gate's threshold (test_compares_two_files); the ini line
    # ``gevent = 25`` the session would read lets it pass, and only gevent's
    assert main(["report", A, B, "--width", "100", "--threshold-for", "gevent=25"]) == 0
    line = _row(capsys.readouterr().out, "ring [m=1000,n=100]", "gevent")
    assert "REGRESSED" not in line and "+20.0%" in line
    with pytest.raises(SystemExit):
        main(["report", A, B, "--threshold-for", "gevent"])
    assert "should read KEY = PCT" in capsys.readouterr().err


def _shard_baseline(tmp_path, shard) -> str:
    """run_a.json as shard 1/1's baseline, its shard section ``shard``."""
    doc = json.loads(Path(A).read_text())
    doc["pytest_concurrency"]["shard"] = shard
    path = tmp_path / "shard-1.json"
    path.write_text(json.dumps(doc))
    return str(path)


GOOD_SHARD = {"index": 1, "count": 1, "holds": [35], "identity": {}}


def test_merge_refuses_to_write_over_a_file_that_is_not_a_baseline(tmp_path, capsys):
    """~0 s: merge replaced a test module with the baseline, exit 0."""
    module = tmp_path / "test_x.py"
    module.write_text("def test_x():\n    pass\n")
    shard = _shard_baseline(tmp_path, GOOD_SHARD)
    assert main(["merge", str(module), shard]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "merge OUT: " in err, err
    assert "exists and is not a baseline (a Python source file), so it is left untouched" in err
    assert module.read_text() == "def test_x():\n    pass\n"
    out = tmp_path / "merged.json"
    assert main(["merge", str(out), shard]) == 0  # a new path: written
    assert main(["merge", str(out), shard]) == 0  # a baseline: replaced by the new merge


def test_merge_verdicts_refuses_outputs_over_its_inputs_or_a_source(tmp_path, capsys):
    module = tmp_path / "test_x.py"
    module.write_text("x = 1\n")
    verdicts = tmp_path / "v.json"
    verdicts.write_text('{"format": "pytest-concurrency verdicts", "version": 1}')
    assert main(["merge", "--verdicts", str(verdicts), "--markdown", str(module)]) == 2
    assert "--markdown=" in capsys.readouterr().err and module.read_text() == "x = 1\n"
    assert main(["merge", "--verdicts", str(verdicts), "--output", str(verdicts)]) == 2
    assert "name the same file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "shard",
    [
        {"index": 1, "count": 2, "holds": [3]},  # a count a shard, and one shard fewer
        {"index": 3, "count": 2, "holds": [1, 1]},
        {"index": "one", "count": 1, "holds": [1]},
        ["1/2"],
    ],
    ids=["holds", "index", "text", "a list"],
)
def test_merge_of_a_damaged_shard_section_is_one_line_exit_2(tmp_path, capsys, shard):
    """~0 s: an uncaught ShardError, its traceback and exit 1."""
    out = tmp_path / "merged.json"
    assert main(["merge", str(out), _shard_baseline(tmp_path, shard)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is damaged: pytest_concurrency.shard" in err, err
    assert not out.exists()
