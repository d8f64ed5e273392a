"""Where a cell of the benchmark suite spends its time: one real session, each part timed.

    python evidence/bench_breakdown.py                         # the main job, default scale
    python evidence/bench_breakdown.py --scale smoke           # the smoke-scale job
    python evidence/bench_breakdown.py --smoke                 # two cells at smoke scale: seconds
    python evidence/bench_breakdown.py -- -k "ring or switch"  # after --: more pytest arguments

It runs ``pytest benchmarks --benchmark-only`` in a child process with a recorder registered
(``pytest.main(..., plugins=[...])``), which times each part of every cell, in wall seconds and
in CPU seconds (this process's threads, its waited-for children, and at each test's end the CPU
of its live child processes, such as multiprocessing's fork server and what it waited for):

  process        interpreter start and imports, up to pytest's session start
  collection     session start to the first test (collection, the plugin's set-up)
  prepare        the workload's own set-up (``workloads.prepare``)
  warm-up        the rounds run first and dropped
  rounds         the measured rounds (``workload.run`` inside pytest-benchmark's pedantic)
  kernel         the kernel counters read around each round (measure/kernel.py)
  memory pass    the rounds the memory pass runs under tracemalloc (measure/memory.py)
  memory/task    the workload's own memory figure (spawn, cancel: KiB per live task)
  children       CPU of the session's child processes, read at each test's end (no wall)
  other          the rest of each test: pytest's and the plugins' own work around it
  session end    the last test to the process's end (judging, tables, JSON)

Wall figures move with the machine's load; CPU seconds move far less (the CPU's speed changes
still move them). Each part's CPU share is what the docs quote. The result, a JSON file of the
totals and of every cell (``--out``), goes to ``evidence/bench_breakdown/`` by default.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "bench_breakdown"
PARTS = (
    "process",
    "collection",
    "prepare",
    "warm-up",
    "rounds",
    "kernel",
    "memory pass",
    "memory/task",
    "children",
    "other",
    "session end",
)


def _cpu() -> float:
    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


def _live_children_cpu() -> float:
    """CPU seconds of this process's live children and of what they waited for (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    me, total = os.getpid(), 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # fields[1]: ppid; 11..14: utime stime cutime cstime
            total += sum(int(v) for v in fields[11:15]) / tick
    return total


