"""Issue 70: a suite that runs only under ``--codspeed``, judged by the gates (FastAPI 0.165.0).

FastAPI's ``tests/benchmarks`` modules call ``pytest.skip(allow_module_level=True)`` unless
``"--codspeed"`` is in ``sys.argv``: its benchmarks run only where CodSpeed measures them. Given
with one of the gate's options, ``--codspeed`` is left to the suite's own check and the gate
measures (docs/existing-suite.md): this script shows it on the suite, unmodified, with its own
configuration (``pyproject.toml``: ``--strict-config``, ``--strict-markers``, ``filterwarnings =
error``, ``timeout = 20``), in a venv of its own holding its test group's pytest plugins
(pytest-codspeed, pytest-xdist, pytest-cov, pytest-sugar, pytest-timeout), what the benchmarks
import, pytest-benchmark and this checkout's plugin. The run directory is the sdist's tree without
its ``fastapi/`` source, so the tests import the release installed from its wheel (as
evidence/real_suites.py does, whose ``prepare`` and ``session`` this reuses).

Sessions, each with ``--codspeed`` on the command line:

  plain            ``-p no:concurrency``: pytest-codspeed measures (walltime), as the project runs
                   it (no ``--benchmark-only``: pytest-codspeed switches pytest-benchmark off)
  time-save        a stored time baseline, saved
  time-aa          judged against it, the same code
  nocodspeed-aa    the same A/A with pytest-codspeed blocked (``-p no:codspeed``): the plugin
                   accepts ``--codspeed`` itself
  count-save       ``--concurrency-measure=instructions``, saved (the counted selection)
  count-aa         judged against it, the same code
  slowdown         a copy of the release whose ``fastapi.routing.run_endpoint_function`` (every
                   request's endpoint call) does ``--iterations`` more loop turns, first on
                   PYTHONPATH, counted against the counted save: it must fail
  time-slowdown    the same copy timed against the time baseline

Every session is a line of ``evidence/codspeed_suite/results.jsonl``: exit status, the gate's
summary line, each test's outcome (junit), the load before and after, the command.

    python3 evidence/codspeed_suite.py --work /tmp/codspeed-suite
    python3 evidence/codspeed_suite.py --work DIR --modes count-save,count-aa,slowdown

It needs PyPI (the sdist, the wheels) and valgrind for the counted modes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# beside this script (python puts its folder first on the import path)
import existing_suites
import real_suites

OUT = real_suites.REPO / "evidence" / "codspeed_suite" / "results.jsonl"
CODSPEED = ["--codspeed"]
#: pytest-timeout's limit for the counted sessions: the suite's 20 s a test (its ``timeout``) is
#: shorter than a test takes under valgrind, which stopped the first counted save here (the
#: plugin does not stretch another plugin's timeout); given on the command line, not in its config
COUNTED_TIMEOUT = ["--timeout=900"]

SUITE = real_suites.RealSuite(
    dist="fastapi",
    version="0.165.0",
    previous=None,
    source_dirs=["fastapi"],
    # the test group's pytest plugins (pyproject.toml's [dependency-groups] tests) and what the
    # benchmarks import (TestClient: httpx); pytest as the group pins it
    deps=[
        "pytest>=9.0.0,<9.2",
        "pytest-sugar",
        "pytest-timeout",
        "httpx>=0.23.0,<1.0.0",
        "httpx2>=2.0.0",
    ],
    # test_openapi.py's one benchmark (app.openapi() of 20 routes, 100 dependencies deep) took
    # 7.6 s a call at a load of 30 here, and pytest-benchmark's 5 rounds outran its own
    # @pytest.mark.timeout(60): on this shared machine the timed modes leave it out
    select=["tests/benchmarks/test_general_performance.py"],
    # under valgrind: the four small responses (sync and async, with and without response_model)
    count_select=["tests/benchmarks/test_general_performance.py", "-k", "return_dict_with"],
    covers="modules that skip themselves unless --codspeed is in sys.argv; --strict-config, "
    "--strict-markers, filterwarnings = error, timeout = 20 (pytest-timeout), "
    "@pytest.mark.timeout(60)",
    slowdown=real_suites.slowdown(
        "fastapi",
        "0.165.0",
        "fastapi/routing.py",
        "run_endpoint_function = _slowed(run_endpoint_function)",
        5000,
    ),
    slowed=r"^test_(sync|async)_",
)

MODES = "plain,time-save,time-aa,nocodspeed-aa,time-slowdown,count-save,count-aa,slowdown"


def plan(work: Path, mode: str) -> tuple[list, list, str | None]:
    """A mode's arguments (``--codspeed`` always), selection and environment."""
    if mode == "plain":
        return [*CODSPEED, "-p", "no:concurrency"], SUITE.select, None
    if mode == "nocodspeed-aa":
        extra, selection, env = real_suites.plan(SUITE, work, "time-aa")
        return [*CODSPEED, "-p", "no:codspeed", *extra], selection, env
    extra, selection, env = real_suites.plan(SUITE, work, mode)
    counted = real_suites.COUNT[0] in extra
    return [*CODSPEED, *(COUNTED_TIMEOUT if counted else []), *extra], selection, env


