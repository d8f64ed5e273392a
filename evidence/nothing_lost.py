"""Nothing lost: Ctrl-C at every moment, low limits, crashes, failed tests and hostile baselines.

    python evidence/nothing_lost.py            # every case (valgrind for the counted ones; over an hour)
    python evidence/nothing_lost.py --smoke    # two time-mode cases, no valgrind (~25 s)
    python evidence/nothing_lost.py --cases ctrl-c --modes time,against

Each case is one real run of pytest with the plugin, as a user types it, on a small project of
its own (a plain ``benchmark`` test, a ``concurrency_backend`` test on threading, the small
library ``mylib`` they call, and a copy of it as the base for ``--concurrency-against``). The run
has a process group and session of its own, a private TMPDIR, a marker in its environment, and a
baseline saved beforehand by a time session, which it is told to save to again (counted against
the base stores nothing: "-"). Then, per case: its exit status (2 is pytest's for an interruption),
the seconds from the start (or from the Ctrl-C) to its end, the line it said (the plugin's line,
else the error, else pytest's summary; "TRACEBACK" when its output holds one), our processes alive
5 s after it ended (the marker in /proc/PID/environ, or the session id), what is left in its
TMPDIR, and whether the baseline's sha256 is the same, changed or absent after it.

Cases:

* ``ctrl-c``: SIGINT to the whole process group (a terminal's Ctrl-C) at fixed delays after the
  start, in each mode, and "at the end": sent by the session to itself just after it saved the
  baseline (a conftest wraps the save), or, counted against the base, while it judges.
* ``limits``: ``ulimit -n 64``, ``ulimit -v`` 1.5 GB, and TMPDIR on a 50 MB tmpfs (mounted here:
  root only), each run to its end in each mode.
* ``crashes``: a benchmark test that fails, one that calls ``os._exit``, one that segfaults
  (tests/data/hostile.py), in time and counted mode; and hostile baselines given to
  ``--concurrency-baseline`` (truncated, a FIFO, 100,000 levels of nesting, a 5,000-digit number).
* ``ctrl-c-twice``: time mode (and isolated) and counted, a benchmark that sleeps: once its rounds run, two
  SIGINTs to the group, the second 0.1-2 s after the first (it once landed while pytest reported
  the first, and the session then saved its baseline and report).
* ``saves``: 3 and 10 sessions started at once, saving to one baseline (kept: 20 sessions); the
  baseline column says how many sessions it holds of those it should.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
MARKER = "PYTEST_CONCURRENCY_EVIDENCE"
SETTLE_S = 5.0  # how long after the end a process of ours may still be alive: none may
END_S = 900.0  # a run that has not ended by then is a hang (its session is killed)

MYLIB = "def work():\n    return sum(i * i for i in range(20000))\n"
PYPROJECT = (ROOT / "tests" / "data" / "mylib.pyproject.toml").read_text()
TESTS = """
import mylib


def test_plain(benchmark):
    benchmark(sum, range(1000))


def test_backend(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(mylib.work,), rounds=20)
"""
HOSTILE = (ROOT / "tests" / "data" / "hostile.py").read_text()

#: the Ctrl-C a run sends itself at its end: just after the baseline is saved (or, against the
#: base counted, while its verdicts are judged)
AT_THE_END = """
import os, signal

import {module} as where

signal.signal(signal.SIGINT, signal.default_int_handler)
_original = where.{function}


def _then_ctrl_c(*args, **kwargs):
    result = _original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)
    return result


