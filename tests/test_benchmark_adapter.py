"""pytest-benchmark's internals are touched in one module (benchmark_adapter.py), and the
code and machine a baseline names come from pytest-benchmark's hooks, read as before."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from pytest_benchmark.utils import get_commit_info

import pytest_concurrency
from pytest_concurrency import benchmark_adapter
from pytest_concurrency.store import baseline

PACKAGE = Path(pytest_concurrency.__file__).parent
ADAPTER = PACKAGE / "benchmark_adapter.py"
#: pytest-benchmark's names the adapter wraps: its session on the config, the fixture's private
#: attributes, a record's error flag and rounds, the session's machine info, saves and table
PRIVATE_NAMES = {
    "_benchmarksession",
    "_calibrate_timer",
    "_get_precision",
    "_make_runner",
    "_make_stats",
    "_max_time",
    "_min_rounds",
    "_mode",
    "_precisions",
    "_timer",
    "has_error",
    "stats",
    "get_machine_info",
    "autosave",
    "groups",
    "display",
}


def internals_used(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Where ``path`` touches pytest-benchmark: an import of it, one of its private names as an
    attribute, or named to ``getattr``/``setattr``/``hasattr``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [
                f"{where} imports {a.name}"
                for a in node.names
                if a.name.startswith("pytest_benchmark")
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "pytest_benchmark"
        ):
            found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_NAMES:
            found.append(f"{where} .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PRIVATE_NAMES
        ):
            found.append(f"{where} {node.func.id}(..., {node.args[1].value!r})")
    return found


@pytest.mark.once
def test_pytest_benchmarks_internals_are_touched_in_the_adapter_only():
    found = [
        use
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != ADAPTER
        for use in internals_used(path)
    ]
    assert found == []


@pytest.mark.once
def test_the_check_finds_what_it_looks_for(tmp_path):
    # the check above is not blind: each way of touching an internal is found
    (tmp_path / "x.py").write_text(
        "import pytest_benchmark\n"
        "from pytest_benchmark.utils import NameWrapper\n"
        "bs = config._benchmarksession\n"
        "bench._mode = 'x'\n"
        "ok = getattr(bench, 'has_error', False)\n"
        "n = len(bench.stats.stats.data)\n"
    )
    found = internals_used(tmp_path / "x.py", tmp_path)
    assert [f.split(" ", 1)[1] for f in found] == [
        "imports pytest_benchmark",
        "imports from pytest_benchmark.utils",
        "._benchmarksession",
        "._mode",
        "getattr(..., 'has_error')",
        ".stats",
        ".stats",
    ]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.mark.once
@pytest.mark.parametrize("state", ["clean", "changed", "untracked"])
def test_the_commit_hooks_code_is_the_code_older_baselines_saved(tmp_path, monkeypatch, state):
    """A baseline saved before read its code from git itself (``baseline.code_identity``); the
    same checkout, read through pytest-benchmark's commit info, names the same code, so that its
    sessions still count as this code's (an untracked file is not a change for either)."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    if state == "changed":
        (tmp_path / "a.py").write_text("x = 2\n")
    elif state == "untracked":
        (tmp_path / "b.py").write_text("y = 1\n")
    monkeypatch.chdir(tmp_path)
    old = baseline.code_identity(tmp_path)
    assert old["dirty"] is (state == "changed")
    assert benchmark_adapter.code_identity(get_commit_info()) == old


@pytest.mark.once
def test_no_commit_known_is_no_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no repository: pytest-benchmark says 'unversioned'
    assert baseline.code_identity(tmp_path) == {}
    assert benchmark_adapter.code_identity(get_commit_info()) == {}


HOOKS = """
def pytest_benchmark_generate_commit_info(config):
    return {"id": "c0ffee" * 6 + "beef", "dirty": True, "project": "p", "branch": "b"}


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["node"] = "the-ci-runner"
"""

PLAIN = """
def test_sum(benchmark):
    benchmark(sum, range(100))
"""


OLDER = Path(__file__).parent / "data" / "saved_baseline.json"  # saved by an earlier version


@pytest.mark.once
def test_a_saved_baseline_names_the_code_and_machine_the_suites_hooks_give(pytester):
    """One real session (about 2 s): a suite's own commit and machine hooks are what its baseline
    names, in pytest-benchmark's sections and in the gate's own ``code``; saved onto an older
    baseline (its code read from git by the plugin itself), that one's sessions are read and
    kept as they were."""
    pytester.makeconftest(HOOKS)
    pytester.makepyfile(test_plain=PLAIN)
    out = pytester.path / "base.json"
    out.write_bytes(OLDER.read_bytes())
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--benchmark-max-time=0.05",
        f"--concurrency-save-baseline={out}",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    saved = baseline.load(out)
    assert saved.doc["commit_info"]["id"] == "c0ffee" * 6 + "beef"
    assert saved.doc["machine_info"]["node"] == "the-ci-runner"
    assert saved.meta["code"] == {"commit": "c0ffee" * 6 + "beef", "dirty": True}
    older = baseline.load(OLDER)
    kept = [s for s in saved.meta["history"] if s.get("code") == older.meta["code"]]
    assert kept, saved.meta["history"]
