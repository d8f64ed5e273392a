"""Real, unmodified third-party benchmark suites, judged by the plugin (issue 38's "Done when").

For each suite (aiohttp's client/server and web-response benchmarks; yarl's URL benchmarks), taken
from the library's published source distribution (``pip download --no-binary :all: --no-deps``):
its ``tests/`` and ``pytest.ini`` are copied into a directory of their own, unmodified, without the
sdist's package directory, so the tests import the library installed from its wheel (with its
compiled extensions), as a user's CI does after ``pip install``. A venv of its own holds the
plugin (installed from the checkout this script lives in), pytest-benchmark, pytest-codspeed (the
suites import ``BenchmarkFixture`` from it for type hints), the library and what the suite's
conftest imports. Every session runs with ``-o addopts=""`` (the projects' addopts turn on
coverage tracing, doctests and xdist) and a selection of the benchmarks small enough to count
under valgrind in minutes (printed with the table). Rows, one session each:

  a. plain pytest-benchmark (``-p no:concurrency --benchmark-only``): the reference wall time;
  b. a stored time baseline saved, then judged A/A (the same code);
  c. a counted baseline (``--concurrency-measure=instructions``) saved, then judged A/A;
  d. ``--concurrency-against=LIB==PREVIOUS`` (the previous release from the index against the
     installed newer one): counted, then timed (``--no-time-against`` leaves that out);
  e. an injected slowdown: a copy of the installed release (first on ``PYTHONPATH``) whose one
     pure-Python hot function does extra work, judged counted against the stored counted
     baseline of c (the unmodified release): it must fail naming the benchmarks it slowed.

    python3 evidence/existing_suites.py                     # both suites, every row (~1 hour)
    python3 evidence/existing_suites.py --suites yarl --no-time-against
    python3 evidence/existing_suites.py --smoke             # aiohttp, 2 benchmarks, a, c and e

It needs the package index (PyPI: the sdists, the wheels, the previous release) and valgrind,
and takes minutes even in ``--smoke``: tests/test_evidence.py lists it but does not run it.
The machine's load (``/proc/loadavg``) is printed beside every row: quote medians and ratios of
one run, never an absolute time alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Suite:
    dist: str
    head: str  # the release installed from its wheel (the head side)
    base: str  # the release before it (the base side of --concurrency-against)
    deps: list  # what the suite's conftest and pytest.ini need beside pytest-benchmark/codspeed
    select: list  # the benchmarks: paths / node ids, then -k
    keyword: str
    smoke_select: list
    smoke_keyword: str
    module: str  # the pure-Python module the slowdown goes into
    target: str  # the function slowed, as an assignment target
    wrap: str  # how the wrapped function is put back
    slowed: str  # which of the selected benchmarks call it (expected to regress)
    iterations: int  # the empty loop turns added to its every call


SUITES = {
    "aiohttp": Suite(
        dist="aiohttp",
        head="3.14.5",
        base="3.14.4",
        deps=[
            "coverage",  # pytest.ini's filterwarnings names coverage's warnings
            "pytest-mock",
            "pytest-timeout",  # pytest.ini's timeout key
            "pytest-xdist",
            "pytest-cov",
            "freezegun",
            "blockbuster",
            "trustme",
        ],
        select=[
            "tests/test_benchmarks_web_response.py",
            "tests/test_benchmarks_client.py::test_one_hundred_simple_get_requests",
            "tests/test_benchmarks_client.py::test_one_hundred_simple_post_requests",
        ],
        keyword="simple or with_headers",
        smoke_select=["tests/test_benchmarks_web_response.py"],
        smoke_keyword="test_simple_web_response or test_simple_web_stream_response",
        module="aiohttp/web_response.py",
        target="Response.__init__",
        wrap="Response.__init__ = _slowed(Response.__init__)",
        slowed="every one that makes a web.Response: all but test_simple_web_stream_response "
        "(the client benchmarks' handler returns one a request)",
        iterations=200,  # about 5 us a call: a few percent of a client request's round
    ),
    "yarl": Suite(
        dist="yarl",
        head="1.25.1",
        base="1.24.5",
        deps=["coverage", "pytest-mock", "pytest-timeout", "pytest-xdist", "pytest-cov"],
        select=["tests/test_url_benchmarks.py"],
        keyword="test_url_build_with_host or test_url_make_with_host",
        smoke_select=["tests/test_url_benchmarks.py"],
        smoke_keyword="test_url_build_with_host_and_port or test_url_make_with_host_and_path",
        module="yarl/_url.py",
        target="URL.build",
        wrap="URL.build = classmethod(_slowed(URL.build.__func__))",
        slowed="the test_url_build_* ones (URL.build), not test_url_make_* (URL(str))",
        iterations=20,
    ),
}

#: appended to the copied module: extra work on every call of one function
SLOWDOWN = """

