"""The native reference rows (go, rust, kotlin): real builds and runs where the toolchain is
installed, the skip where it is not, a failed build, a wrong result, a hung program, the gate.

Real runs use the user's own build cache, keyed by source hash and toolchain version and written
atomically: each program is built once per source change, not once per session or tox env (a
first tokio or Maven build takes minutes). The build itself is tested on Go, in a cache of its
own. pytester moves HOME, so the cache and the toolchains' homes (rustup, cargo's registry,
Go's module cache, Maven's repository) are pinned to the real ones.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import need

from pytest_concurrency import backends, measure
from pytest_concurrency.backends import _native, toolchains
from pytest_concurrency.gate import verdicts
from pytest_concurrency.gate.compare import GateSettings, set_aside, summary
from pytest_concurrency.measure.records import Record
from pytest_concurrency.native import CORRUPT_ENV, build, checks
from pytest_concurrency.report import tables
from pytest_concurrency.workloads import WorkloadError, get

pytestmark = pytest.mark.timeout(1800)  # a first cargo or Maven build downloads and compiles

LANGUAGES = list(backends.NATIVE_SPECS)
REAL_HOME = Path.home()
SEEDS = f"""
import pytest

@pytest.mark.concurrency(workloads={list(checks.SEEDS)!r})  # the ones written natively
def test_seed_workload(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""
SMOKE_CASES = 8  # ring 2, chain 2, io 2, spawn 1, switch 1


REAL_CACHE = (
    os.environ.get("XDG_CACHE_HOME")
    if os.path.isabs(os.environ.get("XDG_CACHE_HOME", ""))
    else None
)


@pytest.fixture(autouse=True)
def toolchain_homes(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", REAL_CACHE or str(REAL_HOME / ".cache"))
    for var, default in (("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup"), ("GOPATH", "go")):
        monkeypatch.setenv(var, os.environ.get(var, str(REAL_HOME / default)))
    monkeypatch.setenv("MAVEN_OPTS", f"-Dmaven.repo.local={REAL_HOME / '.m2' / 'repository'}")
    monkeypatch.setattr(
        build, "_failed", {}
    )  # a failure in one test must not be replayed in the next


def needs(language: str):
    need(f"the {language} toolchain", toolchains.missing(language))


def run_seeds(pytester, language: str, *args: str, subprocess: bool = False):
    """A smoke-scale session of the seed workloads; ``subprocess`` for one that reaches the gate
    (scipy's numpy cannot be imported a second time in one process, after pytester unloads it)."""
    pytester.makepyfile(test_seeds=SEEDS)
    run = pytester.runpytest_subprocess if subprocess else pytester.runpytest
    return run(
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        "--concurrency-scale=smoke",
        f"--concurrency-backends={language}",
        "-rs",
        *args,
    )


# -- selection ---------------------------------------------------------------------------------


def test_native_rows_are_named_not_default():
    assert not set(backends.NATIVE_SPECS) & set(backends.DEFAULT_SPECS)
    assert backends.parse_list("asyncio, native") == ["asyncio", "go", "rust", "kotlin"]
    with pytest.raises(backends.UnknownBackend, match="native"):
        backends.parse_list("java")


def test_instructions_leave_native_rows_out_with_the_reason():
    # the native rows' class itself: the reason holds whether Go is installed here or not
    go = _native.Backend("go")
    reason = go.unsupported_measure(measure.instrument("instructions"))
    assert reason and "outside" in reason and "time" in reason
    assert go.unsupported_measure(measure.instrument("time")) is None


def test_a_missing_toolchain_skips_the_row_with_the_install_hint(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it: no go, cargo, mvn or java
    result = run_seeds(pytester, "native", "-k", "switch")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*go: go not found on PATH (install Go 1.21 or later: https://go.dev/doc/install)*",
            "*rust: cargo and rustc not found on PATH (install Rust with cargo: https://rustup.rs)*",
            "*kotlin: mvn and java not found on PATH (install Maven and a JDK 11 or later*",
        ]
    )


# -- building ----------------------------------------------------------------------------------


def test_a_failed_build_names_the_tool_and_shows_its_output(pytester, monkeypatch, tmp_path):
    fake = tmp_path / "go"
    fake.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        if [ "$1" = version ]; then echo "go version go0.0-fake linux/amd64"; exit 0; fi
        echo "./main.go:3:1: syntax error: a fake compiler refuses" >&2
        exit 1
    """)
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(toolchains, "version", lambda language: "go0.0-fake")
    result = run_seeds(pytester, "go", "-k", "switch or spawn")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*building the go native reference failed: `go build -trimpath -o prog .` exited with status 1*",
            "*./main.go:3:1: syntax error: a fake compiler refuses*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert not build.entry("go").exists()  # nothing half-built is left to reuse


@pytest.mark.slow
def test_a_build_is_cached_per_source_and_toolchain_and_appears_whole(monkeypatch, tmp_path):
    needs("go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    entry = build.entry("go")
    (entry.parent / f".{entry.name}-killed" / "out").mkdir(
        parents=True, exist_ok=True
    )  # a killed build's scratch
    command = build.command("go")
    assert command == [str(entry / "prog")] and os.access(command[0], os.X_OK)
    assert (entry / "toolchain.txt").read_text().strip() == toolchains.version("go")
    assert sorted(p.name for p in entry.parent.iterdir() if p.is_dir()) == [
        f".{entry.name}-killed",
        entry.name,
    ]
    monkeypatch.setattr(build, "_run", lambda *a: pytest.fail("built again although cached"))
    assert build.command("go") == command
    monkeypatch.setattr(toolchains, "version", lambda language: "go9.9-another")
    assert build.entry("go") != entry  # another toolchain builds again


# -- real runs ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.essential
@pytest.mark.parametrize("language", LANGUAGES)
def test_every_seed_workload_runs_checked_and_labelled(pytester, language):
    needs(language)
    result = run_seeds(pytester, language)
    result.assert_outcomes(passed=SMOKE_CASES)
    out = result.stdout.str()
    assert out.count(f"{language} (native reference)") == SMOKE_CASES, out
    assert "KiB/task" in out  # spawn's memory per live task


@pytest.mark.slow
@pytest.mark.parametrize("language", LANGUAGES)
def test_a_wrong_result_fails_naming_the_check(pytester, monkeypatch, language):
    needs(language)
    monkeypatch.setenv(CORRUPT_ENV, "1")  # the program corrupts one message per round
    result = run_seeds(pytester, language)
    result.assert_outcomes(failed=SMOKE_CASES)
    out = result.stdout.str()
    for name in ("ring", "chain", "io", "spawn", "switch"):
        assert f"{name}[" in out and f"on {language}: {name}(" in out, (name, out)
    assert out.count("gave a wrong result") >= SMOKE_CASES, out


@pytest.mark.slow
def test_a_hung_program_is_killed_at_the_timeout(pytester, monkeypatch, tmp_path):
    needs("go")
    pid_file = tmp_path / "pid"
    hang = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)",
    ]
    monkeypatch.setattr(build, "command", lambda language: hang)
    result = run_seeds(pytester, "go", "-k", "switch", "--concurrency-timeout=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*switch*on go: it reported nothing for 1 s, so it was killed*"])
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.slow
@pytest.mark.serial  # judges wall time
def test_native_rows_are_compared_but_gated_only_when_asked(pytester):
    needs("go")
    rounds = "--concurrency-rounds=12"  # enough for the statistics to call a 20x change
    saved = run_seeds(
        pytester, "go", "-k", "switch", rounds, "--concurrency-save-baseline=base.json"
    )
    saved.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "base.json").read_text())
    for bench in doc["benchmarks"]:  # the baseline ran 20x as fast: a regression no noise explains
        bench["stats"]["data"] = [x / 20 for x in bench["stats"]["data"]]
        bench["extra_info"]["foreign_cpu"] = (
            os.cpu_count()
        )  # as busy as can be: no rise in load to excuse it
    (pytester.path / "base.json").write_text(json.dumps(doc))

    shown = run_seeds(
        pytester, "go", "-k", "switch", rounds, "--concurrency-baseline=base.json", subprocess=True
    )
    assert shown.ret == 0, shown.stdout.str()
    shown.stdout.fnmatch_lines(
        ["go (native reference) *reference", "Gate: 0 regressions, 1 native reference"]
    )

    gated = run_seeds(
        pytester,
        "go",
        "-k",
        "switch",
        rounds,
        "--concurrency-baseline=base.json",
        "--concurrency-gate-native",
        subprocess=True,
    )
    assert gated.ret != 0
    gated.stdout.fnmatch_lines(["go (native reference) *REGRESSED", "Gate: 1 regression*"])


# -- checks, reports and the gate, without a toolchain -----------------------------------------


@pytest.mark.parametrize(
    "workload, params, report",
    [
        (
            "ring",
            {"n": 2, "m": 3, "capacity": 0},
            {"received": 3, "weighted": 5, "bad": None},
        ),  # order sum off
        (
            "ring",
            {"n": 2, "m": 3, "capacity": 0},
            {"received": 2, "weighted": 4, "bad": None},
        ),  # one lost
        (
            "chain",
            {"workers": 1, "events": 3, "capacity": 1, "payload": "int", "size": 0},
            {"receivers": [[3, 4, -1, 0]]},
        ),
        (
            "chain",
            {"workers": 2, "events": 3, "capacity": 1, "payload": "int", "size": 0},
            {"receivers": [[3, 3, -1, 0]]},
        ),
        ("switch", {"rounds": 2}, {"answered": 2, "bad": [1, 3]}),
        (
            "spawn",
            {"count": 3},
            {"seen": 3, "seen_sum": 4, "returned": 3, "wrong": 0, "first_wrong": None},
        ),
        (
            "spawn",
            {"count": 3},
            {"seen": 3, "seen_sum": 3, "returned": 3, "wrong": 1, "first_wrong": [0, 1]},
        ),
        (
            "io",
            {"tasks": 2, "latency": 0.01, "transport": "timer"},
            {"replies": [[0, 10_000_000], [0, 10_000_000]]},
        ),
        (
            "io",
            {"tasks": 1, "latency": 0.01, "transport": "timer"},
            {"replies": [[0, 1_000]]},
        ),  # did not wait
        ("ring", {"n": 2, "m": 3, "capacity": 0}, {"received": 3}),  # malformed
    ],
)
def test_checks_refuse_a_wrong_report(workload, params, report):
    with pytest.raises(WorkloadError, match="gave a wrong result"):
        checks.verify(get(workload), params, report)


def test_checks_accept_a_right_report():
    ring = {"n": 2, "m": 3, "capacity": 0}
    assert (
        checks.verify(
            get("ring"), ring, {"received": 3, "weighted": 1 * 2 + 2 * 1 + 3 * 0, "bad": None}
        ).ops
        == 6
    )
    chain = {"workers": 1, "events": 3, "capacity": 1, "payload": "int", "size": 0}
    assert checks.verify(get("chain"), chain, {"receivers": [[3, 3, -1, 0]]}).ops == 3


def _record(backend: str) -> Record:
    return Record(
        "ring", {"n": 2}, backend, [1.0, 1.1], ops=2, unit="hop", extra={"measure": "time"}
    )


def test_tables_label_native_rows():
    rows = {
        row.backend: row.cells["backend"]
        for row in tables.build([_record("go"), _record("asyncio")])[0].rows
    }
    assert rows == {"go": "go (native reference)", "asyncio": "asyncio"}


def test_the_gate_sets_native_rows_aside():
    result = verdicts.GateResult(
        verdicts=[
            verdicts.Verdict(
                ("ring", "n=2", "go"), verdicts.REGRESSED, change=0.5, interference="busy"
            ),
            verdicts.Verdict(("ring", "n=2", "asyncio"), verdicts.UNCHANGED, change=0.01),
        ]
    )
    result.memory = verdicts.MemoryResult(
        [
            verdicts.MemoryVerdict(
                ("spawn", "count=10", "go"), "kib_per_task", verdicts.REGRESSED, change=0.5
            ),
            verdicts.MemoryVerdict(
                ("spawn", "count=10", "asyncio"), "kib_per_task", verdicts.UNCHANGED
            ),
        ],
        threshold=0.10,
    )
    set_aside(result, backends.is_native)
    result.summary = summary(result, GateSettings(), measure.instrument("time"))
    go, asyncio = result.verdicts
    assert (go.status, asyncio.status) == (verdicts.REFERENCE, verdicts.UNCHANGED)
    assert "--concurrency-gate-native" in go.note and not result.failed
    assert "1 native reference (not gated)" in result.summary
    assert [v.key[2] for v in result.memory.verdicts] == ["asyncio"] and not result.memory.failed


def test_the_package_ships_every_native_source():
    cfg = (Path(__file__).resolve().parent.parent / "setup.cfg").read_text()
    shipped = [
        line.strip()
        for line in cfg.split("[options.package_data]")[1].split("[")[0].splitlines()
        if line.strip().startswith("native/")
    ]
    package = toolchains.SOURCES.parent
    for language in LANGUAGES:
        for path in build._source_files(language):
            assert any(path.relative_to(package).match(glob) for glob in shipped), path
