"""How well ``--concurrency-against`` tells a change from noise, on a plain test of a small library.

A throwaway project holds a library ``mylib`` twice: the base (installed apart by the plugin,
from a path) and the head, whose ``work`` does more iterations on the models named in
``MYLIB_SLOW`` ("threading:1.08,gevent:1.05"). The test is a user's plain one (``benchmark`` and
``concurrency_backend``: four tasks each run ``work``). Each scenario runs whole sessions and
counts the verdicts per model:

    python3 evidence/against_evidence.py --aa 50 --trials 50
    python3 evidence/against_evidence.py --aa 5 --trials 5 --changes threading:1.08,gevent:1.05
    python3 evidence/against_evidence.py --smoke    # one session with the change, threading
    python3 evidence/against_evidence.py --measure instructions --busy 2 --aa 5 --trials 5 \
        --backends gevent,asyncio,threading --changes gevent:1.01,asyncio:1.01,threading:1.01
    python3 evidence/against_evidence.py --smoke --measure instructions    # counted, under valgrind
    python3 evidence/against_evidence.py --measure instructions --busy 2 --copies 5 --alternate \
        --aa 10 --trials 10 --backends gevent,asyncio --changes gevent:1.01,asyncio:1.01

``--copies K`` writes K identical test functions (``test_work``, ``test_work_2``, ...): each is a
verdict of its own, so a session gives K a model at the cost of one start-up. ``--alternate`` runs
the A/A and the changed sessions in turns (A/A first), so a drift of the machine falls on both.

``--measure instructions`` counts both sides (valgrind) instead of timing them in turns: the
verdicts are the counted gate's (1% for a user's own test), read from the session's markdown
report. ``--busy N`` runs N busy-loop processes beside every session, the A/A ones too.

A/A (the head's code equals the base's) must read no regression; a change must read regressed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from pytest_concurrency.gate import paired
from pytest_concurrency.measure.records import Document

LIB = """
__version__ = "{version}"
import os

_SLOW = dict((k, float(v)) for k, _, v in (p.partition(":") for p in os.environ.get("MYLIB_SLOW", "").split(",") if p))


def work(model, n=40000):
    total = 0
    for i in range(int(n * ({slow}))):
        total += i * i
    return total
"""

TEST = """
import mylib


def test_work(benchmark, concurrency_backend):
    b = concurrency_backend
    if b.family == "async":
        async def job():
            mylib.work(b.name)

        async def main():
            tasks = [b.spawn(job) for _ in range(TASKS)]
            for t in tasks:
                await t.join()
    else:
        def main():
            tasks = [b.spawn(mylib.work, b.name) for _ in range(TASKS)]
            for t in tasks:
                t.join()
    benchmark(b.run, main)
