"""Issue 48's differential check: real suites, unmodified, with the plugin and without it.

The plugin must never change a real suite's outcome. Each suite is taken from its library's
published source distribution (``pip download --no-binary DIST --no-deps``) and run as its
project configured it: the sdist's tree is copied into a directory of its own as it is (its
``pytest.ini`` / ``setup.cfg`` / ``pyproject.toml``, ``.coveragerc``, ``tests/`` and their
conftests), without the package's source directory, so that the tests import the library
installed from its wheel. Unlike ``existing_suites.py`` nothing is overridden: **no** ``-o
addopts=``; the projects' addopts (coverage, doctest modules, xdist's ``--numprocesses``,
``-m``, ``--strict-markers``) and ``filterwarnings = error`` stay on, and their plugins are
installed in the suite's venv. The only arguments added to a session are ``--benchmark-only``,
``--junitxml`` (to read each test's outcome), ``--benchmark-json`` (``--benchmark-save-data`` too
in the judged timed modes: their rounds, to judge again offline), ``-p no:cacheprovider`` and
the plugin's options. The run directory is a git repository of one commit (the sdist's tree), as a
project's CI checkout is: each session records that commit as its code's identity.

A session is one of these modes, each beside the plain pytest-benchmark session
(``-p no:concurrency``) of the same selection in the same condition:

  time-save / time-aa         a stored time baseline saved, then judged A/A (the same code)
  time-aa-every               that A/A with ``--concurrency-remeasure=every``: every benchmark's
                              test runs again in a fresh process (its second session)
  count-save / count-aa       ``--concurrency-measure=instructions``: saved, then A/A
  time-against / count-against  ``--concurrency-against=DIST==PREVIOUS`` (if the suite has one)
  slowdown                    a copy of the release with one hot function slowed
                              (``existing_suites.slowed_copy``), first on PYTHONPATH, counted
                              against the stored counted baseline: it must fail naming them
  time-slowdown               the same slowed copy timed against the stored time baseline

Conditions: ``quiet`` (nothing added; the machine may be shared: ``/proc/loadavg`` is recorded
before and after every session) and ``busy`` (one ``yes > /dev/null`` started beside the
sessions, killed after).

The differential check, per session against its plain session: every test's outcome
(passed / failed / skipped / xfailed / error, from the junit XML) identical, the exit code
identical apart from the gate's own verdict (1 with a ``FAILED: N regressed`` or ``against the
base FAILED: ...`` line, 7, 8), and
whether the output holds a ``Traceback``, an ``ExceptionGroup``, a frame of ``pytest_concurrency``
or a ``Warning`` line the plain session had not. Every session is a line of
``evidence/real_suites/results.jsonl`` (``--out``); a markdown table is printed at the end.

    python3 evidence/real_suites.py --smoke          # propcache: plain, time-save, time-aa
    python3 evidence/real_suites.py --suites aiohttp,yarl --conditions busy \\
        --modes time-save,time-aa-every,count-save,count-aa,slowdown
    python3 evidence/real_suites.py --suites multidict,propcache,zeroconf --conditions quiet \\
        --modes time-save,time-aa
    python3 evidence/real_suites.py                  # the whole matrix (hours on 2 cores)
    python3 evidence/real_suites.py --table evidence/real_suites/results.jsonl   # its table
    python3 evidence/real_suites.py --judge-again DIR --conditions quiet [--rebuild]
                                                     # a work dir's time A/As judged again offline
    python3 evidence/real_suites.py --thresholds DIR --conditions quiet
                                                     # the thresholds its first time A/As were judged at

It needs PyPI (sdists, wheels, the previous releases) and valgrind for the counted modes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

# beside this script (python puts its folder first on the import path): existing_suites.py's helpers
import existing_suites
from existing_suites import loadavg, read, slowed_copy

REPO = existing_suites.REPO
OUT = REPO / "evidence" / "real_suites" / "results.jsonl"
BASE_DEPS = ["pytest-benchmark", "pytest-codspeed", "coverage", "pytest-cov", "pytest-xdist"]


@dataclasses.dataclass
class RealSuite:
    dist: str
    version: str
    previous: str | None  # for --concurrency-against
    source_dirs: list  # the sdist's package source, left out of the run directory
    deps: list  # beside BASE_DEPS: what its config, conftest and tests import
    select: list  # the timed modes' selection (paths, node ids, -k ...)
    count_select: list  # the counted modes' (smaller: valgrind)
    covers: str
    slowdown: existing_suites.Suite | None = None  # existing_suites' definition of one
    slowed: str = ""  # a regular expression every benchmark the slowdown must regress matches


def slowdown(
    dist: str, version: str, module: str, wrap: str, iterations: int
) -> existing_suites.Suite:
    """A slowdown of a suite existing_suites.py does not define: only what slowed_copy reads."""
    return existing_suites.Suite(
        dist=dist, head=version, base="", deps=[], select=[], keyword="", smoke_select=[],
        smoke_keyword="", module=module, target="", wrap=wrap, slowed="", iterations=iterations,
    )  # fmt: skip


SUITES = {
    "aiohttp": RealSuite(
        dist="aiohttp",
        version="3.14.5",
        previous="3.14.4",
        source_dirs=["aiohttp"],
        deps=["pytest-mock", "pytest-timeout", "freezegun", "blockbuster", "trustme"],
        select=existing_suites.SUITES["aiohttp"].select
        + ["-k", existing_suites.SUITES["aiohttp"].keyword],
        count_select=[
            "tests/test_benchmarks_client.py::test_one_hundred_simple_get_requests",
            "tests/test_benchmarks_client.py::test_one_hundred_simple_post_requests",
        ],
        covers="asyncio client/server on the loop fixture (aiohttp.pytest_plugin), "
        "filterwarnings = error, xdist + coverage + doctests in addopts, timeout = 120",
        slowdown=existing_suites.SUITES["aiohttp"],
        # the client's handler makes a Response; the web response tests make one themselves
        slowed=r"^test_(one_hundred_simple_(get|post)_requests|simple_web_response|web_response_with)",
    ),
    "yarl": RealSuite(
        dist="yarl",
        version="1.25.1",
        previous="1.24.5",
        source_dirs=["yarl"],
        deps=["pytest-mock", "pytest-timeout", "covdefaults", "Cython"],  # .coveragerc's plugins
        select=["tests/test_url_benchmarks.py"],
        count_select=["tests/test_url_benchmarks.py", "-k", existing_suites.SUITES["yarl"].keyword],
        covers="90 benchmarks in one file, filterwarnings = error, "
        "--numprocesses=auto + coverage + doctests in addopts",
        slowdown=existing_suites.SUITES["yarl"],
        slowed=r"^test_url_build_",
    ),
    "multidict": RealSuite(
        dist="multidict",
        version="7.2.1",
        previous="7.2.0",
        source_dirs=["multidict"],
        deps=["pytest-mock"],
        select=["tests/test_multidict_benchmarks.py", "-k", "getitem or insert"],
        # one test on both implementations and both classes (4): valgrind took 20 min for -k insert (10)
        count_select=["tests/test_multidict_benchmarks.py", "-k", "test_multidict_insert_str"],
        covers="pytest-codspeed style (BenchmarkFixture, @benchmark), parametrized by a "
        "conftest fixture (C extension and pure Python), module pytestmark, custom markers "
        "under --strict-markers, filterwarnings = error, coverage + doctests",
        # the pure-Python MultiDict's (and so CIMultiDict's) item assignment; the C one is as it was
        slowdown=slowdown(
            "multidict",
            "7.2.1",
            "multidict/_multidict_py.py",
            "MultiDict.__setitem__ = _slowed(MultiDict.__setitem__)",
            5,
        ),  # fmt: skip
        slowed=r"[\[-]py[\]-]",  # the ids: [py-cs], [c-ci], ...
    ),
    "propcache": RealSuite(
        dist="propcache",
        version="0.5.4",
        previous="0.5.3",
        source_dirs=["src"],
        deps=["pytest-mock", "covdefaults", "Cython"],  # .coveragerc's plugins
        select=["tests/test_benchmarks.py"],
        count_select=["tests/test_benchmarks.py"],
        covers="pytest-codspeed style, --numprocesses=auto --numprocesses=0 + coverage in "
        "addopts, filterwarnings = error",
        # a release whose under_cached_property lost its C extension: the pure-Python class
        slowdown=slowdown(
            "propcache",
            "0.5.4",
            "propcache/_helpers.py",
            "from ._helpers_py import under_cached_property  # noqa",
            0,
        ),  # fmt: skip
        slowed=r"^test_under_cached_property",
    ),
    "zeroconf": RealSuite(
        dist="zeroconf",
        version="0.154.0",
        previous="0.153.0",
        source_dirs=["src"],
        deps=["pytest-asyncio>=1.4.1,<1.5", "pytest-timeout", "blockbuster"],
        select=["tests/benchmarks"],
        count_select=["tests/benchmarks/test_ipaddress.py", "tests/benchmarks/test_send.py"],
        covers="pytest-asyncio: async tests on its loop fixture (AsyncZeroconf on 127.0.0.1), "
        "an autouse fixture that fails a test leaving a thread, benchmark.pedantic(setup=...), "
        "-Wdefault + coverage in addopts, pyproject.toml config",
        # Zeroconf.async_send is pure Python (zeroconf/_core.py has no compiled twin)
        slowdown=slowdown(
            "zeroconf",
            "0.154.0",
            "zeroconf/_core.py",
            "Zeroconf.async_send = _slowed(Zeroconf.async_send)",
            2000,
        ),  # fmt: skip
        slowed=r"^test_sending_packets",
    ),
}

MODES = (
    "time-save",
    "time-aa",
    "time-aa-every",
    "count-save",
    "count-aa",
    "time-against",
    "count-against",
    "slowdown",
    "time-slowdown",
)
#: each suite's sessions of the issue's matrix, in order: three saves then three A/As (the
#: third with every benchmark's second session), a counted save and A/A, both against its
#: previous release, and the injected slowdown counted against the counted save
MATRIX = (
    "time-save,time-save,time-save,time-aa,time-aa,time-aa-every,"
    "count-save,count-aa,time-against,count-against,slowdown"
)
SMOKE = {"suites": "propcache", "modes": "time-save,time-aa", "conditions": "quiet"}
PLUGIN_COMMIT = ""  # the checkout's commit, recorded in every row
COUNT = ["--concurrency-measure=instructions"]
XDIST_REFUSED = "Can't have both --benchmark-only and --benchmark-disable"


def sh(cmd: list, log) -> None:
    subprocess.run([str(c) for c in cmd], check=True, stdout=log, stderr=log)


def prepare(suite: RealSuite, work: Path, log) -> tuple[Path, Path]:
    """The suite's venv (uv) and run directory: its sdist as it is, but its package source."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    venv = work / f"venv-{suite.dist}"
    py = venv / "bin" / "python"
    if not py.exists():
        sh([uv, "venv", "-q", "--seed", "--python", sys.executable, venv], log)
        reqs = [REPO, *BASE_DEPS, f"{suite.dist}=={suite.version}", *suite.deps]
        sh([uv, "pip", "install", "-q", "--python", py, *reqs], log)
    run = work / f"run-{suite.dist}"
    if not run.exists():
        sdists = work / "sdists"
        sdists.mkdir(exist_ok=True)
        name = f"{suite.dist}-{suite.version}"
        if not list(sdists.glob(f"{name}.tar.gz")):
            sh([py, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", suite.dist,
                f"{suite.dist}=={suite.version}", "-d", sdists], log)  # fmt: skip
        (tarball,) = sdists.glob(f"{name}.tar.gz")
        with tarfile.open(tarball) as tar:
            tar.extractall(sdists, filter="data")
        shutil.copytree(
            sdists / name,
            run,
            ignore=lambda d, names: suite.source_dirs if Path(d) == sdists / name else [],
        )
    if not (run / ".git").exists():  # a checkout, as in a project's CI: its sessions' code identity
        who = {"NAME": "evidence", "EMAIL": "evidence@localhost"}
        env = {
            **os.environ,
            **{f"GIT_{r}_{k}": v for r in ("AUTHOR", "COMMITTER") for k, v in who.items()},
        }
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", name]):
            subprocess.run(["git", "-C", str(run), *cmd], check=True, env=env, stdout=log)
    return py, run


