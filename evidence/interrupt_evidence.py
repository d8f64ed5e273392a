"""What a killed or interrupted session leaves behind, in every mode; and sessions under low limits.

    python evidence/interrupt_evidence.py                   # every mode x signal, then the limits
    python evidence/interrupt_evidence.py --modes time,counted --no-limits
    python evidence/interrupt_evidence.py --smoke     # one session: time mode, SIGINT to the pid

Each session runs in a process group (and session) of its own, with a private TMPDIR and a
marker in its environment, writing a baseline, pytest-benchmark's autosave and a markdown report
into a directory of its own. Once it is measuring, it gets one of: ``kill -9`` of the pytest pid,
SIGINT to the pid (Ctrl-C to a launcher whose terminal is gone), SIGINT to the group (Ctrl-C at
a terminal). Then: its exit status (2 is pytest's for an interruption), whether its output holds
a traceback and a line saying what was interrupted, the processes of ours alive 5 s later (the
marker in /proc/PID/environ, or the group's session id), whether anything was written, what is
left in TMPDIR when it ended and after the next short session started there (it sweeps what dead
sessions left). The limits (``ulimit -n 64``, a full or nearly full TMPDIR: a tmpfs mounted in a
user namespace) run a session to its end: a clear one-line error or a normal run, never a hang
or a wall of traceback. Prints a markdown table (docs/security.md).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
MARKER = "PYTEST_CONCURRENCY_EVIDENCE"
SMOKE = ["benchmarks", "--benchmark-only", "--concurrency-scale=smoke", "-p", "no:cacheprovider"]
SETTLE_S = 5.0  # how long after the end a process of ours may still be alive: none may
#: --smoke: the smallest run that still interrupts one real session and looks at what it left
SMOKE_RUN = {"modes": "time", "signals": "SIGINT pid", "no_limits": True, "wait": 0.5}
END_S = 90.0  # how long an interrupted session may take to end before it counts as a hang

PLAIN_TEST = """
def test_plain(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(lambda: sum(range(200_000)),), rounds=100)
"""

MYLIB = '__version__ = "{version}"\n\ndef work():\n    return sum(i * i for i in range(20000 * {factor}))\n'
PYPROJECT = (ROOT / "tests" / "data" / "mylib.pyproject.toml").read_text()
AGAINST_TEST = """
import mylib

def test_work(benchmark, concurrency_backend):
    def main():
        for t in [concurrency_backend.spawn(mylib.work) for _ in range(2)]:
            t.join()
    if concurrency_backend.family == "async":
        async def job():
            mylib.work()
        async def main():
            for t in [concurrency_backend.spawn(job) for _ in range(2)]:
                await t.join()
    benchmark.pedantic(concurrency_backend.run, args=(main,), rounds=400)
"""


def _seeds(work: Path, *extra: str) -> tuple[Path, list[str]]:
    return ROOT, [*SMOKE, *extra]


def _plain(work: Path, *extra: str) -> tuple[Path, list[str]]:
    (work / "test_plain.py").write_text(PLAIN_TEST)
    return work, ["test_plain.py", "--benchmark-only", "-p", "no:cacheprovider", *extra]


def _against(work: Path, *extra: str) -> tuple[Path, list[str]]:
    for where, version, factor in ((work / "base", "1.0", 1), (work, "1.1", 1)):
        (where / "mylib").mkdir(parents=True, exist_ok=True)
        (where / "mylib" / "__init__.py").write_text(MYLIB.format(version=version, factor=factor))
        (where / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    (work / "test_mylib.py").write_text(AGAINST_TEST)
    return work, [
        "test_mylib.py",
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "--concurrency-against=base",
        *extra,
    ]


#: mode -> (how its session is set up, the output that says it is measuring, a file in TMPDIR that does too)
MODES = {
    "time": (
        lambda w: _seeds(w, "--concurrency-backends=asyncio,threading"),
        "test_seeds.py ",
        None,
    ),
    "time isolated": (
        lambda w: _seeds(w, "--concurrency-backends=asyncio,threading", "--concurrency-isolate"),
        "test_seeds.py ",
        None,
    ),
    "counted": (
        lambda w: _seeds(
            w, "--concurrency-backends=asyncio,greenlet", "--concurrency-measure=instructions"
        ),
        "test_seeds.py ",
        "pytest-concurrency-*/callgrind-*/callgrind.*",
    ),
    "counted relaunched": (
        lambda w: _plain(
            w, "--concurrency-backends=greenlet", "--concurrency-measure=instructions"
        ),
        "test_plain.py ",
        "pytest-concurrency-*/callgrind-*/callgrind.*",
    ),
    "against path": (
        lambda w: _against(w, "--concurrency-backends=asyncio,threading"),
        "test_mylib.py ",
        None,
    ),
}

SIGNALS = {
    "kill -9 pid": lambda proc: os.kill(proc.pid, signal.SIGKILL),
    "SIGINT pid": lambda proc: os.kill(proc.pid, signal.SIGINT),
    "SIGINT group": lambda proc: os.killpg(proc.pid, signal.SIGINT),
}


def writes(out: Path) -> list[str]:
    """What a session writes when it finishes: a baseline, pytest-benchmark's autosave, a report."""
    return [
        f"--concurrency-save-baseline={out / 'baseline.json'}",
        "--benchmark-autosave",
        f"--benchmark-storage=file://{out / 'storage'}",
        f"--concurrency-report-md={out / 'report.md'}",
    ]


