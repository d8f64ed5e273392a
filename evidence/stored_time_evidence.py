"""A user's plain test timed against a stored baseline: false alarms and detection, quiet and under
busy loops, beside pytest-benchmark's ``--benchmark-compare-fail=mean:5%`` on the same sessions.

The project is ``against_evidence.py``'s (the library ``mylib``, whose ``work`` runs longer on the
models named in ``MYLIB_SLOW``; the plain test spawns four tasks each running ``work``). A baseline
of ``--baseline-sessions`` sessions is saved first, quiet, with the plugin's default options; the
first of them also saves a pytest-benchmark run (``--benchmark-save``). Then every condition runs
its sessions, the conditions in turn (session 1 of each, then session 2 of each, ...), so a drift
of this shared machine falls on every condition alike. A condition is ``FACTOR@BUSY``: the loop
``FACTOR`` times as long on every model, ``BUSY`` busy-loop processes beside the session.

Each condition's turn is two sessions back to back, one a rule: the plugin's (its verdicts read
from its ``--concurrency-report-md`` report), then pytest-benchmark's (its "Performance has
regressed" lines). Not one session for both: pytest-benchmark's failing check raises in the
terminal summary, and the plugin's report is then never written.

    python3 evidence/stored_time_evidence.py --sessions 50
    python3 evidence/stored_time_evidence.py --sessions 10 --conditions 1.0@0,1.08@2
    python3 evidence/stored_time_evidence.py --smoke    # a 1-session baseline, one A/A session, a busy loop beside

Ctrl-C (or SIGTERM to its pid) ends a run early with the figures of the sessions that ran.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from against_evidence import busy_loops, make_project, read_report, write_lib  # beside this script

#: the benchmark's id in pytest-benchmark's regression lines: "test_work[gevent] (0001_base) -
#: Field 'mean' has failed PercentageRegressionCheck: ..."
BENCHMARK_FAILED = re.compile(r"test_work\[(\w+)\].* - Field 'mean' has failed")
PB_RULE = "mean:5%"
SMOKE = {"sessions": 1, "baseline_sessions": 1, "conditions": "1.0@1", "backends": "threading"}


def pytest_args(backends: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        f"--concurrency-backends={backends}",
        *extra,
    ]


def run(head: Path, args: list[str], slow: str = "", busy: int = 0) -> tuple[float, str, int]:
    """One session: its seconds, its output, its exit status."""
    with busy_loops(busy):
        start = time.perf_counter()
        done = subprocess.run(
            args, cwd=head, env={**os.environ, "MYLIB_SLOW": slow}, capture_output=True, text=True
        )
        seconds = time.perf_counter() - start
    return seconds, done.stdout + done.stderr, done.returncode


def save_baseline(head: Path, backends: str, sessions: int, storage: Path) -> Path:
    """The stored baseline (default options), quiet; pytest-benchmark's run saved with its first."""
    base = head.parent / "baseline.json"
    for i in range(sessions):
        pb = [f"--benchmark-storage={storage}", "--benchmark-save=base"] if i == 0 else []
        seconds, out, code = run(
            head, pytest_args(backends, f"--concurrency-save-baseline={base}", *pb)
        )
        if code != 0:
            raise SystemExit(f"saving the baseline failed (exit {code}):\n{out[-3000:]}")
        print(f"baseline session {i + 1}/{sessions} saved ({seconds:.0f} s)", flush=True)
    return base


def parse_conditions(text: str) -> list[tuple[float, int]]:
    """ "1.0@0,1.08@2" -> [(1.0, 0), (1.08, 2)]: the loop's factor, busy loops beside."""
    out = []
    for part in text.split(","):
        factor, _, busy = part.partition("@")
        out.append((float(factor), int(busy or 0)))
    return out


def judged_session(
    head: Path, backends: str, base: Path, storage: Path, factor: float, busy: int
) -> tuple[dict, dict, float, str]:
    """One condition's turn: a session judged by the plugin ({model: (change %, verdict)}), then one
    by pytest-benchmark's rule ({model: failed}); the first's seconds and output."""
    report = head.parent / "report.md"
    report.unlink(missing_ok=True)
    slow = ",".join(f"{m}:{factor}" for m in backends.split(",")) if factor != 1.0 else ""
    judge = [f"--concurrency-baseline={base}", f"--concurrency-report-md={report}"]
    seconds, out, _ = run(head, pytest_args(backends, *judge), slow, busy)
    compare = [
        f"--benchmark-storage={storage}",
        "--benchmark-compare=0001",
        f"--benchmark-compare-fail={PB_RULE}",
    ]
    _, pb_out, _ = run(head, pytest_args(backends, *compare), slow, busy)
    plugin = read_report(report) if report.exists() else {}
    failed = set(BENCHMARK_FAILED.findall(pb_out))
    return plugin, {m: m in failed for m in backends.split(",")}, seconds, out  # the plugin's