OUTCOMES = ("error", "failure", "skipped")


def outcomes(junit: Path) -> dict:
    """Every test's outcome in a junit XML file (xunit1 or 2): passed, failed, skipped,
    xfailed, error; a test with an error in its setup or teardown reads error."""
    if not junit.exists():
        return {}
    found: dict = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag: child for child in case if child.tag in OUTCOMES}
        if "error" in tags:
            what = "error"
        elif "failure" in tags:
            what = "failed"
        elif "skipped" in tags:
            xfail = tags["skipped"].get("type") == "pytest.xfail"
            what = "xfailed" if xfail else "skipped"
        else:
            what = "passed"
        # a second entry for the same test (its teardown errored) keeps the worse outcome
        if found.get(key) in ("error", "failed") and what not in ("error", "failed"):
            continue
        found[key] = what
    return found


TROUBLES = ("traceback", "exception_group", "faulthandler_dump", "plugin_frame")
WARNING = re.compile(r"\b\w*Warning\b")
ADDRESS = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?")


def troubles(out: str, plain_out: str | None) -> dict:
    """What the output holds that a plugin could have put there."""
    plain_out = plain_out or ""
    seen = {ADDRESS.sub("N", x.strip()) for x in plain_out.splitlines()}
    new_warnings = [
        line.strip()
        for line in out.splitlines()
        if WARNING.search(line) and ADDRESS.sub("N", line.strip()) not in seen
    ]
    return {
        # only what the plain session of the same selection did not print
        "traceback": out.count("Traceback (most recent call last)")
        > plain_out.count("Traceback (most recent call last)"),
        "exception_group": out.count("ExceptionGroup") > plain_out.count("ExceptionGroup"),
        # faulthandler's dump of every thread (the suites' faulthandler_timeout, a stall)
        "faulthandler_dump": out.count("(most recent call first)")
        > plain_out.count("(most recent call first)"),
        "plugin_frame": "pytest_concurrency/" in out,
        "new_warning_lines": new_warnings[:10],
    }


