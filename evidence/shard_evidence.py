"""A real suite counted in 1, 2 and 4 shards: do the merged shards give the unsharded run's
verdicts and counts, and what does the slowest shard cost against the whole run?

The suite is yarl 1.25.1's URL benchmarks from its sdist, unmodified (``-k "build or make"``:
30 benchmarks; the venv and directory of ``evidence/existing_suites.py``). Counted sessions
(``--concurrency-measure=instructions``, three layouts), one after the other on this machine:

  1. the whole suite, saved: ``full.json``;
  2. for N in 2 and 4, each shard judged against ``full.json`` (``--concurrency-verdicts``) and
     saved (``--concurrency-save-baseline``); the shards' verdict files merged
     (``python -m pytest_concurrency merge --verdicts``) and their baselines merged;
  3. the whole suite judged against each merged baseline (the unchanged code: every verdict
     must be unchanged), and against ``full.json`` (the unsharded run's own verdicts, which the
     merged shards' must equal benchmark by benchmark).

One line per session and one per comparison go to ``evidence/shards/results.jsonl``.

    python3 evidence/shard_evidence.py --work DIR         # about 15 minutes at rest here
    python3 evidence/shard_evidence.py --work DIR --rejudge   # then: shards against their merge
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# beside this script (python puts its folder first on the import path): the suite's venv and
# directory, as existing_suites.py makes them
import existing_suites  # noqa: E402

RESULTS = HERE / "shards" / "results.jsonl"
KEYWORD = "build or make"


def record(row: dict, save: bool) -> None:
    row = {"when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **row}
    print(json.dumps(row), flush=True)
    if save:
        RESULTS.parent.mkdir(exist_ok=True)
        with open(RESULTS, "a") as fh:
            fh.write(json.dumps(row) + "\n")


def counted(py: Path, run: Path, *extra: str) -> tuple[int, float, str]:
    command = [
        str(py),
        "-m",
        "pytest",
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        "tests/test_url_benchmarks.py",
        "-k",
        KEYWORD,
        "--concurrency-measure=instructions",
        *extra,
    ]
    start = time.monotonic()
    done = subprocess.run(command, cwd=run, capture_output=True, text=True)
    return done.returncode, time.monotonic() - start, done.stdout + done.stderr


def medians(path: Path) -> dict:
    """Each benchmark's median count (over its layouts), by its label."""
    from pytest_concurrency.measure.records import Document

    return {r.label: r.median for r in Document.of(json.loads(path.read_text())).records}


