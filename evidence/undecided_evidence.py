"""Issue 65's evidence: what time leaves undecided beside busy loops, counted, and decided.

A small library in a git repository of its own (one commit, as a CI checkout): ``work`` (CPU-bound,
a pure-Python loop), ``nap`` (a sleep: I/O-bound) and ``same`` (untouched), one plain
pytest-benchmark test each. A time baseline is saved from the clean commit; then the tree is
changed (``work`` +10% of its loop, ``nap`` sleeps longer, ``same`` untouched: its A/A) and judged
beside ``--busy`` busy loops, first against the stored baseline and then (``--against``) against
the base commit timed round for round. Each judged session writes its verdicts
(``--concurrency-verdicts``) and report; a line per session goes to ``--out`` (JSONL): its exit
status, wall time, the load before and after, whether anything was counted (the arbiter's line on
stderr), the first line of the gate's summary, and each benchmark's final status and note.

Expected: ``work`` regressed (exit 1) whether time decided it or the counts did; ``nap`` never
"unchanged" when time moved, and said in the first lines when undecided; ``same`` never
regressed; a quiet A/A (``--quiet-aa``) counts nothing.

    python3 evidence/undecided_evidence.py --busy 2 --against --quiet-aa \\
        --out evidence/undecided/results.jsonl

Wall times are this machine's at the time (2 cores, shared with other jobs): the load is
recorded with each line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_concurrency.lifetime import with_parent

LIB = """
import time

__version__ = "1.0"
FACTOR = {factor}
NAP_MS = {nap}


def work(n=20000):
    total = 0
    for i in range(int(n * FACTOR)):
        total += i * i
    return total


def nap():
    time.sleep(NAP_MS / 1000)


def same(n=20000):
    return sum(i * i for i in range(n))
"""

TESTS = """
import mylib


def test_work(benchmark):
    benchmark.pedantic(mylib.work, rounds=20)


def test_nap(benchmark):
    benchmark.pedantic(mylib.nap, rounds=20)


def test_same(benchmark):
    benchmark.pedantic(mylib.same, rounds=20)