# --- injected by evidence/existing_suites.py: extra work in one hot function ---
def _slowed(function):
    import functools

    @functools.wraps(function)
    def slowed(*args, **kwargs):
        for _ in range({iterations}):
            pass
        return function(*args, **kwargs)

    return slowed


{wrap}
"""

SMOKE = {"suites": "aiohttp", "rows": "plain,count-save,slowdown", "smoke": True}
ROWS = (
    "plain",
    "time-save",
    "time-aa",
    "count-save",
    "count-aa",
    "count-against",
    "slowdown",
    "time-against",
)


@dataclasses.dataclass
class Row:
    suite: str
    what: str
    code: int
    verdict: str
    seconds: float
    load: str
    judged: int | None = None
    regressed: list = dataclasses.field(default_factory=list)
    sides: str = ""


def sh(cmd: list, **kw) -> None:
    subprocess.run(cmd, check=True, **kw)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def prepare(suite: Suite, work: Path, log) -> tuple[Path, Path]:
    """The suite's venv and its run directory (the sdist's tests/ and pytest.ini, unmodified)."""
    venv = work / f"venv-{suite.dist}"
    py = venv / "bin" / "python"
    if not py.exists():
        sh([sys.executable, "-m", "venv", str(venv)])
        sh(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "-q",
                str(REPO),
                "pytest-benchmark",
                "pytest-codspeed",
                f"{suite.dist}=={suite.head}",
                *suite.deps,
            ],
            stdout=log,
            stderr=log,
        )
    sdists = work / "sdists"
    sdists.mkdir(exist_ok=True)
    sh(
        [
            str(py),
            "-m",
            "pip",
            "download",
            "-q",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"{suite.dist}=={suite.head}",
            "-d",
            str(sdists),
        ],
        stdout=log,
        stderr=log,
    )
    (tarball,) = sdists.glob(f"{suite.dist}-{suite.head}.tar.gz")
    run = work / f"run-{suite.dist}"
    if not run.exists():
        with tarfile.open(tarball) as tar:
            tar.extractall(sdists, filter="data")
        src = sdists / f"{suite.dist}-{suite.head}"
        run.mkdir()
        shutil.copytree(src / "tests", run / "tests")
        shutil.copy(src / "pytest.ini", run / "pytest.ini")
    return py, run


def slowed_copy(suite: Suite, py: Path, work: Path, iterations: int) -> Path:
    """A copy of the installed release whose ``suite.target`` does ``iterations`` more loop turns."""
    where = subprocess.run(
        [str(py), "-c", f"import {suite.dist}, os; print(os.path.dirname({suite.dist}.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    root = work / f"slowed-{suite.dist}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(where, root / suite.dist)
    module = root / suite.module
    assert module.suffix == ".py" and module.exists(), module
    with open(module, "a") as f:
        f.write(SLOWDOWN.format(iterations=iterations, wrap=suite.wrap))
    return root


def session(
    py: Path,
    run: Path,
    args: list,
    selection: list,
    logs: Path,
    name: str,
    env: dict | None = None,
) -> tuple[int, str, float, str]:
    load = loadavg()
    started = time.perf_counter()
    done = subprocess.run(
        [str(py), "-m", "pytest", "-o", "addopts=", "-q", "--benchmark-only", *args, *selection],
        cwd=run,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = time.perf_counter() - started
    (logs / f"{name}.log").write_text(done.stdout)
    return done.returncode, done.stdout, seconds, f"{load} -> {loadavg()}"


def logical_lines(out: str) -> list[str]:
    """The output with wrapped lines joined to the line they continue (deeper indentation)."""
    lines: list[str] = []
    for line in out.splitlines():
        indent = len(line) - len(line.lstrip())
        continues = indent >= 4 or (indent >= 2 and lines and lines[-1].startswith("Sides:"))
        if lines and line.strip() and continues and not line.lstrip().startswith("tests/"):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


COUNTS = re.compile(
    r"(\d+) regressed, (\d+) improved, (\d+) inconclusive, (\d+) new, (\d+) missing, (\d+) unchanged"
)
PAIRED = re.compile(r"^against the base (passed|FAILED): (.*)")


def read(out: str) -> tuple[str, int | None, list, str]:
    """The plugin's verdict line, the benchmarks judged, those that regressed, its Sides line."""
    lines = logical_lines(out)
    verdict, judged, regressed, sides, section = "", None, [], "", ""
    for line in lines:
        text = line.strip()
        if text.startswith(
            ("pytest-concurrency: NOTHING JUDGED", "pytest-concurrency: ERROR")
        ) or re.match(r"pytest-concurrency: baseline with \d+ benchmarks written", text):
            verdict = text.removeprefix("pytest-concurrency: ")
        elif "no baseline written" in text:
            verdict = text.removeprefix("pytest-concurrency: ")
        elif re.match(r"^(passed|FAILED): \d+ regressed", text):
            verdict = text
            m = COUNTS.search(text)
            if m:
                judged = sum(int(m.group(i)) for i in (1, 2, 3, 6))
        elif PAIRED.match(text):
            verdict = text
            time_part = PAIRED.match(text).group(2).split(";")[0]  # type: ignore[union-attr]
            judged = sum(int(n) for n in re.findall(r"(\d+) \w+", time_part.removeprefix("time")))
        elif text.startswith("Sides:"):
            sides = text
        if not line.startswith(" "):
            section = text
        elif section.startswith("Regressions") and line.startswith("  "):
            regressed.append(text.split(": ")[0].split("::")[-1])
        elif re.search(r"\): regressed\b", text):
            regressed.append(text.split(": ")[0].split("::")[-1])
    verdict = verdict.split("; memory: ")[0]  # the memory pass is opt-in for these tests
    verdict = re.sub(r"written to \S*/", "written to ", verdict)
    if not verdict:  # pytest's own last line then
        verdict = next((x.strip() for x in reversed(lines) if x.strip()), "(no output)")
    return verdict, judged, sorted(set(regressed)), sides


