"""``tox -e bench`` as a newcomer runs it, with the base's code and this checkout's, in turns.

    python evidence/tox_bench_turns.py --pairs 2 -- --concurrency-scale=smoke
    python evidence/tox_bench_turns.py --base main --pairs 1              # the main job
    python evidence/tox_bench_turns.py --smoke                            # one pair, two cells

tox runs the suite through the ``pytest`` console script, not ``python -m pytest``, and installs
the package into its own env: what ``bench_breakdown.py`` and ``bench_precision.py`` (which start
pytest themselves) do not see. The base's code is ``git archive``d into a temporary directory
(no worktree), each side's tox env is built before the first timed run, then the sides take
turns (base first). Each run is timed in wall seconds and in CPU seconds of its whole process
tree (``perf stat -e task-clock``: also the fork server's tasks, which no ``wait`` of ours
reaps), and pytest's ``--durations=0`` gives each cell's seconds, summed here per model. A line
per run in ``tox_bench_turns/LABEL.jsonl``. Needs tox (``--tox``) and perf.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "tox_bench_turns"
SMOKE_ARGS = ["--concurrency-scale=smoke", "-k", "cancel and abandon", "--concurrency-backends",
              "multiprocessing,asyncio"]  # fmt: skip
CELL = re.compile(r"^\s*([\d.]+)s (?:call|setup|teardown)\s+\S+?::\w+\[(.+)\]\s*$")


def _commit(path: Path, ref: str = "HEAD") -> str:
    out = subprocess.run(["git", "rev-parse", "--short", ref], cwd=path, capture_output=True)
    return out.stdout.decode().strip()


def _export(ref: str, into: Path) -> Path:
    """The tree of ``ref`` (of this repository) as plain files in ``into``."""
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def _run(tox: str, where: Path, args: list[str]) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as perf:
        cmd = ["perf", "stat", "-x,", "-e", "task-clock", "-o", perf.name, tox, "-e", "bench"]
        started = time.monotonic()
        proc = subprocess.run(
            [*cmd, "--", *args, "--durations=0"], cwd=where, capture_output=True, text=True
        )
        wall = time.monotonic() - started
        cpu_ms = next(
            float(line.split(",")[0]) for line in perf.read().splitlines() if "task-clock" in line
        )
    by_model: dict[str, float] = defaultdict(float)
    for line in proc.stdout.splitlines():
        if match := CELL.match(line):
            model = match[2].rsplit("-", 1)[-1]  # the id ends with the model
            by_model[model] += float(match[1])
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu_ms / 1000, 1),
        "cells_s_by_model": {m: round(s, 1) for m, s in sorted(by_model.items())},
        "tail": proc.stdout.splitlines()[-1:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="the git ref to compare with (default main)")
    ap.add_argument("--pairs", type=int, default=2, help="runs a side, in turns")
    ap.add_argument("--tox", default=shutil.which("tox") or "tox")
    ap.add_argument("--label", default="turns")
    ap.add_argument("--smoke", action="store_true", help="one pair of two cells: minutes")
    ap.add_argument("pytest_args", nargs="*", help="after --: passed to tox -e bench --")
    opts = ap.parse_args()
    args = SMOKE_ARGS if opts.smoke else opts.pytest_args
    pairs = 1 if opts.smoke else opts.pairs
    if shutil.which("perf") is None:
        print("tox_bench_turns: perf not found; install linux-perf (perf stat)", file=sys.stderr)
        return 2
    HERE.mkdir(exist_ok=True)
    out = HERE / f"{'smoke' if opts.smoke else opts.label}.jsonl"
    with tempfile.TemporaryDirectory(prefix="tox-bench-base-") as tmp:
        sides = {"base": _export(opts.base, Path(tmp)), "this": ROOT}
        base_commit = _commit(ROOT, opts.base)
        for where in sides.values():  # the envs, built untimed
            subprocess.run([opts.tox, "-e", "bench", "--notest", "-q"], cwd=where, check=True)
        lines = []
        for pair in range(pairs):
            for side, where in sides.items():
                # this side's commit as tox packages it now (the checkout may move meanwhile)
                code = base_commit if side == "base" else _commit(ROOT)
                row = {"side": side, "code": code, "pair": pair, "args": args}
                row.update(_run(opts.tox, where, args))
                print(json.dumps(row), flush=True)
                lines.append(json.dumps(row))
    with open(out, "a", encoding="utf-8") as fh:  # appended whole, after the last run
        fh.write("\n".join(lines) + "\n")
    return 0 if all(json.loads(line)["exit"] == 0 for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
