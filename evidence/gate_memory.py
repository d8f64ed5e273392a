#!/usr/bin/env python3
"""What judging a baseline costs, by its size: memory and time of the gate alone.

A suite's own fast benchmark test gets tens of thousands of rounds from pytest-benchmark (its
default: as many as fit in a second), and a baseline keeps them all. Each size is judged in a
process of its own (a baseline saved to a file, then ``gate.compare`` on a session of the same
size, 2% slower), whose peak RSS and wall time are read; the difference to the smallest size is
what the rounds cost. ``--brute`` also draws the old way (n indices per resample, 2000 resamples)
up to the sizes that fit, and prints both intervals: the same bootstrap distribution, drawn two
ways (gate/stats.py, ``resampled_medians``).

    python3 evidence/gate_memory.py                       # 100, 10,000, 70,000 and 200,000 rounds
    python3 evidence/gate_memory.py --sizes 100,70000 --brute
    python3 evidence/gate_memory.py --smoke               # 100 and 5,000 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SMOKE = "100,5000"


def judge_once(path: str, n: int, brute: bool) -> dict:
    """In the child: load the baseline at ``path``, judge a session of ``n`` rounds against it."""
    import numpy as np

    from pytest_concurrency.gate import compare as gate
    from pytest_concurrency.gate import stats
    from pytest_concurrency.measure.records import Record
    from pytest_concurrency.store import baseline

    rng = np.random.default_rng(n)
    doc = baseline.load(path)
    meta = doc.meta
    now = [
        Record("plain", {}, "asyncio", list(rng.lognormal(np.log(1.02e-5), 0.05, n)), extra=meta)
    ]
    started = time.perf_counter()
    result = gate.compare(doc, now, meta, gate.GateSettings())
    (verdict,) = result.verdicts
    out = {
        "seconds": time.perf_counter() - started,
        "verdict": verdict.status,
        "change": verdict.change,
        "ci": list(verdict.ci or ()),
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if brute:
        base = np.asarray([s for s in doc.doc["benchmarks"][0]["stats"]["data"]], dtype=float)
        cur = np.asarray(now[0].samples)
        r = np.random.default_rng(stats.DEFAULT_SEED)
        size = len(base)  # a save keeps at most baseline.KEPT_ROUNDS of the n
        mb = np.median(base[r.integers(0, size, (stats.DEFAULT_RESAMPLES, size))], axis=1)
        mc = np.median(cur[r.integers(0, n, (stats.DEFAULT_RESAMPLES, n))], axis=1)
        out["brute_ci"] = [float(x) - 1 for x in np.percentile(mc / mb, [2.5, 97.5])]
    return out


def save_baseline(path: str, n: int) -> None:
    import numpy as np
    from _documents import document_from_records

    from pytest_concurrency import measure
    from pytest_concurrency.measure.records import Record
    from pytest_concurrency.store import baseline

    rng = np.random.default_rng(n + 1)
    meta = baseline.current_meta({"asyncio": "3"}, None, measure.instrument("time"))
    samples = list(rng.lognormal(np.log(1e-5), 0.05, n))
    rec = Record("plain", {}, "asyncio", samples, extra={**meta, "measure": "time"})
    baseline.save(path, document_from_records([rec], meta))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,10000,70000,200000")
    parser.add_argument("--brute", action="store_true", help="also the old way, up to 70,000")
    parser.add_argument("--smoke", action="store_true", help=f"--sizes {SMOKE} --brute")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, n, brute = args.child
        print(json.dumps(judge_once(path, int(n), brute == "1")))
        return 0
    sizes = [int(s) for s in (SMOKE if args.smoke else args.sizes).split(",")]
    brute = args.brute or args.smoke
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"base-{n}.json")
            save_baseline(path, n)
            child = [
                sys.executable,
                __file__,
                "--child",
                path,
                str(n),
                "1" if brute and n <= 70000 else "0",
            ]
            started = time.perf_counter()
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            got = json.loads(done.stdout)
            got.update(n=n, wall=time.perf_counter() - started, size_mb=os.path.getsize(path) / 1e6)
            rows.append(got)
    first = rows[0]
    print(
        "| rounds | baseline file | gate.compare | peak RSS | more than the smallest | verdict (2% slower) | interval | drawn the old way |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        old = r.get("brute_ci")
        print(
            f"| {r['n']:,} | {r['size_mb']:.1f} MB | {r['seconds']:.2f} s | {r['rss_mib']:.0f} MiB "
            f"| {r['rss_mib'] - first['rss_mib']:+.0f} MiB, {r['seconds'] - first['seconds']:+.2f} s "
            f"| {r['verdict']} {r['change']:+.2%} | {r['ci'][0]:+.2%} to {r['ci'][1]:+.2%} "
            f"| {f'{old[0]:+.2%} to {old[1]:+.2%}' if old else '-'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