"""

PYPROJECT = (
    Path(__file__).resolve().parent.parent / "tests" / "data" / "mylib.pyproject.toml"
).read_text()

KEEP_OPTION = "--concurrency-against-keep"  # the plugin copies each pair's rounds into its DIR
#: --smoke: the smallest run that still runs a real session: one with the change (its suspect
#: measured again in more pairs of sessions, as a regression is)
SMOKE = {"aa": 0, "trials": 1, "backends": "threading", "tasks": 2}
VERDICT_START = r"^\s*test_work(?:_(\d+))? on "  # a copy's number after test_work_
#: (a verdict with no change read, as beside a busy core: "on gevent: inconclusive (...)")
VERDICT = re.compile(
    VERDICT_START + r"(\S+): (?:([+-][\d.]+)% .*?: )?(regressed|improved|unchanged|inconclusive)"
)
#: --measure instructions: the counted verdicts are the stored-baseline gate's, read from the
#: markdown report (its sections name the status, an item per benchmark: "- test_work on gevent:
#: 1.2 M -> 1.3 M, +1.0%, ...")
REPORT_SECTION = re.compile(r"^\*\*(Regressions|Faster|Inconclusive|Unchanged)")
REPORT_STATUS = {
    "Regressions": "regressed",
    "Faster": "improved",
    "Inconclusive": "inconclusive",
    "Unchanged": "unchanged",
}
REPORT_ITEM = re.compile(
    r"^- \S*?test\\?_work(?:\\?_(\d+))? on (\S+?): .*?([+-][\d.]+)%"
)  # "_" escaped
#: a busy loop: one process keeping a core busy, as another job on a shared machine does; it ends
#: itself when the script that started it is gone (killed, say, by a test's timeout)
BUSY_LOOP = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


def make_project(root: Path, tasks: int, git: bool, copies: int = 1) -> Path:
    for side in ("base", "head"):
        (root / side / "mylib").mkdir(parents=True)
        write_lib(root / side, changed=False)
    test = TEST.replace("TASKS", str(tasks))
    copied = [test.replace("def test_work(", f"def test_work_{k}(") for k in range(2, copies + 1)]
    (root / "head" / "test_mylib.py").write_text("\n".join([test, *copied]))
    if git:  # the base is the head's last commit, as a user compares a working tree with git:HEAD
        cmd = ["git", "-c", "user.name=e", "-c", "user.email=e@e"]
        subprocess.run([*cmd, "init", "-q"], cwd=root / "head", check=True)
        subprocess.run([*cmd, "add", "mylib", "pyproject.toml"], cwd=root / "head", check=True)
        subprocess.run([*cmd, "commit", "-qm", "base"], cwd=root / "head", check=True)
    return root / "head"


def write_lib(side: Path, changed: bool) -> None:
    """The library as the base has it, or (``changed``) the head's that reads MYLIB_SLOW. An A/A's
    head is byte for byte the base's: a test of the tool, not of two texts of the code."""
    version, slow = ("1.1", "_SLOW.get(model, 1.0)") if changed else ("1.0", "1.0")
    (side / "mylib" / "__init__.py").write_text(LIB.format(version=version, slow=slow))
    (side / "pyproject.toml").write_text(PYPROJECT.format(version=version))


@contextlib.contextmanager
def busy_loops(n: int):
    """``n`` busy-loop processes for the length of the block, ended (by their own pids) after it."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def session(
    head: Path,
    backends: str,
    slow: str,
    threshold: str | None,
    keep: str | None = None,
    base: str = "../base",
    measure: str = "time",
    busy: int = 0,
) -> tuple[dict, float, str]:
    """One ``--concurrency-against`` session: {model: (change %, verdict)}, its seconds, its output."""
    env = {**os.environ, "MYLIB_SLOW": slow}
    report = head.parent / "report.md"
    report.unlink(missing_ok=True)
    counted = measure == "instructions"
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        f"--concurrency-backends={backends}",
        f"--concurrency-against={base}",
        *([f"--concurrency-threshold={threshold}"] if threshold else []),
        *([f"{KEEP_OPTION}={keep}"] if keep else []),
        *(
            ["--concurrency-measure=instructions", f"--concurrency-report-md={report}"]
            if counted
            else []
        ),
    ]
    with busy_loops(busy):
        start = time.perf_counter()
        done = subprocess.run(args, cwd=head, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    out = done.stdout + done.stderr
    if counted:
        return (read_report(report) if report.exists() else {}), seconds, out
    return paired_verdicts(done.stdout), seconds, out


def paired_verdicts(stdout: str) -> dict:
    """The paired (timed) verdicts from the terminal: {model: (change %, verdict)}."""
    found, pending = {}, ""
    for line in stdout.splitlines():  # a verdict may wrap over lines
        if re.match(VERDICT_START, line):
            pending = line
        elif pending:
            pending = f"{pending} {line.strip()}"
        match = VERDICT.match(pending)
        if match:
            change = match.group(3)
            found[verdict_key(match.group(2), match.group(1))] = (
                None if change is None else float(change),
                match.group(4),
            )
            pending = ""
    return found


def verdict_key(model: str, copy: str | None) -> str:
    """A verdict's key: the model, and the copy of the test after "#" from the second on."""
    return f"{model}#{copy}" if copy else model


