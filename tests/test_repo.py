"""What a user who clones the repository meets: its docs, and its benchmarks under -W error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = [
    "README.md",
    "setup.cfg",
    "tox.ini",
    "toxfile.py",
    "benchmarks",
    "docs",
    "examples",
    "pytest_concurrency",
    "evidence",
]


def _texts():
    for name in SHIPPED:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if file.suffix in (".png", ".pyc") or "__pycache__" in file.parts:
                continue
            yield file, file.read_text(encoding="utf-8")


OUTSIDE = "../" + "shared"  # held the seed documents where this grew; users do not have it


@pytest.mark.once
def test_nothing_points_outside_the_repository():
    offenders = [str(f.relative_to(ROOT)) for f, text in _texts() if OUTSIDE in text]
    assert not offenders, f"these files point to {OUTSIDE}, which users do not have: {offenders}"


@pytest.mark.once
def test_readmes_local_links_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#:]+)\)", readme)  # [text](path), not URLs
    assert "docs/seeds.md" in links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.once
def test_seed_docs_cover_every_workload():
    seeds = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    for seed, workload in [
        ("000", "ring"),
        ("001", "switch"),
        ("002", "chain"),
        ("003", "spawn"),
        ("004", "io"),
    ]:
        assert re.search(rf"^## {seed}: .*workload `{workload}`$", seeds, re.M), (seed, workload)


# on every Python (the others here are ``once``): which warnings a session meets depends on it
@pytest.mark.timeout(300)
def test_benchmarks_run_under_warnings_as_errors_without_the_test_extras():
    # As a user with only [all] installed: no pytest-timeout, no xdist. An ini key only a
    # test plugin knows (setup.cfg's `timeout` once) is a warning, and -W error made it an
    # INTERNALERROR before any benchmark ran.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks",
            "-W",
            "error",
            "-p",
            "no:timeout",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "--benchmark-only",
            "--concurrency-scale=smoke",
            "--concurrency-backends=threading,asyncio",
            "-k",
            "spawn",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "INTERNALERROR" not in out and "Unknown config option" not in out, out
    assert re.search(r"\b[1-9]\d* passed\b", out), out


@pytest.mark.once
def test_readme_starts_with_the_two_commands_and_ci_runs_them():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"```sh\n(.*?)```", readme, re.S)
    assert first_block and readme.index("```sh") < 200, "the README must open with its two commands"
    commands = [
        line.split("  #")[0].strip() for line in first_block.group(1).splitlines() if line.strip()
    ]
    assert [c.split("&&")[-1].strip() for c in commands] == [
        ".venv/bin/tox -e bench",
        ".venv/bin/tox",
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^phase .* \.venv/bin/tox$", ci, re.M), (
        ".ci/run must run the README's test command"
    )
    assert re.search(r"^phase .* \.venv/bin/tox -e bench\b", ci, re.M), (
        ".ci/run must run the README's main job"
    )


@pytest.mark.once
def test_the_security_page_names_every_environment_variable_the_package_reads():
    from pytest_concurrency.backends import child_env

    read = set(child_env.NAMES) | {child_env.PAD}
    for path in (ROOT / "pytest_concurrency").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        read |= set(
            re.findall(
                r"""(?:environ\.get|getenv|environ\[|setdefault)\(?["']([A-Z_]+)["']""", text
            )
        )
    page = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    missing = sorted(name for name in read if f"`{name}`" not in page)
    assert "CI" in read and "XDG_CACHE_HOME" in read and not missing, missing


@pytest.mark.once
def test_ci_runs_the_tests_strictly_and_tox_passes_it_on():
    """A green .ci/run proves the tests ran: it sets the variable tests/conftest.py reads (a missing
    tool fails instead of skipping), and tox passes it to every env."""
    from conftest import STRICT_ENV

    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    assert re.search(rf"^export {STRICT_ENV}=1$", ci, re.M)
    passenv = re.search(r"^passenv =\n((?:    .*\n)+)", tox, re.M)
    assert passenv and re.search(rf"^    {STRICT_ENV}$", passenv.group(1), re.M), passenv


@pytest.mark.once
def test_a_missing_tool_skips_here_and_fails_under_ci(monkeypatch):
    from conftest import STRICT_ENV, need

    need("valgrind", None)  # here: nothing happens
    monkeypatch.delenv(STRICT_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="valgrind: not on PATH"):
        need("valgrind", "not on PATH")
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{STRICT_ENV}=1 says it must be"):
        need("valgrind", "not on PATH")
