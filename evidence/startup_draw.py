#!/usr/bin/env python3
"""What a counted session's start-up draws: the same code, counted saves whose command lines
differ only in the length of the baseline's file name (one byte more each), and one whose name
differs but not its length.

Under valgrind a process starts at the same addresses every time, so two counted sessions of the
same command line count alike to the instruction; a byte more on the command line moves the
objects allocated from there on, and with them which names share a slot of CPython's type
attribute cache. The layouts forked after collection (roles/forked_layouts.py) move only what the
tests allocate: the names the code under test interned at its import stay where that start-up put
them, so all the forked layouts of a session read its start-up's draw. A change a start-up draw
is as large as cannot be told from that draw by forked layouts alone.

    python3 evidence/startup_draw.py --work /tmp/draw              # yarl's URL builds, 5 saves
    python3 evidence/startup_draw.py --work /tmp/draw --lengths 0,1,2,3,4,5

Each save is a line of ``--out`` (JSONL): its file name's length, each benchmark's median in each
layout. It needs PyPI (yarl's sdist and the suite's venv: count_cost.prepared) and valgrind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from statistics import median

# beside this script (python puts its folder first on the import path)
import count_cost

OUT = count_cost.OUT.parent / "startup_draw.jsonl"
SELECT = [
    "tests/test_url_benchmarks.py",
    "-k",
    "test_url_build_with_host or test_url_make_with_host",
]


def save(py: Path, run: Path, target: Path, log: Path) -> dict[str, list[float]]:
    """One counted save to ``target``: each benchmark's median in each layout."""
    argv = [str(py), "-m", "pytest", *SELECT, *count_cost.COMMON]
    argv += ["--concurrency-measure=instructions", f"--concurrency-save-baseline={target}"]
    env = {**os.environ, "COVERAGE_FILE": str(target) + ".coverage"}
    with open(log, "w") as fh:
        code = subprocess.run(
            argv, cwd=run, env=env, stdout=fh, stderr=subprocess.STDOUT
        ).returncode
    if code != 0:
        raise SystemExit(f"the save to {target} ended {code}: see {log}")
    found = {}
    for b in json.loads(target.read_text())["benchmarks"]:
        layouts = [b["stats"]["data"], *(b["extra_info"].get("layouts") or ())]
        found[b["name"]] = [median(rounds) for rounds in layouts if rounds]
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="the suite's venv, saves and logs")
    ap.add_argument("--lengths", default="0,1,2,3", help="extra bytes in the file names, in turn")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    py, run = count_cost.prepared("yarl", work)
    plugin = count_cost.commit()
    names = [("s" + "x" * int(n), int(n)) for n in args.lengths.split(",")]
    names.append(("t", 0))  # as long as the first, another name
    rows = []
    for name, extra in names:
        target = work / f"{name}.json"
        target.unlink(missing_ok=True)
        found = save(py, run, target, work / f"{name}.log")
        row = {"plugin": plugin, "name": target.name, "extra_bytes": extra, "layouts": found}
        rows.append(row)
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    first = rows[0]["layouts"]
    for bench in sorted(first):
        print(bench)
        base = median(first[bench])
        for row in rows:
            counts = row["layouts"][bench]
            shown = " ".join(f"{c:>12,.1f}" for c in counts)
            print(f"  {row['name']:>12} {shown}   {median(counts) / base - 1:+.3%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