class Recorder:
    """A pytest plugin: each part's exclusive wall and CPU seconds, per test and for the session."""

    def __init__(self, started_wall: float, started_cpu: float):
        self.cells: list[dict] = []
        self.session: dict = defaultdict(lambda: [0.0, 0.0])
        self.session["process"] = [time.time() - started_wall, _cpu() - started_cpu]
        self._stack: list[list] = []  # [part, wall0, cpu0, children wall, children cpu]
        self._cell: dict | None = None
        self._runs = 0  # workload runs within the current pedantic call
        self._warmup = 0
        self._mark = (time.perf_counter(), _cpu())
        self._children = _live_children_cpu()
        self._patch()

    @contextlib.contextmanager
    def part(self, name: str):
        frame = [name, time.perf_counter(), _cpu(), 0.0, 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            wall, cpu = time.perf_counter() - frame[1], _cpu() - frame[2]
            target = self._cell if self._cell is not None else self.session
            if name:
                acc = target.setdefault(name, [0.0, 0.0])
                acc[0] += wall - frame[3]
                acc[1] += cpu - frame[4]
            if self._stack:
                self._stack[-1][3] += wall
                self._stack[-1][4] += cpu

    def _wrap(self, owner, attr: str, name, per_instance=False):
        original = getattr(owner, attr)
        recorder = self

        def wrapper(*args, **kwargs):
            with recorder.part(name(args) if callable(name) else name):
                return original(*args, **kwargs)

        setattr(owner, attr, wrapper)

    def _patch(self) -> None:
        import pytest_benchmark.fixture as fixture

        from pytest_concurrency import workloads
        from pytest_concurrency.measure import driver, kernel

        recorder = self
        pedantic = fixture.BenchmarkFixture.pedantic

        def timed_pedantic(bench, *args, **kwargs):
            recorder._runs, recorder._warmup = 0, kwargs.get("warmup_rounds", 0)
            with recorder.part("pytest-benchmark"):  # folded into "other" below
                return pedantic(bench, *args, **kwargs)

        fixture.BenchmarkFixture.pedantic = timed_pedantic
        until_known = getattr(driver, "_rounds_until_known", None)  # rounds that stop early
        if until_known is not None:

            def timed_until_known(bench, one_round, plan, on_round):
                recorder._runs, recorder._warmup = 0, plan.warmup
                with recorder.part("pytest-benchmark"):
                    return until_known(bench, one_round, plan, on_round)

            driver._rounds_until_known = timed_until_known
        self._wrap(workloads, "prepare", "prepare")
        self._wrap(driver, "memory_figures", "memory pass")
        self._wrap(workloads, "memory", "memory/task")
        for attr in ("__init__", "read", "close", "between"):
            self._wrap(kernel.Counters, attr, "kernel")
        for name in workloads._MODULES:
            wl = workloads.get(name)
            run = wl.run

            def timed_run(backend, params, _run=run):
                inside = [f[0] for f in recorder._stack]
                if "memory pass" in inside or "pytest-benchmark" not in inside:
                    return _run(backend, params)
                recorder._runs += 1
                part = "warm-up" if recorder._runs <= recorder._warmup else "rounds"
                with recorder.part(part):
                    return _run(backend, params)

            wl.run = timed_run

    def pytest_runtest_protocol(self, item):
        if not self.cells:
            now = (time.perf_counter(), _cpu())
            self.session["collection"] = [now[0] - self._mark[0], now[1] - self._mark[1]]
        self._cell = {"id": item.nodeid.split("[", 1)[-1].rstrip("]")}
        self._children = _live_children_cpu()
        self._frame = (time.perf_counter(), _cpu())

    def pytest_runtest_logfinish(self, nodeid, location):
        if self._cell is None:
            return
        cell, self._cell = self._cell, None
        wall, cpu = time.perf_counter() - self._frame[0], _cpu() - self._frame[1]
        children = _live_children_cpu() - self._children
        parts = {k: v for k, v in cell.items() if k != "id"}
        bench = parts.pop("pytest-benchmark", [0.0, 0.0])
        inner = [sum(v[i] for v in parts.values()) for i in (0, 1)]
        del bench  # its own share is what the parts inside it leave: part of "other"
        parts["other"] = [wall - inner[0], cpu - inner[1]]
        parts["children"] = [0.0, max(children, 0.0)]
        cell.update(parts=parts, wall=wall, cpu=cpu + max(children, 0.0), outcome=self._outcome)
        self.cells.append(cell)
        self._mark = (time.perf_counter(), _cpu())

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self._outcome = report.outcome

    def pytest_unconfigure(self, config):
        now = (time.perf_counter(), _cpu())
        self.session["session end"] = [now[0] - self._mark[0], now[1] - self._mark[1]]


def child(out: str, started_wall: float, pytest_args: list[str]) -> int:
    import pytest

    recorder = Recorder(started_wall, 0.0)
    code = pytest.main(pytest_args, plugins=[recorder])
    totals: dict = defaultdict(lambda: [0.0, 0.0])
    for name, (wall, cpu) in recorder.session.items():
        totals[name] = [wall, cpu]
    for cell in recorder.cells:
        for name, (wall, cpu) in cell["parts"].items():
            totals[name][0] += wall
            totals[name][1] += cpu
    Path(out).write_text(
        json.dumps({"exit": int(code), "totals": totals, "cells": recorder.cells}, indent=1)
    )
    return int(code)


def summary(result: dict, loadavg: tuple) -> list[str]:
    totals = result["totals"]
    cpu = sum(v[1] for v in totals.values())
    wall = sum(v[0] for v in totals.values())
    cells = result["cells"]
    lines = [
        f"{len(cells)} cells; CPU {cpu:.1f} s, wall {wall:.1f} s "
        f"(load average at the start {loadavg[0]:.1f}, at the end {loadavg[1]:.1f})",
        f"{'part':<14}{'CPU s':>9}{'CPU %':>7}{'wall s':>9}",
    ]
    for name in PARTS:
        w, c = totals.get(name, [0.0, 0.0])
        lines.append(f"{name:<14}{c:9.2f}{100 * c / cpu if cpu else 0:7.1f}{w:9.2f}")
    by_model: dict = defaultdict(float)
    for cell in cells:
        by_model[cell["id"].rsplit("-", 1)[-1]] += cell["cpu"]
    lines.append("CPU s by model: " + ", ".join(f"{m} {s:.1f}" for m, s in by_model.items()))
    return lines


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="default", choices=("smoke", "default"))
    parser.add_argument("--smoke", action="store_true", help="two cells at smoke scale")
    parser.add_argument("--out", help="the JSON file (default: bench_breakdown/SCALE.json)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    scale = "smoke" if args.smoke else args.scale
    more = list(args.pytest_args)
    if args.smoke:
        more += ["--concurrency-backends=asyncio", "-k", "ring"]
    if args.out:
        out = Path(args.out).resolve()
    elif args.smoke:  # a smoke run is no evidence: written apart from the recorded results
        out = Path(tempfile.mkdtemp(prefix="bench-breakdown-")) / "smoke.json"
    else:
        out = HERE / f"{scale}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    pytest_args = [
        "benchmarks",
        "--benchmark-only",
        f"--concurrency-scale={scale}",
        "-p",
        "no:cacheprovider",
        "-q",
        *more,
    ]
    load_before = os.getloadavg()[0]
    started = time.time()
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(out), str(started), *pytest_args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    result = json.loads(out.read_text())
    result.update(
        command=" ".join(["pytest", *pytest_args]),
        loadavg=[load_before, os.getloadavg()[0]],
        wall_total=time.time() - started,
    )
    out.write_text(json.dumps(result, indent=1))
    for line in summary(result, tuple(result["loadavg"])):
        print(line)
    print(f"written: {out}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