where.{function} = _then_ctrl_c
"""

MODES = {
    "time": ["--benchmark-only"],
    "counted": ["--benchmark-only", "--concurrency-measure=instructions"],
    "against": ["--benchmark-only", "--concurrency-against=base"],
    "counted against": [
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-against=base",
    ],
}
COUNTED = ("counted", "counted against")
#: seconds after the start a Ctrl-C is sent, by mode: start-up, the kernel pass or the base's
#: install, the layout passes and the counted relaunch (or the sides), late in the counted session
DELAYS = {
    "time": [1, 3],
    "counted": [1, 3, 10, 30, 60],
    "against": [3, 10, 25],
    "counted against": [30, 110],
}
LIMITS = {
    "ulimit -n 64": "ulimit -n 64",
    "ulimit -v 1.5 GB": "ulimit -v 1572864",
    "TMPDIR: 50 MB tmpfs": None,
}
#: seconds between the two SIGINTs of ``ctrl-c-twice`` (the first 0.3 s into the rounds)
SECOND_AFTER = [0.1, 0.2, 0.5, 1.0, 2.0]
#: a benchmark that sleeps (not measured by its neighbours' load) and says when its rounds run
SLEEPS = """
import time


def test_sleeps(benchmark):
    def nap():
        open("started", "w").close()
        time.sleep(0.02)

    benchmark.pedantic(nap, rounds=100)