"""

PYPROJECT = (Path(__file__).parent.parent / "tests" / "data" / "mylib.pyproject.toml").read_text()
ARBITER_SAYS = "undecided: counting"  # roles/arbiter.py's line when it counts


def make_project(root: Path, nap_ms: int) -> str:
    """The library at its base commit; returns the commit."""
    (root / "mylib").mkdir(parents=True)
    write_lib(root, 1.0, nap_ms)
    (root / "pyproject.toml").write_text(PYPROJECT.format(version="1.0"))
    (root / "test_mylib.py").write_text(TESTS)
    git = ["git", "-c", "user.name=e", "-c", "user.email=e@e"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "mylib", "pyproject.toml", "test_mylib.py"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def write_lib(root: Path, factor: float, nap_ms: int) -> None:
    (root / "mylib" / "__init__.py").write_text(LIB.format(factor=factor, nap=nap_ms))


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def session(root: Path, name: str, args: list[str], busy: int) -> dict:
    """One pytest session of the project beside ``busy`` busy loops (killed after its timed part
    too: they are load, not the run's)."""
    verdicts = root / f"{name}.verdicts.json"
    report = root / f"{name}.md"
    argv = [sys.executable, "-m", "pytest", "--benchmark-only", "-p", "no:cacheprovider", "-q"]
    argv += [*args, f"--concurrency-report-md={report}"]
    if not any(a.startswith("--concurrency-against") for a in args):
        argv.append(f"--concurrency-verdicts={verdicts}")
    before, started = load(), time.monotonic()
    out_file, err_file = root / f"{name}.out", root / f"{name}.err"
    code, timed, cpu = beside_busy_loops(argv, root, None, busy, out_file, err_file)
    wall = time.monotonic() - started
    out, err = out_file.read_text(), err_file.read_text()
    first = next((line for line in out.splitlines() if line.startswith(("UNDECIDED", "Gate:"))), "")
    if "against the base side" in out:  # the paired verdicts' section
        part = out.split("against the base side (paired rounds)")[-1].splitlines()[1:3]
        first = " ".join(part)
    found = {}
    if verdicts.exists():
        doc = json.loads(verdicts.read_text())
        for v in (doc.get("gate") or {}).get("verdicts", []):
            found[v["key"][0]] = {
                "status": v["status"],
                "change": v["change"],
                "raw_change": v.get("raw_change"),
                "decided_by": v.get("decided_by"),
                "note": v["note"],
            }
    return {
        "session": name,
        "busy_loops": busy,
        "exit": code,
        "wall_s": round(wall, 1),
        "timed_s": round(timed if timed is not None else wall, 1),
        **cpu,
        "load_before": before,
        "load_after": load(),
        "counted": ARBITER_SAYS in err,
        "first_line": first,
        "verdicts": found,
        "report_first_rows": report.read_text().splitlines()[2:6] if report.exists() else [],
        "tail": out.splitlines()[-40:] if code not in (0, 1) else [],
    }


def beside_busy_loops(argv, cwd, env, busy: int, out_file: Path, err_file: Path):
    """Run ``argv`` beside ``busy`` busy loops, stopped once the arbiter starts counting (they are
    the timed part's load, not the counts'): its exit status, its timed part's seconds (None:
    it counted nothing), and the CPU seconds its process tree used: ``timed_cpu_s`` up to the
    arbiter's start (the timed session's processes have ended by then), ``cpu_s`` in all (the
    busy loops are not its children, so not in either); ``load_timed``: the 1-minute load average
    as the timed part ends, the busy loops still running (the load the time gate judged under)."""
    # they and the session die with this script however it ends (a SIGTERM skips ``finally``:
    # two loops of a killed run once went on for an hour, under the next run's quiet A/As)
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=with_parent())
        for _ in range(busy)
    ]
    started, timed = time.monotonic(), None
    cpu: dict = {"timed_cpu_s": None, "cpu_s": None, "load_timed": None}
    try:
        with open(out_file, "w") as out_fh, open(err_file, "w") as err_fh:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out_fh, stderr=err_fh, preexec_fn=with_parent()
            )
            while True:
                # wait4, not poll: its rusage is the CPU of the process and every descendant
                # waited for, which is the whole tree once it has ended
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    cpu["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 1)
                    if cpu["load_timed"] is None:  # it counted nothing: the loops ran to its end
                        cpu["load_timed"] = round(os.getloadavg()[0], 2)
                    break
                time.sleep(1)
                if timed is None and ARBITER_SAYS in err_file.read_text(errors="replace"):
                    timed = time.monotonic() - started
                    cpu["timed_cpu_s"] = _tree_cpu_so_far(proc.pid)
                    cpu["load_timed"] = round(os.getloadavg()[0], 2)
                    _stop(hogs)
    finally:
        _stop(hogs)
    return proc.returncode, timed, cpu


def _tree_cpu_so_far(pid: int) -> float | None:
    """CPU seconds of a running process and its children it has waited for (/proc, Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), the 12th-15th after the name
    return round(sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK"), 1)


def _stop(hogs: list) -> None:
    for hog in hogs:
        if hog.poll() is None:
            hog.kill()
            hog.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=2, help="busy loops beside the judged sessions")
    ap.add_argument("--slowdown", type=float, default=0.10, help="work's extra loop (0.10: +10%%)")
    ap.add_argument("--nap", type=int, nargs=2, default=(5, 8), help="sleep ms: base, head")
    ap.add_argument("--against", action="store_true", help="also timed against the base commit")
    ap.add_argument("--quiet-aa", action="store_true", help="also an A/A with no busy loop")
    ap.add_argument("--layouts", type=int, default=3, help="--concurrency-layouts when counting")
    ap.add_argument("--out", type=Path, default=Path("evidence/undecided/results.jsonl"))
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    common = [f"--concurrency-layouts={args.layouts}"]
    with tempfile.TemporaryDirectory(prefix="undecided-") as tmp:
        root = Path(tmp) / "project"
        commit = make_project(root, args.nap[0])
        lines = [session(root, "save", [*common, "--concurrency-save-baseline=base.json"], 0)]
        if args.quiet_aa:
            lines.append(
                session(root, "quiet-aa", [*common, "--concurrency-baseline=base.json"], 0)
            )
        write_lib(root, 1.0 + args.slowdown, args.nap[1])
        lines.append(
            session(root, "stored", [*common, "--concurrency-baseline=base.json"], args.busy)
        )
        if args.against:
            lines.append(
                session(
                    root, "against", [*common, f"--concurrency-against=git:{commit}"], args.busy
                )
            )
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(args.out, "a", encoding="utf-8") as fh:
        for line in lines:
            line.update(stamp=stamp, slowdown=args.slowdown, nap_ms=list(args.nap))
            fh.write(json.dumps(line) + "\n")
            shown = ("session", "exit", "wall_s", "timed_s", "counted", "load_before")
            print(json.dumps({k: line[k] for k in shown}))
            print("  ", line["first_line"])
            for name, v in line["verdicts"].items():
                print(f"   {name}: {v['status']} ({v['change']}) {v['note'][-160:]}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