def summary(out: str) -> str:
    """The gate's one line: ``passed: ...`` / ``FAILED: ...`` (or why it judged nothing)."""
    found = re.findall(r"^\s*((?:passed|FAILED): \d+ regressed.*?)$", out, re.M)
    if found:
        return found[-1].strip()
    said = re.findall(r"^pytest-concurrency: .*$", out, re.M)
    return said[-1] if said else out.strip().splitlines()[-1] if out.strip() else ""


def regressed(out: str) -> list[str]:
    """The benchmarks the gate's "Regressions (fail the build):" section names."""
    section = out.partition("Regressions (fail the build):\n")[2]
    names = []
    for line in section.splitlines():
        if not line.startswith(" "):
            break
        if line.startswith("  ") and not line.startswith("   "):
            names.append(line.strip().split(": ")[0])
    return sorted(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="venv, run directory, baselines")
    parser.add_argument("--modes", default=MODES)
    parser.add_argument("--iterations", type=int, default=SUITE.slowdown.iterations)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    work = args.work.resolve()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    commit = real_suites.subprocess.run(
        ["git", "-C", str(real_suites.REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    with open(logs / "setup.log", "a") as log:
        py, run = real_suites.prepare(SUITE, work, log)
    modes = args.modes.split(",")
    for kind in ("time", "count"):  # a save appends a session to a baseline file: start anew
        if f"{kind}-save" in modes:
            (work / f"fastapi-{kind}.json").unlink(missing_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    seen: dict = {}
    for mode in modes:
        extra, selection, env = plan(work, mode)
        if env == "slowed":
            # a copy of its own per mode: two runs of this script may share a work directory
            slowed = existing_suites.slowed_copy(SUITE.slowdown, py, work / mode, args.iterations)
            env = {"PYTHONPATH": str(slowed)}
        seen[mode] = seen.get(mode, 0) + 1
        name = f"fastapi-{mode}" + (f"-{seen[mode]}" if seen[mode] > 1 else "")
        bench = mode != "plain"  # pytest-codspeed measures: pytest-benchmark's options are off
        done = real_suites.session(py, run, extra, selection, name, logs, env, bench)
        outcomes = done["outcomes"]
        row = {
            "suite": f"fastapi {SUITE.version}",
            "mode": mode,
            "plugin": commit,
            "exit": done["exit"],
            "gate": summary(done["out"]),
            "regressed": regressed(done["out"]),
            "tests": {
                k: sum(1 for v in outcomes.values() if v == k) for k in set(outcomes.values())
            },
            "seconds": done["seconds"],
            "load": f"{done['load_before']} -> {done['load_after']}",
            "command": done["command"],
            **({"iterations": args.iterations} if env else {}),
        }
        with open(args.out, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(
            f"{mode}: exit {row['exit']}, {row['tests']}, {row['seconds']} s: {row['gate']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