def run_suite(suite: Suite, args, work: Path, logs: Path, table: list) -> None:
    with open(logs / f"setup-{suite.dist}.log", "w") as log:
        py, run = prepare(suite, work, log)
    selection = list(suite.smoke_select if args.smoke else suite.select)
    keyword = suite.smoke_keyword if args.smoke else suite.keyword
    if keyword:
        selection += ["-k", keyword]
    count = ["--concurrency-measure=instructions"]
    time_base, count_base = work / f"{suite.dist}-time.json", work / f"{suite.dist}-count.json"
    for f in (time_base, count_base):
        f.unlink(missing_ok=True)
    against = f"--concurrency-against={suite.dist}=={suite.base}"
    wanted = args.rows.split(",")
    iterations = args.slow_iterations or suite.iterations
    slowed = slowed_copy(suite, py, work, iterations)
    plan = {
        "plain": ("plain pytest-benchmark (-p no:concurrency)", ["-p", "no:concurrency"], None),
        "time-save": ("time baseline saved", [f"--concurrency-save-baseline={time_base}"], None),
        "time-aa": ("time A/A (same code)", [f"--concurrency-baseline={time_base}"], None),
        "count-save": (
            "counted baseline saved",
            [*count, f"--concurrency-save-baseline={count_base}"],
            None,
        ),
        "count-aa": (
            "counted A/A (same code)",
            [*count, f"--concurrency-baseline={count_base}"],
            None,
        ),
        "count-against": (
            f"counted against {suite.dist}=={suite.base} (head {suite.head})",
            [*count, against],
            None,
        ),
        "slowdown": (
            f"slowdown: {suite.target} +{iterations} loop turns, counted vs the stored counted baseline",
            [*count, f"--concurrency-baseline={count_base}"],
            {"PYTHONPATH": str(slowed)},
        ),
        "time-against": (
            f"time against {suite.dist}=={suite.base} (head {suite.head})",
            [against],
            None,
        ),
    }
    print(
        f"== {suite.dist} {suite.head} (base {suite.base}): pytest -o addopts= --benchmark-only "
        + shlex.join(selection),
        flush=True,
    )
    plain = None
    for name in ROWS:
        if name not in wanted or (name == "time-against" and not args.time_against):
            continue
        what, extra, env = plan[name]
        code, out, seconds, load = session(
            py, run, extra, selection, logs, f"{suite.dist}-{name}", env
        )
        verdict, judged, regressed, sides = read(out)
        if name == "plain":
            plain = seconds
            m = re.search(r"(\d+) passed", out)
            verdict = m.group(0) if m else verdict
        row = Row(suite.dist, what, code, verdict, seconds, load, judged, regressed, sides)
        table.append((row, plain))
        print_row(row, plain)
        if name == "slowdown":
            print(f"   expected to regress: {suite.slowed}", flush=True)


