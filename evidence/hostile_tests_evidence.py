"""What a user's own benchmark test that misbehaves does to the session, in-process and isolated.

    python evidence/hostile_tests_evidence.py
    python evidence/hostile_tests_evidence.py --nproc 1      # also: a session under `ulimit -u 1` (not as root)
    python evidence/hostile_tests_evidence.py --smoke        # the test that exits only, 1 s to settle

Each misbehaving test (it ends its process, segfaults, never returns, leaves a thread running,
allocates 2 GB, prints 100 MB) sits in a test file beside a test that behaves. In-process, each
runs in a session of its own (``-k``), since one that ends its process ends the session; isolated
(``--concurrency-isolate``), all of them run in one session. Each session writes a baseline;
its exit status, how long it took, what pytest said about the test, the processes of ours alive
5 s after it ended (a marker in their environment) and whether the baseline was written are
tabled in markdown (docs/security.md). A session that has not ended after ``--hang`` seconds is
killed and reads "hang".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from interrupt_evidence import MARKER, ours, wait_or_kill  # beside this script

PY = sys.executable
SETTLE_S = 5.0

TESTS = (
    Path(__file__).resolve().parent.parent / "tests" / "data" / "hostile.py"
)  # tests/test_isolation.py's too
HOSTILE = ["exits", "segfaults", "never_returns", "leaks_a_thread", "allocates_2gb", "prints_100mb"]
BEHAVES = "fine"
#: --smoke: the smallest run that still runs a hostile test in-process and isolated
SMOKE = {"tests": "exits", "settle": 1.0}


def session(
    work: Path, args: list[str], hang_s: float, prefix: list[str] = (), settle_s: float = SETTLE_S
) -> dict:
    marker = uuid.uuid4().hex
    baseline = work / f"baseline-{marker[:8]}.json"
    env = {**os.environ, MARKER: marker, "PYTHONUNBUFFERED": "1"}
    argv = [
        *prefix,
        PY,
        "-m",
        "pytest",
        "test_hostile.py",
        "--benchmark-only",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-rA",
        "--concurrency-timeout=5",
        f"--concurrency-save-baseline={baseline}",
        *args,
    ]
    log = work / f"out-{marker[:8]}.txt"
    started = time.monotonic()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        code = wait_or_kill(proc, hang_s)
    took = time.monotonic() - started
    time.sleep(settle_s)
    return {
        "exit": code,
        "took_s": took,
        "text": log.read_text(errors="replace"),
        "alive": ours(marker, sid=proc.pid),
        "written": baseline.exists(),
    }


def said(text: str, test: str) -> str:
    """pytest's line about ``test`` (its short summary), else the session's last words."""
    warned = [
        line.strip() for line in text.splitlines() if f"test_{test}[" in line and "Warning:" in line
    ]
    for line in text.splitlines():
        if f"test_{test}[" in line and re.match(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL)", line):
            return line.strip() + (f"; and {warned[0]}" if warned else "")
    tail = [line.strip() for line in text.splitlines() if line.strip()]
    return tail[-1] if tail else "(nothing)"


def cell(text, width: int = 120) -> str:
    text = str(text).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="threading")
    parser.add_argument(
        "--hang", type=float, default=60.0, help="seconds after which a session is a hang"
    )
    parser.add_argument(
        "--nproc",
        type=int,
        default=0,
        help="also run the isolated session under `ulimit -u` of this many processes (the "
        "user's, all sessions; root is exempt from the limit: run the script as another user)",
    )
    parser.add_argument(
        "--tests", default=",".join(HOSTILE), help="the hostile tests, of: " + ", ".join(HOSTILE)
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        help="seconds after a session ends before its processes left are read",
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    hostile = args.tests.split(",")
    if set(hostile) - set(HOSTILE):
        parser.error(
            f"--tests: not among {', '.join(HOSTILE)}: {', '.join(set(hostile) - set(HOSTILE))}"
        )
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    (work / "test_hostile.py").write_text(TESTS.read_text())
    models = [f"--concurrency-backends={args.backend}"]
    rows = []
    for test in hostile:
        r = session(work, [*models, "-k", f"{BEHAVES} or {test}"], args.hang, settle_s=args.settle)
        rows.append(("in-process", test, r))
        print(
            cell(
                f"in-process {test}: exit {r['exit']} in {r['took_s']:.1f} s, {said(r['text'], test)}"
            ),
            flush=True,
        )
    r = session(
        work,
        [*models, "--concurrency-isolate", "-k", " or ".join([BEHAVES, *hostile])],
        args.hang,
        settle_s=args.settle,
    )
    isolated = r
    for test in hostile:
        rows.append(("isolated", test, r))
    print(cell(f"isolated: exit {r['exit']} in {r['took_s']:.1f} s"), flush=True)
    if args.nproc:
        if os.getuid() == 0:
            print(
                "--nproc: root is exempt from `ulimit -u`: run the script as another user",
                file=sys.stderr,
            )
            return 2
        prefix = ["bash", "-c", f'ulimit -u {args.nproc} && exec "$@"', "-"]
        r = session(
            work,
            [*models, "--concurrency-isolate", "-k", BEHAVES],
            args.hang,
            prefix=prefix,
            settle_s=args.settle,
        )
        rows.append((f"isolated, ulimit -u {args.nproc}", "(all)", r))
        print(
            cell(f"ulimit -u {args.nproc}: exit {r['exit']}, {said(r['text'], BEHAVES)}"),
            flush=True,
        )
    print()
    print(
        "| mode | the test | session exit (time) | what pytest said of it | left 5 s later | baseline written |"
    )
    print("|---|---|---|---|---|---|")
    for mode, test, r in rows:
        code = r["exit"] if isinstance(r["exit"], str) else f"{r['exit']} ({r['took_s']:.1f} s)"
        print(
            f"| {mode} | {test} | {code} | {cell(said(r['text'], test))} | "
            f"{cell(', '.join(r['alive']) or 'none', 60)} | {'yes' if r['written'] else 'no'} |"
        )
    print(f"\noutputs in {work}")
    json.dump(
        [[m, t, {k: v for k, v in r.items() if k != "text"}] for m, t, r in rows],
        open(work / "rows.json", "w"),
        indent=1,
    )
    # isolated, the test that behaves passes whatever its neighbours do: if it did not, the
    # session itself broke (the plugin did not load, no test ran) and the table shows nothing
    if not said(isolated["text"], BEHAVES).startswith("PASSED"):
        print(
            f"isolated: the test that behaves did not pass: {said(isolated['text'], BEHAVES)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