def label(factor: float, busy: int) -> str:
    change = "A/A" if factor == 1.0 else f"{factor - 1:+.0%}"
    return f"{change}, {busy} busy loops" if busy else f"{change}, quiet"


class Tally:
    """What each condition's sessions read, per model: the plugin's verdicts and changes,
    pytest-benchmark's failures, and each session's seconds."""

    def __init__(self) -> None:
        self.plugin: dict = collections.defaultdict(collections.Counter)  # (condition, model)
        self.pb: dict = collections.defaultdict(
            collections.Counter
        )  # (condition, model) -> failed?
        self.changes: dict = collections.defaultdict(list)
        self.times: dict = collections.defaultdict(list)

    def add(self, name: str, found: dict, failed: dict, seconds: float) -> None:
        self.times[name].append(seconds)
        for model, (change, status) in found.items():
            self.plugin[(name, model)][status] += 1
            self.changes[(name, model)].append(change)
        for model, fail in failed.items():
            self.pb[(name, model)][fail] += 1

    def print(self, conditions: list[tuple[float, int]], backends: str) -> None:
        for factor, busy in conditions:
            name = label(factor, busy)
            times = self.times[name]
            if not times:
                continue
            print(
                f"== {name}: {len(times)} sessions, median {statistics.median(times):.1f} s a "
                f"session (range {min(times):.1f} to {max(times):.1f} s)"
            )
            for model in backends.split(","):
                c = self.changes[(name, model)]
                print(
                    f"   {model}: gate "
                    + ", ".join(f"{n} {s}" for s, n in self.plugin[(name, model)].most_common())
                    + f"; pytest-benchmark {PB_RULE} failed {self.pb[(name, model)][True]}/{len(c)}"
                    + (
                        f"; change median {statistics.median(c):+.1f}%, range {min(c):+.1f}% to "
                        f"{max(c):+.1f}%"
                        if c
                        else ""
                    )
                )


def run_conditions(head: Path, args, conditions, tally: Tally) -> int:
    """The baseline, then every condition's sessions in turn; 1 when a session said nothing."""
    storage = head.parent / "benchmarks"
    base = save_baseline(head, args.backends, args.baseline_sessions, storage)
    for i in range(args.sessions):
        for factor, busy in conditions:
            name = label(factor, busy)
            found, failed, seconds, out = judged_session(
                head, args.backends, base, storage, factor, busy
            )
            if not found:
                print(textwrap.indent(out[-3000:], "  | "))
                return 1
            tally.add(name, found, failed, seconds)
            print(
                f"{name} {i + 1}/{args.sessions}: "
                + ", ".join(
                    f"{m} {c:+.1f}% {s} (pytest-benchmark {'FAILED' if failed.get(m) else 'ok'})"
                    for m, (c, s) in sorted(found.items())
                )
                # the load beside it: this machine is shared (the busy loops count in it)
                + f" ({seconds:.0f} s, load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
    return 0


def main() -> int:
    # SIGTERM ends a run early as Ctrl-C does (a background job ignores SIGINT)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="threading,gevent")
    parser.add_argument(
        "--conditions",
        default="1.0@0,1.0@1,1.10@0,1.08@2",
        help="FACTOR@BUSY, comma-separated: the loop's factor on every model, busy loops beside",
    )
    parser.add_argument("--sessions", type=int, default=10, help="judged sessions a condition")
    parser.add_argument("--baseline-sessions", type=int, default=3)
    parser.add_argument(
        "--tasks", type=int, default=4, help="tasks the test spawns, each running work (default 4)"
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    conditions = parse_conditions(args.conditions)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="stored-time-evidence-") as tmp:
        head = make_project(Path(tmp), args.tasks, git=False)
        write_lib(head, changed=True)  # reads MYLIB_SLOW: every session runs the same code text
        try:
            code = run_conditions(head, args, conditions, tally)
        except KeyboardInterrupt:  # a run cut short (Ctrl-C, SIGTERM): the figures of what ran
            print("interrupted: the sessions that ran so far")
            code = 0
    tally.print(conditions, args.backends)
    return code


if __name__ == "__main__":
    sys.exit(main())