def print_row(row: Row, plain: float | None) -> None:
    ratio = f" ({row.seconds / plain:.1f}x plain)" if plain else ""
    print(
        f"-- {row.suite} | {row.what} | exit {row.code} | {row.seconds:.0f} s{ratio} | load {row.load}"
        f" | judged {row.judged if row.judged is not None else '-'} | regressed {len(row.regressed)}",
        flush=True,
    )
    print(f"   verdict: {row.verdict}", flush=True)
    if row.sides:
        print(f"   {row.sides}", flush=True)
    if row.regressed:
        print(f"   regressed: {', '.join(row.regressed)}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suites", default="aiohttp,yarl", help=f"of {', '.join(SUITES)}")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"of {', '.join(ROWS)}")
    parser.add_argument(
        "--no-time-against",
        dest="time_against",
        action="store_false",
        help="leave out the timed --concurrency-against row (pairs of sessions: the longest)",
    )
    parser.add_argument(
        "--slow-iterations",
        type=int,
        help="empty loop turns added to the slowed function's every call (default: the "
        "suite's, aiohttp 200, yarl 20)",
    )
    parser.add_argument("--work", metavar="DIR", help="keep venvs, sdists and logs in DIR")
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is needed for the counted rows")
        return 2
    started = datetime.datetime.now(datetime.timezone.utc)
    print(
        f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load {loadavg()}, "
        f"Python {sys.version.split()[0]}",
        flush=True,
    )
    table: list = []
    with tempfile.TemporaryDirectory(prefix="existing-suites-") as tmp:
        work = Path(args.work).resolve() if args.work else Path(tmp)
        logs = work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in args.suites.split(","):
            run_suite(SUITES[name], args, work, logs, table)
        print()
        print(
            "| suite | run | exit | the plugin's verdict | wall s | x plain | judged | regressed | load |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for row, plain in table:
            verdict = row.verdict.replace("|", "/")
            if row.sides:
                verdict += f"; {row.sides}"
            ratio = f"{row.seconds / plain:.1f}" if plain else "-"
            judged = row.judged if row.judged is not None else "-"
            named = f": {', '.join(row.regressed)}" if row.regressed else ""
            print(
                f"| {row.suite} | {row.what} | {row.code} | {verdict} | {row.seconds:.0f} | "
                f"{ratio} | {judged} | {len(row.regressed)}{named} | {row.load} |"
            )
        print(f"\nlogs: {logs if args.work else '(removed; --work DIR keeps them)'}")
    failed = [
        r
        for r, _ in table
        if (r.what.startswith("slowdown") and (r.code != 1 or not r.regressed))
        or (r.what.startswith("counted A/A") and (r.code != 0 or r.regressed))
        or (r.what.startswith(("plain", "counted baseline")) and r.code != 0)
    ]
    for r in failed:
        print(f"UNEXPECTED: {r.suite} {r.what}: exit {r.code}, {r.verdict}")
    print("existing suites: " + ("as expected" if not failed else f"{len(failed)} rows unexpected"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