"""
#: sessions saving to one baseline at once
AT_ONCE = [3, 10]
#: the smallest set: no valgrind, no base to install
SMOKE = [("ctrl-c", "time", "3 s"), ("ctrl-c", "time", "at the end")]


@dataclass
class Case:
    kind: str  # ctrl-c, limit, crash, baseline
    mode: str
    what: str  # the moment, the limit, the test or the baseline
    extra: list = field(default_factory=list)
    delay: float | None = None  # ctrl-c: seconds after the start
    conftest: str | None = None
    limit: str | None = None
    tmpfs: bool = False
    tests: str = TESTS
    saves: bool = True
    second: float | None = None  # ctrl-c-twice: seconds between the two SIGINTs
    wait_for: str | None = None  # a file the run writes: the delay starts when it appears


def cases(kinds: set, modes: list) -> list[Case]:
    found = []
    for mode in modes:
        if "ctrl-c" in kinds:
            for delay in DELAYS[mode]:
                found.append(Case("ctrl-c", mode, f"{delay} s", delay=delay))
            module, function = (
                ("pytest_concurrency.gate.compare", "compare")
                if mode == "counted against"
                else ("pytest_concurrency.store.baseline", "save")
            )
            found.append(
                Case(
                    "ctrl-c",
                    mode,
                    "at the end",
                    conftest=AT_THE_END.format(module=module, function=function),
                )
            )
        if "limits" in kinds:
            for name, how in LIMITS.items():
                found.append(Case("limit", mode, name, limit=how, tmpfs=how is None))
    if "ctrl-c-twice" in kinds and "time" in modes:
        for gap in SECOND_AFTER:
            found.append(_twice("twice", gap, []))
        found.append(_twice("isolated, twice", 0.5, ["--concurrency-isolate"]))
    if "ctrl-c-twice" in kinds and "counted" in modes:
        for gap in SECOND_AFTER:
            found.append(_twice("twice", gap, [], mode="counted"))
    if "crashes" in kinds:
        for mode in ("time", "counted"):
            if mode not in modes:
                continue
            for test in ("test_fails", "test_exits", "test_segfaults"):
                found.append(
                    Case(
                        "crash",
                        mode,
                        test,
                        extra=["-k", f"test_fine or {test}", "--concurrency-backends=threading"],
                        tests=HOSTILE,
                    )
                )
        for name in HOSTILE_BASELINES:
            found.append(Case("baseline", "time", name))
    for case in found:
        case.saves = case.mode != "counted against"
    return found


def _twice(name: str, gap: float, extra: list, mode: str = "time") -> Case:
    return Case(
        "ctrl-c",
        mode,
        f"{name}, {gap} s apart",
        extra=["--concurrency-backends=threading", *extra],
        delay=0.3,
        tests=SLEEPS,
        second=gap,
        wait_for="started",
    )


def _truncated(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _deep(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _huge_number(path: Path) -> None:
    path.write_text('{"big": ' + "9" * 5000 + ", " + path.read_text().lstrip()[1:])


def _ten_thousand_others(path: Path) -> None:
    """The project's baseline with 10,000 benchmarks it does not have (its first entry copied
    under other names, 50 samples each, its kernel rounds dropped), in the latest session and in
    an earlier one: ~40 MB, under the 64 MB a baseline may be. A valid baseline: the run judges
    its own benchmarks as against the seed, and sums up the others in a few lines."""
    doc = json.loads(path.read_text())
    proto = copy.deepcopy(doc["benchmarks"][0])
    proto["extra_info"].pop("kernel_rounds", None)
    proto["stats"]["data"] = proto["stats"]["data"][:50]
    if proto["extra_info"].get("control_factor"):  # one a round: as many as the rounds kept
        proto["extra_info"]["control_factor"] = proto["extra_info"]["control_factor"][:50]
    compact = []
    for i in range(10_000):
        b = copy.deepcopy(proto)
        b["name"], b["fullname"] = f"test_other_{i}", f"test_others.py::test_other_{i}"
        b["extra_info"]["workload"] = b["fullname"]
        doc["benchmarks"].append(b)
        compact.append(
            {"workload": b["fullname"], "params": {}, "backend": "", "backend_version": ""}
            | {"samples": b["stats"]["data"], "foreign_cpu": 0.0, "memory": {}}
        )
    meta = doc["pytest_concurrency"]
    meta["history"] = [
        {"datetime": doc["datetime"], "commit": None, "calibration": meta["calibration"]}
        | {"code": meta["code"], "libraries": meta["libraries"], "benchmarks": compact}
    ] + list(meta.get("history") or [])
    path.write_text(json.dumps(doc))


#: --concurrency-baseline=FILE, the saved baseline made hostile
HOSTILE_BASELINES = {
    "truncated baseline": _truncated,
    "FIFO as baseline": _fifo,
    "100,000-deep baseline": _deep,
    "5,000-digit number": _huge_number,
    "10,000 other benchmarks": _ten_thousand_others,
}


# -- a project, a run, what it left -------------------------------------------------------------


def project(where: Path, tests: str) -> None:
    for root in (where, where / "base"):
        (root / "mylib").mkdir(parents=True, exist_ok=True)
        (root / "mylib" / "__init__.py").write_text(MYLIB)
        (root / "pyproject.toml").write_text(PYPROJECT.format(version="1.0"))
    (where / "test_x.py").write_text(tests)


def seed_baseline(base: Path) -> Path:
    """A baseline saved by a time session, copied into every case: what a run must not lose."""
    work = base / "seed"
    work.mkdir()
    project(work, TESTS)
    path = work / "b.json"
    subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--benchmark-only"]
        + ["--concurrency-backends=threading", f"--concurrency-save-baseline={path}", "test_x.py"],
        cwd=work,
        env={**os.environ, "TMPDIR": str(base)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=300,
    )
    return path


def ours(marker: str, sid: int) -> list[str]:
    """Live processes whose environment carries ``marker``, or in session ``sid``: 'pid name'."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
            if rest.split()[0] == "Z":
                continue  # a zombie runs nothing: its parent has yet to reap it
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except (OSError, ValueError):
            continue
        if marker.encode() in env or int(rest.split()[3]) == sid:
            found.append(f"{entry} {name}")
    return found


def sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def said(text: str) -> str:
    """The line the user reads about how the run ended."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    ours_ = [  # an interruption, or the test that ended a process (the launcher's, the watcher's)
        line
        for line in lines
        if line.startswith("pytest-concurrency: ")
        and any(word in line for word in ("interrupted", "ended the", "process ended"))
    ]
    errors = [
        line
        for line in lines
        if re.match(r"(ERROR|E   |pytest-concurrency: ERROR|.*[Ee]rror:)", line)
    ]
    summary = [
        line for line in lines if re.match(r"=+ .* =+$", line) and "test session starts" not in line
    ]
    line = (ours_ or errors or summary[-1:] or lines[-1:] or ["(no output)"])[0]
    return ("TRACEBACK; " if "Traceback (most recent call last)" in text else "") + line


def run(case: Case, base: Path, seed: Path) -> dict:
    work = Path(tempfile.mkdtemp(prefix="c", dir=base))
    tmp = work / "t"
    tmp.mkdir()
    project(work, case.tests)
    saved = work / "b.json"
    shutil.copyfile(seed, saved)
    if case.conftest:
        (work / "conftest.py").write_text(case.conftest)
    argv = [PY, "-m", "pytest", "-p", "no:cacheprovider", *MODES[case.mode]]
    argv += case.extra or ["--concurrency-backends=threading"]
    argv += [f"--concurrency-report-md={work / 'r.md'}"]
    if case.saves:
        argv.append(f"--concurrency-save-baseline={saved}")
    if case.mode == "counted against":  # each side's counts, by layout, to look into a verdict
        argv.append(f"--concurrency-against-keep={work / 'kept'}")
    if case.kind == "baseline":
        hostile = work / "given.json"
        shutil.copyfile(seed, hostile)
        HOSTILE_BASELINES[case.what](hostile)
        argv.append(f"--concurrency-baseline={hostile}")
    argv.append("test_x.py")
    if case.limit:
        argv = ["bash", "-c", f"{case.limit} && exec {shlex.join(argv)}"]
    before = sha(saved)
    marker = uuid.uuid4().hex
    env = {**os.environ, "TMPDIR": str(tmp), MARKER: marker, "PYTHONUNBUFFERED": "1"}
    log = work / "output.txt"
    mounted = case.tmpfs and _mount(tmp)
    if case.tmpfs and not mounted:
        return _row(case, "-", 0.0, "not run: mounting a tmpfs needs root", [], [], "-")
    try:
        with open(log, "wb") as out:
            started = time.monotonic()
            proc = subprocess.Popen(
                argv,
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # as at a terminal: a job started in the background by a shell ignores SIGINT
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            if case.wait_for:
                _appears(work / case.wait_for, proc)
            if case.delay is not None:
                try:
                    proc.wait(case.delay)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGINT)
                    started = time.monotonic()  # seconds to end: from the Ctrl-C
                    if case.second is not None:
                        time.sleep(case.second)
                        if proc.poll() is None:
                            os.killpg(proc.pid, signal.SIGINT)
            try:
                code: int | str = proc.wait(END_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = f"hang (> {END_S:.0f} s)"
            took = time.monotonic() - started
        time.sleep(SETTLE_S)
        alive = ours(marker, proc.pid)
        for pid in (int(p.split()[0]) for p in alive):  # not to leave them to the next case
            os.kill(pid, signal.SIGKILL)
        left = sorted(p.name for p in tmp.iterdir())
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(tmp)], check=False)
    after = sha(saved)
    same = (
        "-"
        if not case.saves
        else ("absent" if after is None else "same" if after == before else "changed")
    )
    text = log.read_text(errors="replace").replace(f"{work}/", "")  # paths as the case's own
    return _row(case, code, took, said(text), alive, left, same)


def _appears(path: Path, proc) -> None:
    deadline = time.monotonic() + END_S
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def run_saves(n: int, base: Path, seed: Path) -> dict:
    """``n`` sessions started at once, each saving to the same baseline (the seed's, 1 session)."""
    work = Path(tempfile.mkdtemp(prefix="s", dir=base))
    project(work, SLEEPS)
    saved = work / "b.json"
    shutil.copyfile(seed, saved)
    argv = [PY, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only", "test_x.py"]
    argv += [f"--concurrency-save-baseline={saved}", "--concurrency-baseline-sessions=20"]
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    procs = []
    for i in range(n):
        tmp = work / f"t{i}"
        tmp.mkdir()
        procs.append(
            subprocess.Popen(
                argv,
                cwd=work,
                env={**env, "TMPDIR": str(tmp)},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    outs = [proc.communicate(timeout=END_S)[0] for proc in procs]
    took = time.monotonic() - started
    time.sleep(SETTLE_S)
    alive = [a for proc in procs for a in ours(marker, proc.pid)]
    left = sorted(p.name for i in range(n) for p in (work / f"t{i}").iterdir())
    left += [p.name for p in work.glob("b.json.lock")]
    held = 1 + len(json.loads(saved.read_text())["pytest_concurrency"].get("history") or ())
    waited = sum("waiting for another session's save" in out for out in outs)
    codes = sorted({proc.returncode for proc in procs})
    case = Case("saves", "time", f"{n} at once")
    line = f"{waited} of {n} said they waited for another session's save"
    return _row(case, ",".join(map(str, codes)), took, line, alive, left, f"{held} of {n + 1}")


def _mount(where: Path) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=50m", "tmpfs", str(where)], capture_output=True
    )
    return done.returncode == 0


def _row(case: Case, code, took: float, line: str, alive: list, left: list, same: str) -> dict:
    return {
        "case": f"{case.kind}: {case.mode}, {case.what}",
        "exit": code,
        "seconds": took,
        "said": line,
        "alive": alive,
        "left": left,
        "baseline": same,
    }


# -- the table --------------------------------------------------------------------------------------


def _cell(text: str, width: int = 120) -> str:
    text = str(text).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[dict]) -> str:
    out = [
        "| case | exit | seconds to end | what the user read | processes alive 5 s later | TMPDIR left | baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            r["case"],
            str(r["exit"]),
            f"{r['seconds']:.1f}",
            _cell(r["said"]),
            _cell(", ".join(r["alive"]) or "0"),
            _cell(", ".join(r["left"]) or "0", 60),
            r["baseline"],
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        default="ctrl-c,ctrl-c-twice,limits,crashes,saves",
        help="of: ctrl-c, ctrl-c-twice, limits, crashes, saves",
    )
    parser.add_argument("--modes", default=",".join(MODES), help="of: " + ", ".join(MODES))
    parser.add_argument(
        "--only", help="only the cases whose name (first column) matches this regex"
    )
    parser.add_argument("--smoke", action="store_true", help=f"only {SMOKE}")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each chosen case (and each saves trial) N times"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep each case's directory (its output)"
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}")
    chosen = cases(set(args.cases.split(",")), modes)
    if args.smoke:
        chosen = [c for c in chosen if (c.kind, c.mode, c.what) in SMOKE]
    if args.only:
        chosen = [c for c in chosen if re.search(args.only, f"{c.kind}: {c.mode}, {c.what}")]
    if shutil.which("valgrind") is None:
        chosen = [c for c in chosen if c.mode not in COUNTED]
    # started in the background by a shell, this process ignores SIGINT, and so would the runs
    signal.signal(signal.SIGINT, signal.default_int_handler)
    base = Path(tempfile.mkdtemp(prefix="nl-"))  # short: a socket's path has 107 bytes
    rows = []
    try:
        seed = seed_baseline(base)
        for _ in range(args.repeat):
            for case in chosen:
                rows.append(run(case, base, seed))
                print(table(rows[-1:]).splitlines()[-1], flush=True)  # a long run's rows so far
            for n in AT_ONCE if "saves" in args.cases.split(",") and not args.smoke else ():
                if args.only and not re.search(args.only, f"saves: time, {n} at once"):
                    continue
                rows.append(run_saves(n, base, seed))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept: {base}")
    print()
    print(table(rows))
    bad = [r["case"] for r in rows if r["alive"] or r["left"]]
    print(f"\n{len(rows)} cases; left something behind: {', '.join(bad) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