def read_report(report: Path) -> dict:
    """The gate's verdicts from a ``--concurrency-report-md`` report: {model: (change %, verdict)}."""
    found, status = {}, None
    for line in report.read_text().splitlines():
        if line.startswith("**"):  # a section's title: its items are of this status, or none
            section = REPORT_SECTION.match(line)
            status = REPORT_STATUS[section.group(1)] if section else None
            continue
        item = REPORT_ITEM.match(line)
        if item and status:
            found[verdict_key(item.group(2), item.group(1))] = (float(item.group(3)), status)
    return found


def rejudge(kept: Path, threshold: float, thread_threshold: float) -> int:
    """The kept sessions' verdicts by the plugin's rule at other thresholds (the pairs each session
    measured again were chosen at the threshold it ran with: a close, not an exact, replay)."""

    def read(pair: Path, side: str) -> list:
        path = pair / f"side-{side}.json"
        return Document.of(json.loads(path.read_text())).records if path.exists() else []

    counts: dict = collections.defaultdict(collections.Counter)
    by_pair: dict = collections.defaultdict(
        list
    )  # (kind, model, pair number) -> each session's median ratio - 1
    for run in sorted(kept.iterdir()):
        if not run.is_dir():
            continue
        pairs = sorted(p for p in run.iterdir() if p.is_dir())
        result = paired.judge(
            read(pairs[0], "A"),
            read(pairs[0], "B"),
            lambda rec: thread_threshold if rec.backend == "threading" else threshold,
            again=[(read(p, "A"), read(p, "B")) for p in pairs[1:]],
        )
        kind = run.name.split("-")[0]
        for v in (
            result.verdicts
        ):  # time, then each kernel figure at the kernel gate's paired thresholds
            counts[(kind, v.key[2], v.figure)][v.status] += 1
        for pair in pairs:
            base = {r.key: r for r in read(pair, "A")}
            for rec in read(pair, "B"):
                if rec.key in base:
                    ratios = paired.quad_ratios(
                        base[rec.key].extra.get("paired_rounds") or [],
                        rec.extra.get("paired_rounds") or [],
                    )
                    if ratios:
                        by_pair[(kind, rec.key[2], pair.name)].append(statistics.median(ratios) - 1)
    for (kind, model, figure), c in sorted(counts.items()):
        print(f"{kind} {model} {figure}: " + ", ".join(f"{n} {s}" for s, n in c.most_common()))
    # the sides' own bias: in an A/A every pair of sessions should centre on 0 (docs/gates/against.md)
    for (kind, model, pair), values in sorted(by_pair.items()):
        print(
            f"{kind} {model} pair of sessions {pair}: median {statistics.median(values):+.2%} over {len(values)} "
            f"sessions, {min(values):+.1%} to {max(values):+.1%}"
        )
    return 0