def verdicts(path: Path) -> dict:
    from pytest_concurrency.gate import verdict_file
    from pytest_concurrency.measure.records import key_label

    v = verdict_file.read(path)
    return {key_label(x.key): (x.status, x.change) for x in v.gate.verdicts} | {
        "exit": v.exit_status
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, help="the suite's venv and directory (kept)")
    p.add_argument("--shards", default="2,4")
    p.add_argument("--no-save", action="store_true")
    p.add_argument(
        "--rejudge",
        action="store_true",
        help="only: each shard judged against the merged baseline of its own split (the CI "
        "workflow's pull request), from the files a full run left in --work",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="2 benchmarks, 2 shards, nothing saved (needs the index and minutes: run by hand)",
    )
    args = p.parse_args()
    global KEYWORD
    if args.smoke:
        KEYWORD, args.shards, args.no_save = (
            "test_url_build_with_host_and_port or test_url_make_with_host_and_path",
            "2",
            True,
        )
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "prepare.log", "a") as log:
        py, run = existing_suites.prepare(existing_suites.SUITES["yarl"], work, log)
    out = work / "out"
    out.mkdir(exist_ok=True)
    save = not args.no_save

    def session(name: str, *extra: str) -> tuple[int, float]:
        load = os.getloadavg()
        code, seconds, text = counted(py, run, *extra)
        (out / f"{name}.log").write_text(text)
        summary = [line for line in text.splitlines() if "passed:" in line or "FAILED:" in line]
        record(
            {
                "session": name,
                "exit": code,
                "wall_s": round(seconds, 1),
                "load": [round(x, 2) for x in (*load, *os.getloadavg())],
                "summary": summary[-1:],
            },
            save,
        )
        return code, seconds

    if args.rejudge:
        for n in map(int, args.shards.split(",")):
            for i in range(1, n + 1):
                session(
                    f"shard-{i}of{n}-vs-merged",
                    f"--concurrency-shard={i}/{n}",
                    f"--concurrency-baseline={out / f'merged-{n}.json'}",
                    f"--concurrency-verdicts={out / f'r{i}of{n}.json'}",
                )
            merged = out / f"merged-r{n}.json"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest_concurrency",
                    "merge",
                    "--verdicts",
                    "--output",
                    str(merged),
                    *(str(out / f"r{i}of{n}.json") for i in range(1, n + 1)),
                ],
                capture_output=True,
                text=True,
            )
            judged = verdicts(merged)
            record(
                {
                    "shards": n,
                    "compared": "each shard against the merged baseline of its split, merged",
                    "statuses": {
                        st: sum(1 for k, v in judged.items() if k != "exit" and v[0] == st)
                        for st in {v[0] for k, v in judged.items() if k != "exit"}
                    },
                    "largest_change": max(
                        (abs(v[1]) for k, v in judged.items() if k != "exit" and v[1] is not None),
                        default=None,
                    ),
                    "exit": judged["exit"],
                },
                save,
            )
        return 0
    full = out / "full.json"
    for f in out.glob("*.json"):
        f.unlink()
    _, whole_s = session("whole-saved", f"--concurrency-save-baseline={full}")
    for n in map(int, args.shards.split(",")):
        walls = []
        for i in range(1, n + 1):
            _, s = session(
                f"shard-{i}of{n}",
                f"--concurrency-shard={i}/{n}",
                f"--concurrency-baseline={full}",
                f"--concurrency-verdicts={out / f'v{i}of{n}.json'}",
                f"--concurrency-save-baseline={out / f's{i}of{n}.json'}",
            )
            walls.append(s)
        merged_v = out / f"merged-v{n}.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest_concurrency",
                "merge",
                "--verdicts",
                "--output",
                str(merged_v),
                *(str(out / f"v{i}of{n}.json") for i in range(1, n + 1)),
            ],
            capture_output=True,
            text=True,
        )
        merged_b = out / f"merged-{n}.json"
        done_b = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest_concurrency",
                "merge",
                str(merged_b),
                *(str(out / f"s{i}of{n}.json") for i in range(1, n + 1)),
            ],
            capture_output=True,
            text=True,
        )
        a, b = medians(full), medians(merged_b)
        diffs = {k: b[k] / a[k] - 1 for k in a if k in b}
        record(
            {
                "shards": n,
                "merge_verdicts_exit": done.returncode,
                "merge_baselines_exit": done_b.returncode,
                "benchmarks": [len(a), len(b)],
                "same_benchmarks": a.keys() == b.keys(),
                "counts_identical": sum(1 for d in diffs.values() if d == 0),
                "largest_count_difference": max(diffs.values(), key=abs) if diffs else None,
                "median_abs_count_difference": statistics.median(abs(d) for d in diffs.values())
                if diffs
                else None,
                "shard_wall_s": [round(w, 1) for w in walls],
                "whole_wall_s": round(whole_s, 1),
                "slowest_shard_over_whole": round(max(walls) / whole_s, 2),
                "merge_stdout_tail": done.stdout.splitlines()[-1:],
            },
            save,
        )
    session(
        "whole-vs-full",
        f"--concurrency-baseline={full}",
        f"--concurrency-verdicts={out / 'whole.json'}",
    )
    whole = verdicts(out / "whole.json")
    for n in map(int, args.shards.split(",")):
        merged = verdicts(out / f"merged-v{n}.json")
        same = [k for k in whole if k != "exit" and merged.get(k, (None,))[0] == whole[k][0]]
        record(
            {
                "shards": n,
                "compared": "merged shard verdicts vs the unsharded run's, against full.json",
                "benchmarks": len(whole) - 1,
                "same_status": len(same),
                "differ": {
                    k: [whole[k], merged.get(k)] for k in whole if k != "exit" and k not in same
                },
                "exit": [whole["exit"], merged["exit"]],
            },
            save,
        )
        session(
            f"whole-vs-merged-{n}",
            f"--concurrency-baseline={out / f'merged-{n}.json'}",
            f"--concurrency-verdicts={out / f'whole-vs-merged-{n}.json'}",
        )
        judged = verdicts(out / f"whole-vs-merged-{n}.json")
        record(
            {
                "shards": n,
                "compared": "the unchanged whole suite against the merged baseline",
                "statuses": {
                    s: sum(1 for k, v in judged.items() if k != "exit" and v[0] == s)
                    for s in {v[0] for k, v in judged.items() if k != "exit"}
                },
                "exit": judged["exit"],
            },
            save,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