def gate_exit(code: int, verdict: str, regressed: list) -> bool:
    """The exit is the gate's own verdict (not pytest's)."""
    failed = verdict.startswith(("FAILED:", "against the base FAILED:"))  # stored or paired gate
    return code in (7, 8) or (code == 1 and failed and bool(regressed))


def session(
    py: Path, run: Path, args: list, selection: list, name: str, logs: Path, env=None, bench=True
):
    """One pytest session of the suite; ``bench``: with pytest-benchmark's ``--benchmark-only`` and
    ``--benchmark-json`` (not in a session where pytest-codspeed measures: it switches them off)."""
    junit = logs / f"{name}.xml"
    junit.unlink(missing_ok=True)
    benchmark = ["--benchmark-only", f"--benchmark-json={logs / name}.json"] if bench else []
    cmd = [
        str(py), "-m", "pytest", *benchmark[:1], "-p", "no:cacheprovider",
        f"--junitxml={junit}", *benchmark[1:], *args, *selection,
    ]  # fmt: skip
    before = loadavg()
    started = time.perf_counter()
    done = subprocess.run(
        cmd,
        cwd=run,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = time.perf_counter() - started
    (logs / f"{name}.log").write_text(done.stdout)
    return {
        "exit": done.returncode,
        "out": done.stdout,
        "seconds": round(seconds, 1),
        "load_before": before,
        "load_after": loadavg(),
        "outcomes": outcomes(junit),
        "command": " ".join(cmd[1:]).replace(str(logs) + "/", ""),
    }


def plan(suite: RealSuite, work: Path, mode: str) -> tuple:
    """A mode's arguments, selection and environment."""
    time_base = work / f"{suite.dist}-time.json"
    count_base = work / f"{suite.dist}-count.json"
    against = f"--concurrency-against={suite.dist}=={suite.previous}"
    timed, counted = suite.select, suite.count_select
    # the judged timed sessions' first rounds kept (LOGS/NAME.json), to judge them again offline
    kept = "--benchmark-save-data"
    return {
        "time-save": ([f"--concurrency-save-baseline={time_base}"], timed, None),
        "time-aa": ([f"--concurrency-baseline={time_base}", kept], timed, None),
        "time-aa-every": (
            [f"--concurrency-baseline={time_base}", "--concurrency-remeasure=every", kept],
            timed,
            None,
        ),
        "count-save": ([*COUNT, f"--concurrency-save-baseline={count_base}"], counted, None),
        "count-aa": ([*COUNT, f"--concurrency-baseline={count_base}"], counted, None),
        "time-against": ([against], timed, None),
        "count-against": ([*COUNT, against], counted, None),
        "slowdown": ([*COUNT, f"--concurrency-baseline={count_base}"], counted, "slowed"),
        "time-slowdown": ([f"--concurrency-baseline={time_base}"], timed, "slowed"),
    }[mode]


def run_suite(suite: RealSuite, args, work: Path, logs: Path, condition: str, out) -> list:
    with open(logs / f"setup-{suite.dist}.log", "a") as log:
        py, run = prepare(suite, work, log)
    rows: list = []
    plains: dict = {}  # selection -> the plain session of this condition
    for kind in ("time", "count"):  # a save appends a session to a baseline file: start anew
        if f"{kind}-save" in args.modes.split(","):
            (work / f"{suite.dist}-{kind}.json").unlink(missing_ok=True)
    for mode in args.modes.split(","):
        if mode in ("time-against", "count-against") and not suite.previous:
            continue
        if mode.endswith("slowdown") and suite.slowdown is None:
            continue
        extra, selection, env = plan(suite, work, mode)
        if env == "slowed":
            iterations = args.slow_iterations or suite.slowdown.iterations
            env = {"PYTHONPATH": str(slowed_copy(suite.slowdown, py, work, iterations))}
        key = tuple(selection)
        if key not in plains:
            name = f"{suite.dist}-{condition}-plain-{len(plains)}"
            plains[key] = session(py, run, ["-p", "no:concurrency"], selection, name, logs)
            rows.append(record(suite, "plain", condition, plains[key], None, out))
            if XDIST_REFUSED in plains[key]["out"]:
                # pytest-benchmark alone refuses --benchmark-only beside the addopts' xdist
                # (exit 4): the reference is then the session without workers, as the plugin
                # runs it (it sets -n aside)
                args0 = ["-p", "no:concurrency", "--numprocesses=0"]
                plains[key] = session(py, run, args0, selection, f"{name}-n0", logs)
                rows.append(record(suite, "plain -n0", condition, plains[key], None, out))
        repeat = sum(1 for r in rows if r["mode"] == mode)  # a mode given more than once
        name = f"{suite.dist}-{condition}-{mode}" + (f"-{repeat + 1}" if repeat else "")
        done = session(py, run, extra, selection, name, logs, env)
        rows.append(record(suite, mode, condition, done, plains[key], out))
    return rows


def record(suite: RealSuite, mode: str, condition: str, done: dict, plain: dict | None, out):
    verdict, judged, regressed, sides = read(done["out"])
    tail = next((x for x in reversed(done["out"].splitlines()) if x.startswith("=")), "")
    first = next((x.strip() for x in done["out"].splitlines() if x.strip()), "")
    row = {
        "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "suite": suite.dist,
        "version": suite.version,
        "mode": mode,
        "condition": condition,
        "tests": len(done["outcomes"]),
        "exit": done["exit"],
        "verdict": verdict if not mode.startswith("plain") else tail.strip("= ") or first,
        "judged": judged,
        "regressed": regressed,
        "pytest_summary": tail.strip("= "),
        "seconds": done["seconds"],
        "load_before": done["load_before"],
        "load_after": done["load_after"],
        "command": done["command"],
        "plugin": PLUGIN_COMMIT,
        **troubles(done["out"], plain["out"] if plain else None),
    }
    if plain is not None:
        diffs = {
            t: [plain["outcomes"].get(t, "-"), done["outcomes"].get(t, "-")]
            for t in sorted(set(plain["outcomes"]) | set(done["outcomes"]))
            if plain["outcomes"].get(t) != done["outcomes"].get(t)
        }
        row.update(
            plain_exit=plain["exit"],
            plain_seconds=plain["seconds"],
            outcomes_identical=not diffs,
            outcome_diffs=dict(list(diffs.items())[:20]),
            exit_identical=done["exit"] == plain["exit"]
            or (plain["exit"] == 0 and gate_exit(done["exit"], verdict, regressed)),
        )
    if sides:
        row["sides"] = sides
    out.write(json.dumps(row) + "\n")
    out.flush()
    print(line(row), flush=True)
    return row


def line(r: dict) -> str:
    ratio = f"{r['seconds'] / r['plain_seconds']:.1f}x" if r.get("plain_seconds") else "-"
    same = {True: "yes", False: "NO", None: "-"}
    found = [k for k in TROUBLES if r.get(k)]
    if r["new_warning_lines"] and not r["mode"].startswith("plain"):  # (plain: all are new)
        found.append(f"{len(r['new_warning_lines'])} new Warning lines")
    verdict = r["verdict"].strip("= ").replace("|", "/") or "(see the log)"
    verdict = verdict if len(verdict) < 160 else verdict[:157] + "..."
    if r["regressed"]:
        verdict += f" [regressed: {', '.join(r['regressed'])}]"
    return (
        f"| {r['suite']} | {r['version']} | {r['tests']} | {r['mode']} | {r['condition']} | "
        f"{r['exit']} | {verdict} | {r.get('plain_exit', '-')} | "
        f"{same[r.get('outcomes_identical')]} | {same[r.get('exit_identical')]} | "
        f"{', '.join(found) or '-'} | {r['seconds']:.0f} s ({ratio}) | "
        f"{r['load_before']} -> {r['load_after']} |"
    )


HEADER = (
    "| suite | version | tests | mode | condition | exit | the plugin's verdict | plain exit | "
    "outcomes identical | exit identical | traceback / plugin frame / warnings | wall (x plain) | "
    "load before -> after |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def unexpected(r: dict) -> str | None:
    if r["mode"] == "plain -n0" or (r["mode"] == "plain" and r["exit"] != 4):
        return "the suite's own session failed" if r["exit"] != 0 else None
    if r["mode"] == "plain":
        return None  # pytest-benchmark's refusal of xdist: its -n0 session is the reference
    if not r["outcomes_identical"] or not r["exit_identical"]:
        return "outcome or exit changed"
    if any(r.get(k) for k in TROUBLES) or r["new_warning_lines"]:
        return "traceback, thread dump, plugin frame or new warning in the output"
    slowed = r["mode"].endswith("slowdown")  # counted, or timed
    if slowed and (r["exit"] != 1 or not r["regressed"]):
        return "slowdown not caught"
    if slowed and (wrong := [n for n in r["regressed"] if not re.search(
            SUITES[r["suite"]].slowed, n)]):  # fmt: skip
        return f"the slowdown regressed benchmarks it does not touch: {', '.join(wrong)}"
    if r["mode"] in ("count-aa", "count-against") and (
        r["regressed"] or "FAILED" in r["verdict"]
    ):  # (its exit is plain's when nothing failed: yarl's own coverage exits 1)
        return "counted A/A failed"
    if r["mode"].startswith("time") and not slowed and r["regressed"]:
        return "time A/A read a regression (noise under load?)"
    return None


def run_all(args, work: Path, out) -> list:
    """Every condition's sessions of every suite; the table of them printed."""
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    rows: list = []
    print(HEADER, flush=True)
    for condition in args.conditions.split(","):
        busy = None
        if condition == "busy":  # one busy loop beside the sessions, ended after them
            busy = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
        try:
            for name in args.suites.split(","):
                rows += run_suite(SUITES[name], args, work, logs, condition, out)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    print(f"\n{HEADER}")
    for r in rows:
        print(line(r))
    return rows


def thresholds(work: Path, condition: str) -> list[str]:
    """The thresholds the gate judged each suite's first stored time A/A of ``condition`` at, in a
    work directory: the default, or widened by how far each benchmark drifts between the
    baseline's sessions (shrunk toward its suite's typical drift: ``stats.allowance``), read from
    the gate's own verdicts (``compare``, this machine's meta as ``judge_again``'s)."""
    from pytest_concurrency.gate import compare
    from pytest_concurrency.measure.records import Document
    from pytest_concurrency.store import baseline, history

    lines = []
    for suite in SUITES.values():
        base = work / f"{suite.dist}-time.json"
        first = work / "logs" / f"{suite.dist}-{condition}-time-aa.json"
        if not base.exists() or not first.exists():
            continue
        result = compare.compare(
            history.Baseline.of(json.loads(base.read_text())),
            Document.of(json.loads(first.read_text())).records,
            baseline.current_meta({}, None),
        )
        judged = [v for v in result.verdicts if v.threshold is not None]
        if not judged:
            continue
        at = sorted(v.threshold for v in judged)
        quartiles = "/".join(f"{at[round(q * (len(at) - 1))]:.0%}" for q in (0, 0.25, 0.5, 0.75, 1))
        by_suite = sum(v.widened_by == compare.SUITE_DRIFT for v in judged)
        by_own = sum(bool(v.widened_by) for v in judged) - by_suite
        lines.append(
            f"{suite.dist}: {len(judged)} benchmarks judged at min/q1/median/q3/max {quartiles}; "
            f"widened by their own drift {by_own}, by the suite's {by_suite}"
        )
    return lines


def rebuilt(work: Path, suite: RealSuite, condition: str) -> dict | None:
    """The suite's stored time baseline saved again from its three saves' JSON by today's save
    rule (``gate.add_session``), each session's code one clean commit, as in a git checkout."""
    from pytest_concurrency.gate import compare
    from pytest_concurrency.measure.records import Document
    from pytest_concurrency.store.history import SECTION, Baseline

    meta = dict(json.loads((work / f"{suite.dist}-time.json").read_text())[SECTION])
    meta.pop("history", None)
    meta["code"] = {"commit": "0" * 40, "dirty": False}
    doc = None
    for name in ("time-save", "time-save-2", "time-save-3"):
        path = work / "logs" / f"{suite.dist}-{condition}-{name}.json"
        if not path.exists():
            return None
        saved = {**json.loads(path.read_text()), SECTION: dict(meta)}
        doc, _ = compare.add_session(saved, doc and Baseline.of(doc), Document.of(saved).records)
    return doc


def judge_again(work: Path, condition: str, rebuild: bool = False) -> str:
    """Each suite's stored time A/As of ``condition`` in a work directory judged again offline by
    today's gate, with and without its rules (control_evidence.py's: over the controls, at 3%,
    raw, and pytest-benchmark's mean:5% against the plain session), each suspect's second process
    being the next A/A's rounds (the last one's, the one before). The meta is this machine's now
    (the sessions' own is not in their JSON): the calibration reads the same on both sides.
    ``rebuild``: against the baseline saved again by today's save rule (``rebuilt``)."""
    import control_evidence

    lines = []
    for suite in SUITES.values():
        base = work / f"{suite.dist}-time.json"
        logs = work / "logs"
        aas = sorted(
            logs.glob(f"{suite.dist}-{condition}-time-aa*.json"), key=lambda p: p.stat().st_mtime
        )
        # the plain session of the timed selection (-n0 where pytest-benchmark refused xdist)
        plain = logs / f"{suite.dist}-{condition}-plain-0-n0.json"
        plain = plain if plain.exists() else logs / f"{suite.dist}-{condition}-plain-0.json"
        if not base.exists() or not aas or not plain.exists():
            continue
        base_doc = rebuilt(work, suite, condition) if rebuild else json.loads(base.read_text())
        pb_doc = json.loads(plain.read_text())
        if base_doc is None:
            continue
        for i, path in enumerate(aas):
            other = aas[i + 1] if i + 1 < len(aas) else aas[i - 1] if i else None
            second = json.loads(other.read_text()) if other else None
            doc = json.loads(path.read_text())
            judged = control_evidence.judge(base_doc, pb_doc, doc, second)
            how = ", baseline saved again" if rebuild else ""
            lines.append({"condition": f"1.0@0 ({suite.dist}, {condition}{how})", **judged})
    return control_evidence.summary(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suites", default=",".join(SUITES), help=f"of {', '.join(SUITES)}")
    parser.add_argument(
        "--modes",
        default=MATRIX,
        help=f"of {', '.join(MODES)}, in order, a mode given twice run twice (default {MATRIX})",
    )
    parser.add_argument("--conditions", default="quiet,busy", help="of quiet, busy")
    parser.add_argument("--slow-iterations", type=int, help="the slowdown's loop turns a call")
    parser.add_argument("--work", metavar="DIR", help="keep venvs, sdists and logs in DIR")
    parser.add_argument(
        "--out",
        help=f"the JSON lines file appended to (default {OUT.relative_to(REPO)}; "
        "with --smoke, results.jsonl in the work directory)",
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    parser.add_argument(
        "--table", metavar="JSONL", help="print the table of a results file; run nothing"
    )
    parser.add_argument(
        "--thresholds",
        metavar="DIR",
        help="the thresholds the gate judged a work directory's first stored time A/A at "
        "(--conditions: the first one); run nothing",
    )
    parser.add_argument(
        "--judge-again",
        metavar="DIR",
        help="judge the stored time A/As of a work directory again offline (--conditions: the "
        "first one); run nothing",
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="with --judge-again: against each time baseline saved again from its saves' JSON by "
        "today's save rule, the code one clean commit",
    )
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    if args.table:
        print(HEADER)
        found = [json.loads(text) for text in Path(args.table).read_text().splitlines()]
        order = list(dict.fromkeys(r["suite"] for r in found))  # suite by suite, as they came
        for r in sorted(found, key=lambda r: order.index(r["suite"])):
            print(line(r))
        return 0
    if args.judge_again:
        print(judge_again(Path(args.judge_again), args.conditions.split(",")[0], args.rebuild))
        return 0
    if args.thresholds:
        print("\n".join(thresholds(Path(args.thresholds), args.conditions.split(",")[0])))
        return 0
    if "count" in args.modes or "slowdown" in args.modes:
        if shutil.which("valgrind") is None:
            print("valgrind is needed for the counted modes")
            return 2
    global PLUGIN_COMMIT
    commit = PLUGIN_COMMIT = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} "
        f"cores, load {loadavg()}, Python {sys.version.split()[0]}, plugin at {commit}",
        flush=True,
    )
    rows: list = []
    with tempfile.TemporaryDirectory(prefix="real-suites-") as tmp:
        work = Path(args.work).resolve() if args.work else Path(tmp)
        where = Path(args.out or (work / "results.jsonl" if args.smoke else OUT))
        where.parent.mkdir(parents=True, exist_ok=True)
        with open(where, "a") as out:
            rows = run_all(args, work, out)
        print(f"\nsessions appended to {where}")
        print(f"logs: {work / 'logs' if args.work else '(removed; --work DIR keeps them)'}")
    found = [(r, why) for r in rows if (why := unexpected(r))]
    for r, why in found:
        print(f"UNEXPECTED: {r['suite']} {r['mode']} {r['condition']}: {why}: exit {r['exit']}")
    print("real suites: " + ("as expected" if not found else f"{len(found)} sessions unexpected"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