def ours(marker: str, sid: int | None = None) -> list[str]:
    """Live processes whose environment carries ``marker``, or in session ``sid``: 'pid name'."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            name, rest = (
                stat[stat.index("(") + 1 : stat.rindex(")")],
                stat[stat.rindex(")") + 2 :].split(),
            )
            if rest[0] == "Z":
                continue  # a zombie runs nothing: its parent has yet to reap it
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except (OSError, ValueError):
            continue
        if marker.encode() in env or (sid is not None and int(rest[3]) == sid):
            found.append(f"{entry} {name}")
    return found


def left_in(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []


def next_start(tmp: Path, marker: str) -> None:
    """A short session in ``tmp``: its start sweeps what dead sessions left there."""
    env = {**os.environ, "TMPDIR": str(tmp), MARKER: marker}
    subprocess.run(
        [PY, "-m", "pytest", *SMOKE, "--concurrency-backends=asyncio", "-k", "spawn"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=300,
    )


def wait_or_kill(proc, seconds: float):
    """Its exit status, or "hang (> N s)" when it had not ended by then (its session is killed)."""
    try:
        return proc.wait(seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return f"hang (> {seconds:.0f} s)"


def traceback_in(text: str) -> str:
    n = text.count("Traceback (most recent call last)")
    return f"yes ({n})" if n else "no"


def interrupted_line(text: str) -> str:
    """The plugin's line about the end: an interruption, or the test a killed process was in
    (the time session's watcher)."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if "pytest-concurrency" in line
        and ("interrupted" in line.lower() or "ended the session's process" in line)
    ]
    return lines[0] if lines else ""


def interrupt(mode: str, sig: str, base: Path, wait_s: float) -> dict:
    setup, ready_text, ready_file = MODES[mode]
    case = Path(tempfile.mkdtemp(prefix="c", dir=base))
    tmp, out, work = case / "t", case / "out", case / "work"
    for d in (tmp, out, work):
        d.mkdir()
    cwd, args = setup(work)
    marker = uuid.uuid4().hex
    env = {**os.environ, "TMPDIR": str(tmp), MARKER: marker, "PYTHONUNBUFFERED": "1"}
    log = case / "output.txt"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [PY, "-m", "pytest", *args, *writes(out)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = time.monotonic()
    while not (
        ready_text in log.read_text(errors="replace")
        and (ready_file is None or glob.glob(str(tmp / ready_file)))
    ):
        if proc.poll() is not None or time.monotonic() - started > 600:
            return {
                "mode": mode,
                "signal": sig,
                "error": f"never measured (exit {proc.poll()}); see {log}",
            }
        time.sleep(0.2)
    time.sleep(wait_s)
    measuring_s = time.monotonic() - started
    SIGNALS[sig](proc)
    code = wait_or_kill(proc, END_S)
    ended = time.monotonic()
    if isinstance(code, int):
        code = f"{code} ({ended - started - measuring_s:.1f} s)"
    time.sleep(max(0.0, SETTLE_S - (time.monotonic() - ended)))
    alive = ours(marker, sid=proc.pid)
    text = log.read_text(errors="replace")
    at_exit = left_in(tmp)
    next_start(tmp, marker)
    return {
        "mode": mode,
        "signal": sig,
        "after_s": measuring_s,
        "exit": code,
        "traceback": traceback_in(text),
        "line": interrupted_line(text),
        "alive": alive,
        "written": sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()),
        "tmp_at_exit": at_exit,
        "tmp_after_next": left_in(tmp),
        "log": str(log),
    }


# -- low limits: a session run to its end ------------------------------------------------------------

