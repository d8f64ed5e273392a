"""How far the plugin's figure is from the same workload timed bare, outside pytest.

    python evidence/harness_overhead.py [--rounds 15]
    python evidence/harness_overhead.py --smoke     # the first case only, 3 rounds, once

For each case below: N rounds of ``workload.run`` timed with ``time.perf_counter`` in a
plain loop, then the same case through ``pytest benchmarks --benchmark-only`` (in a
subprocess, same rounds); prints both medians and their ratio. Bare and plugin runs are
interleaved three times so that machine drift hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_concurrency import backends, workloads

ROOT = Path(__file__).resolve().parent.parent  # the checkout: its benchmarks/ are the plugin's run

CASES = [
    ("ring", {"n": 20, "m": 1000, "capacity": 0}, "asyncio"),
    ("switch", {"rounds": 10000}, "gevent"),
]


def bare(workload, params, spec, rounds):
    backend = backends.load(spec)
    wl = workloads.get(workload)
    wl.run(backend, params)  # warm-up, as the plugin does
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        wl.run(backend, params)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def through_plugin(workload, params, spec, rounds):
    test_id = f"{workload}-{','.join(f'{k}={params[k]}' for k in sorted(params))}-{spec}"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--benchmark-only",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--concurrency-rounds={rounds}",
                f"--concurrency-backends={spec}",
                f"--benchmark-json={out}",
                f"benchmarks/test_seeds.py::test_seed_workload[{test_id}]",
            ],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (bench,) = json.load(open(out))["benchmarks"]
        return bench["stats"]["median"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run: the first case, 3 rounds, bare and through the plugin once",
    )
    args = parser.parse_args()
    cases, times = (CASES[:1], 1) if args.smoke else (CASES, 3)
    if args.smoke:
        args.rounds = 3
    print(f"{'case':42} {'bare':>10} {'plugin':>10} {'plugin/bare':>12}")
    for workload, params, spec in cases:
        pairs = [
            (
                bare(workload, params, spec, args.rounds),
                through_plugin(workload, params, spec, args.rounds),
            )
            for _ in range(times)
        ]
        b = statistics.median(p[0] for p in pairs)
        p = statistics.median(p[1] for p in pairs)
        label = f"{workload}{params} on {spec}"
        print(f"{label:42} {b * 1e3:8.2f}ms {p * 1e3:8.2f}ms {p / b:12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
