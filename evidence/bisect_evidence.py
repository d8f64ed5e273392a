"""Bisection over a synthetic history: does ``python -m pytest_concurrency bisect`` find the one
commit of N that made a function slower, in about log2(N) counted runs?

Each trial builds a git repository of ``--commits`` commits: a small library (``lib.work``, a
pure-Python loop) and one plain pytest-benchmark test of it. One commit, drawn at random (seeded
by the trial), makes the loop ``--change`` times longer (+2% by default); the others change the
code without changing ``work``: a line of notes, or a helper function the test never calls (code
the test does not run still moves where objects land, which a count follows). Then it bisects
from the first commit to the last and checks the commit named, one line per trial appended to
``evidence/bisect/results.jsonl``.

    python3 evidence/bisect_evidence.py --commits 32 --trials 3     # about 5 minutes a trial here
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "bisect" / "results.jsonl"
LOOP = 20_000

LIB = """def work(n={n}):
    total = 0
    for i in range(n):
        total += i * 3 % 7
    return total
"""
TEST = """import lib


def test_work(benchmark):
    benchmark(lib.work)
"""


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def build(repo: Path, commits: int, culprit: int, change: float) -> list[str]:
    """The history: commit 0 the good end, ``culprit`` (1..commits-1) the slower loop."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    n, helpers, shas = LOOP, [], []
    for i in range(commits):
        if i == 0:
            (repo / "test_lib.py").write_text(TEST)
            title = "the library and its benchmark"
        elif i == culprit:
            n = round(LOOP * change)
            title = f"work: loop {n} times"
        elif i % 2:
            with open(repo / "NOTES.txt", "a") as fh:
                fh.write(f"note {i}\n")
            title = f"notes: {i}"
        else:
            helpers.append(f"\n\ndef helper_{i}(x):\n    return x + {i}\n")
            title = f"lib: helper_{i} (not called by the test)"
        (repo / "lib.py").write_text(LIB.format(n=n) + "".join(helpers))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", title)
        shas.append(git(repo, "rev-parse", "--short=10", "HEAD"))
    return shas


def trial(k: int, args) -> dict:
    rng = random.Random(k)
    culprit = rng.randrange(1, args.commits)
    with tempfile.TemporaryDirectory(prefix="bisect-evidence-") as tmp:
        repo = Path(tmp) / "repo"
        shas = build(repo, args.commits, culprit, args.change)
        out = Path(tmp) / "bisect.json"
        command = [
            sys.executable,
            "-m",
            "pytest_concurrency",
            "bisect",
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--json",
            str(out),
            "--",
            "test_lib.py",
            "--benchmark-only",
        ]
        load = os.getloadavg()
        start = time.monotonic()
        done = subprocess.run(command, cwd=repo, capture_output=True, text=True)
        seconds = time.monotonic() - start
        print(done.stdout, done.stderr, sep="\n", flush=True)
        result = json.loads(out.read_text()) if out.exists() else {}
        status = git(repo, "status", "--porcelain")
        worktrees = git(repo, "worktree", "list").count("\n") + 1
    found = result.get("found") or []
    plugin = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
    ).stdout.strip()
    named = found[0]["first_bad"] if found else None
    return {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "plugin_commit": plugin,
        "commits": args.commits,
        "change": args.change,
        "trial": k,
        "culprit": culprit,
        "culprit_sha": shas[culprit],
        "named": named,
        "right": named == shas[culprit],
        "counted_runs": result.get("runs"),
        "exit": done.returncode,
        "seconds": round(seconds),
        "line": found[0]["line"] if found else result.get("error"),
        "steps": [(s["point"], s["status"], s["changes"]) for s in result.get("steps") or ()],
        "tree_untouched": status == "" and worktrees == 1,
        "load": [round(x, 2) for x in load] + [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=32)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--first-trial", type=int, default=0)
    p.add_argument(
        "--change", type=float, default=1.02, help="the culprit's loop, times the others'"
    )
    p.add_argument("--no-save", action="store_true", help="print, do not append to results.jsonl")
    p.add_argument("--smoke", action="store_true", help="4 commits, 1 trial, nothing saved")
    args = p.parse_args()
    if args.smoke:
        args.commits, args.trials, args.no_save = 4, 1, True
    for k in range(args.first_trial, args.first_trial + args.trials):
        row = trial(k, args)
        print(json.dumps(row), flush=True)
        if not args.no_save:
            RESULTS.parent.mkdir(exist_ok=True)
            with open(RESULTS, "a") as fh:
                fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
