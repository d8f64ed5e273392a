#!/usr/bin/env python3
"""Do layouts forked after the collection still separate a count that follows the layout, as
layouts started as processes of their own do (issue 64)?

Two of yarl 1.25.1's URL benchmarks count in one of two values 1.2-1.3% apart, depending on what
ran before them and on the layout (``test_url_make_with_ipv6_address_and_path``: 255,777 or 259,016
instructions a call; docs/shards-and-bisect.md). The gate's protection is that the layouts of one
session do not all land on the same value when an unrelated change moves it: then the median over
layouts, and "layouts disagree", keep a false "regressed" away.

Each condition is a counted save (``--concurrency-measure=instructions
--concurrency-save-baseline``) in yarl's directory (``count_cost.prepared``), with
``--concurrency-layouts-from=fork`` and ``=start`` taking turns; a condition moves everything
before the benchmarks as an unrelated change would: which tests run before them (``-k``), an
environment variable of 8 KB. Printed and written to ``count_cost/separation.jsonl``: each
benchmark's median a call in each layout.

    python3 evidence/layout_separation.py                 # 4 conditions x fork, start
    python3 evidence/layout_separation.py --smoke         # one condition, fork only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import count_cost  # beside this script

OUT = count_cost.OUT.parent / "separation.jsonl"
FLIPPING = "test_url_make_with_ipv6_address_and_path or test_url_make_empty_username"
CONDITIONS = {
    "alone": FLIPPING,
    "after-others": f"test_url_make_with_host or {FLIPPING}",
    "alone-env8k": FLIPPING,
    "after-others-env8k": f"test_url_make_with_host or {FLIPPING}",
}
SMOKE = {"conditions": "alone", "modes": "fork"}


def layouts_of(baseline: Path) -> dict:
    """Each benchmark's median a call in each layout (layout 0 first), from a saved baseline."""
    doc = json.loads(baseline.read_text())
    found = {}
    for bench in doc["benchmarks"]:
        extra = bench.get("extra_info", {})
        rounds = [bench["stats"]["data"], *extra.get("layouts", [])]
        found[bench["name"]] = [round(statistics.median(r)) for r in rounds]  # a call's count
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--modes", default="fork,start")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "count_sep")
    )
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    py, run = count_cost.prepared("yarl", work)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    failed = 0
    with open(args.out, "a") as out:
        for repeat in range(args.repeats):
            for condition in args.conditions.split(","):
                for mode in args.modes.split(","):
                    base = work / f"sep-{condition}-{mode}.json"
                    base.unlink(missing_ok=True)
                    env = dict(os.environ)
                    if condition.endswith("env8k"):
                        env["LAYOUT_SEPARATION_PAD"] = "x" * 8192
                    cmd = [
                        str(py), "-m", "pytest", "tests/test_url_benchmarks.py",
                        "-k", CONDITIONS[condition], "--numprocesses=0", "--no-cov",
                        "-p", "no:cacheprovider", "-q", "--concurrency-measure=instructions",
                        f"--concurrency-layouts-from={mode}", f"--concurrency-save-baseline={base}",
                    ]  # fmt: skip
                    started = time.perf_counter()
                    done = subprocess.run(cmd, cwd=run, env=env, capture_output=True, text=True)
                    if not base.exists():
                        failed += 1
                        print(f"{condition} {mode}: no baseline (exit {done.returncode})")
                        print(done.stdout[-2000:], done.stderr[-2000:])
                        continue
                    row = {
                        "condition": condition,
                        "mode": mode,
                        "repeat": repeat,
                        "seconds": round(time.perf_counter() - started, 1),
                        "plugin": count_cost.commit(),
                        "layouts": layouts_of(base),
                        "command": " ".join(cmd[1:]),
                    }
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    for name, medians in row["layouts"].items():
                        print(f"{condition:20} {mode:6} {name:50} {medians}", flush=True)
    shutil.rmtree(work / "logs", ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