class Scenario:
    """The sessions of one scenario (A/A, or changed): verdicts per model (a test's copies pooled),
    each session's seconds and how many pairs of sessions it ran."""

    def __init__(self) -> None:
        self.counts: dict = collections.defaultdict(collections.Counter)
        self.changes: dict = collections.defaultdict(list)
        self.times: list[float] = []
        self.pairs: list[int] = []

    def add(self, found: dict, seconds: float, out: str) -> None:
        self.times.append(seconds)
        self.pairs.append(max([1, *map(int, re.findall(r"in pair of sessions (\d+)", out))]))
        for key, (change, status) in found.items():
            model = key.partition("#")[0]
            self.counts[model][status] += 1
            if change is not None:
                self.changes[model].append(change)

    def summary(self, name: str, measure: str, busy: int) -> None:
        times, verdicts = self.times, sum(sum(c.values()) for c in self.counts.values())
        print(
            f"== {name}: {len(times)} sessions, {verdicts} verdicts ({measure}, {busy} busy loops), "
            f"median {statistics.median(times):.1f} s a session "
            f"(range {min(times):.1f} to {max(times):.1f} s; "
            f"{sum(times) / max(1, verdicts):.1f} s a verdict); pairs of sessions a session: "
            f"mean {statistics.fmean(self.pairs):.1f}, "
            + ", ".join(f"{n} in {k}" for k, n in sorted(collections.Counter(self.pairs).items()))
        )
        for model in sorted(self.counts):
            changes = self.changes[model]
            read = (
                f"; change median {statistics.median(changes):+.1f}%, "
                f"range {min(changes):+.1f}% to {max(changes):+.1f}%"
                if changes
                else "; no change read"
            )
            print(
                f"   {model}: "
                + ", ".join(f"{n} {s}" for s, n in self.counts[model].most_common())
                + read
            )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="threading,gevent")
    parser.add_argument(
        "--changes",
        default="threading:1.08,gevent:1.05",
        help="model:factor of the head's work, comma-separated",
    )
    parser.add_argument("--aa", type=int, default=10, help="A/A sessions")
    parser.add_argument("--trials", type=int, default=10, help="sessions with the changes")
    parser.add_argument(
        "--tasks", type=int, default=4, help="tasks the test spawns, each running work (default 4)"
    )
    parser.add_argument(
        "--copies",
        type=int,
        default=1,
        metavar="K",
        help="K identical test functions, each judged apart (default 1)",
    )
    parser.add_argument(
        "--alternate",
        action="store_true",
        help="run A/A and changed sessions in turns instead of all A/A first",
    )
    parser.add_argument(
        "--git",
        action="store_true",
        help="the base is git:HEAD of the head's directory (its "
        "library committed), not a path beside it",
    )
    parser.add_argument("--threshold", help="--concurrency-threshold for the sessions (percent)")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="keep every session's rounds in DIR (and the output of every "
        "session with an unexpected verdict: A/A not unchanged, a change not regressed)",
    )
    parser.add_argument(
        "--rejudge",
        metavar="DIR",
        help="instead: judge the sessions kept in DIR again "
        "(--threshold, --thread-threshold), without running any",
    )
    parser.add_argument(
        "--thread-threshold", type=float, help="with --rejudge: threading's threshold (percent)"
    )
    parser.add_argument(
        "--measure",
        choices=("time", "instructions"),
        default="time",
        help="instructions: counted against the base (--concurrency-measure=instructions; "
        "valgrind; the verdicts read from its --concurrency-report-md)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N busy-loop processes beside every session (A/A too): started before it, ended after",
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    if args.rejudge:
        return rejudge(
            Path(args.rejudge),
            float(args.threshold or 3) / 100,
            (args.thread_threshold or float(args.threshold or 3)) / 100,
        )
    with tempfile.TemporaryDirectory(prefix="against-evidence-") as tmp:
        head = make_project(Path(tmp), args.tasks, args.git, args.copies)
        scenarios = [("A/A", "", args.aa), (f"changed ({args.changes})", args.changes, args.trials)]
        runs = [(name, slow, i) for name, slow, n in scenarios for i in range(n)]
        if args.alternate:  # A/A, changed, A/A, ...: the i-th of each side by side
            runs.sort(key=lambda run: (run[2], run[1] != ""))
        results: dict = {name: Scenario() for name, _, n in scenarios if n}
        for name, slow, i in runs:
            write_lib(head.parent / "head", changed=bool(slow))
            kind = "aa" if not slow else "changed"
            kept = os.path.join(args.keep, f"{kind}-{i + 1}") if args.keep else None
            found, seconds, out = session(
                head,
                args.backends,
                slow,
                args.threshold,
                kept,
                "git:HEAD" if args.git else "../base",
                args.measure,
                args.busy,
            )
            if not found:
                print(textwrap.indent(out[-3000:], "  | "))
                return 1
            results[name].add(found, seconds, out)
            expected = "unchanged" if not slow else "regressed"
            if args.keep and any(status != expected for _, status in found.values()):
                os.makedirs(args.keep, exist_ok=True)
                Path(args.keep, f"{kind}-{i + 1}.txt").write_text(out)
            print(
                f"{name} {i + 1}/{dict((n, r) for n, _, r in scenarios)[name]}: "
                + ", ".join(
                    f"{m} {'' if c is None else f'{c:+.1f}% '}{s}"
                    for m, (c, s) in sorted(found.items())
                )
                # the load beside it: this machine is shared (the busy loops count in it)
                + f" ({seconds:.0f} s, load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
        for name, result in results.items():
            result.summary(name, args.measure, args.busy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