LIMITS = {
    "ulimit -n 64": "ulimit -n 64",
    "TMPDIR full": "full",
    "TMPDIR 64 KiB free": "64k",
}
LIMIT_MODES = {
    "time isolated": MODES["time isolated"][0],
    "counted": MODES["counted"][0],
}


def limited(limit: str, mode: str, base: Path) -> dict:
    case = Path(tempfile.mkdtemp(prefix="l", dir=base))
    tmp, out, work = case / "t", case / "out", case / "work"
    for d in (tmp, out, work):
        d.mkdir()
    cwd, args = LIMIT_MODES[mode](work)
    marker = uuid.uuid4().hex
    cmd = shlex.join([PY, "-m", "pytest", *args, *writes(out)])
    how = LIMITS[limit]
    if how.startswith("ulimit"):
        argv = ["bash", "-c", f"{how}; exec {cmd}"]
    else:  # a small tmpfs, in a mount namespace of its own (no root needed where user namespaces are allowed)
        free = "0" if how == "full" else "64"
        fill = f"dd if=/dev/zero of={tmp}/filler bs=1k count=100000 2>/dev/null; "
        if free != "0":
            fill += f"truncate -s -{free}K {tmp}/filler; "
        argv = [
            "unshare",
            "-Urm",
            "bash",
            "-c",
            f"mount -t tmpfs -o size=4m tmpfs {tmp} && {fill}exec {cmd}",
        ]
    log = case / "output.txt"
    env = {**os.environ, "TMPDIR": str(tmp), MARKER: marker, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    code = wait_or_kill(proc, 900)
    took = time.monotonic() - started
    time.sleep(SETTLE_S)
    text = log.read_text(errors="replace")
    return {
        "mode": mode,
        "signal": limit,
        "exit": code,
        "took_s": took,
        "traceback": traceback_in(text),
        "line": _summary_line(text),
        "alive": ours(marker, sid=proc.pid),
        "log": str(log),
        "written": sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()),
    }


def _summary_line(text: str) -> str:
    """The line that says what went wrong (ours or pytest's), else pytest's summary line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if re.search(r"(ERROR|error:|Error:|OSError|No space|Too many open files)", line):
            return line
    return lines[-1] if lines else ""


# -- the table -----------------------------------------------------------------------------------------


def _cell(text: str, width: int = 110) -> str:
    text = str(text).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[dict]) -> str:
    head = (
        "| mode | signal / limit | exit | traceback? | our line | processes left 5 s later | written | "
        "TMPDIR at exit | TMPDIR after next start |"
    )
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['mode']} | {r['signal']} | {_cell(r['error'])} |  |  |  |  |  |  |")
            continue
        out.append(
            "| "
            + " | ".join(
                [
                    r["mode"],
                    r["signal"],
                    str(r["exit"]),
                    r["traceback"],
                    _cell(r["line"] or "none"),
                    _cell(", ".join(r["alive"]) or "none"),
                    _cell(", ".join(r["written"]) or "nothing"),
                    _cell(", ".join(r.get("tmp_at_exit", ["-"])) or "empty", 60),
                    _cell(", ".join(r.get("tmp_after_next", ["-"])) or "empty", 60),
                ]
            )
            + " |"
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES)
    )
    parser.add_argument(
        "--signals", default=",".join(SIGNALS), help="comma-separated, of: " + ", ".join(SIGNALS)
    )
    parser.add_argument(
        "--wait", type=float, default=2.0, help="seconds of measuring before the signal"
    )
    parser.add_argument("--no-limits", action="store_true", help="leave out the low-limit sessions")
    parser.add_argument("--only-limits", action="store_true", help="only the low-limit sessions")
    parser.add_argument(
        "--keep", action="store_true", help="keep the cases' directories (outputs) for a look"
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE_RUN}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE_RUN)
    args = parser.parse_args()
    # started in the background by a shell, this process ignores SIGINT, and so would the sessions
    signal.signal(signal.SIGINT, signal.default_int_handler)
    base = Path(
        tempfile.mkdtemp(prefix="ie-", dir="/tmp")
    )  # short: a unix socket's path is at most 107 bytes
    rows = []
    if not args.only_limits:
        for mode in args.modes.split(","):
            for sig in args.signals.split(","):
                rows.append(interrupt(mode, sig, base, args.wait))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    if not args.no_limits:
        for limit in LIMITS:
            for mode in LIMIT_MODES:
                rows.append(limited(limit, mode, base))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    print(f"\noutputs in {base}" if args.keep else "")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(base)])
    broken = [f"{r['mode']}, {r['signal']}" for r in rows if "error" in r]
    if broken:  # a session that never got to measuring: the run shows nothing about interrupts
        print(f"never measured: {'; '.join(broken)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
