"""In-process vs isolated runs of the same suite: per-benchmark median ratio and relative spread.

pytest benchmarks --benchmark-only --benchmark-json=inproc.json
pytest benchmarks --benchmark-only --concurrency-isolate --benchmark-json=isolated.json
python evidence/compare_modes.py inproc.json isolated.json

python evidence/compare_modes.py --smoke    # runs both sessions itself: the smoke suite's rings, asyncio
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: its benchmarks/
#: --smoke: both sessions, as small as they come: the smoke scale's two rings on asyncio
SMOKE_SESSION = [
    "--concurrency-scale=smoke",
    "--concurrency-backends=asyncio",
    "-k",
    "ring",
]


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return {
        (
            b["extra_info"]["workload"],
            json.dumps(b["extra_info"]["params"], sort_keys=True),
            b["extra_info"]["backend"],
        ): b["stats"]
        for b in doc["benchmarks"]
    }


def spread(stats: dict) -> float:
    return stats["iqr"] / stats["median"]


def run_sessions(directory: str) -> tuple[str, str]:
    """The two sessions of the docstring, in-process and isolated, at ``SMOKE_SESSION``'s size."""
    paths = []
    for name, extra in (("inproc", []), ("isolated", ["--concurrency-isolate"])):
        path = os.path.join(directory, f"{name}.json")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "benchmarks",
                "--benchmark-only",
                "-q",
                "-p",
                "no:cacheprovider",
                *SMOKE_SESSION,
                *extra,
                f"--benchmark-json={path}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not os.path.exists(path):
            sys.exit(f"{name} session failed ({done.returncode}):\n{done.stdout[-3000:]}")
        paths.append(path)
    return paths[0], paths[1]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "runs", nargs="*", metavar="JSON", help="the in-process run, then the isolated one"
    )
    ap.add_argument("--smoke", action="store_true", help="run both sessions first, smallest size")
    args = ap.parse_args(argv)
    if args.smoke == bool(args.runs) or (args.runs and len(args.runs) != 2):
        ap.error("give two --benchmark-json files (in-process, isolated), or --smoke")
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="compare-modes-") as directory:
            return compare(*run_sessions(directory))
    return compare(*args.runs)


def compare(local_path: str, isolated_path: str) -> int:
    local, isolated = load(local_path), load(isolated_path)
    keys = sorted(local.keys() & isolated.keys())
    if not keys:
        sys.exit("no benchmark is in both runs")
    ratio = {k: isolated[k]["median"] / local[k]["median"] for k in keys}
    med = statistics.median
    print(f"benchmarks compared: {len(keys)}")
    print(
        f"isolated/in-process median ratio: median {med(ratio.values()):.3f}, "
        f"min {min(ratio.values()):.3f}, max {max(ratio.values()):.3f}"
    )
    print(
        f"relative spread (IQR/median), median over benchmarks: in-process "
        f"{med(spread(local[k]) for k in keys):.3f}, isolated {med(spread(isolated[k]) for k in keys):.3f}"
    )
    for backend in sorted({k[2] for k in keys}):
        mine = [k for k in keys if k[2] == backend]
        print(
            f"  {backend:28} ratio {med(ratio[k] for k in mine):.3f}   spread in-process "
            f"{med(spread(local[k]) for k in mine):.3f}, isolated {med(spread(isolated[k]) for k in mine):.3f}"
        )
    for k in sorted(keys, key=lambda k: abs(ratio[k] - 1), reverse=True)[:5]:
        print(
            f"  farthest: {k[0]} {k[1]} on {k[2]}: ratio {ratio[k]:.3f}, "
            f"spread {spread(local[k]):.3f} -> {spread(isolated[k]):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
