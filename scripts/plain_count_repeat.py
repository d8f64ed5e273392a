#!/usr/bin/env python3
"""Do a user's plain counted test's counts repeat from one session to the next?

A plain test (``benchmark.pedantic`` + ``concurrency_backend``, written as a user would) is
counted in the session's own process, which runs whole under valgrind. This runs it in
``--sessions`` separate sessions, each in a working directory of another depth and with an
environment of another size (what differs between a developer's shell and CI, or between two
checkouts), and prints each session's median count per model and the spread of the medians.

Then it judges the sessions with the gate's own rule for counts (``stats.decide_exact``): A/A,
every session against every other one (ordered pairs; any verdict but unchanged is a false
alarm), and a change of ``--inject`` percent scaled onto the second session's rounds (the real
rounds, noise and cold first round included; the change itself is exact, so this measures the
rule, not an injected workload: scripts/count_evidence.py injects real work into workloads).

    python3 scripts/plain_count_repeat.py --sessions 4 --backends gevent,asyncio,threading
    python3 scripts/plain_count_repeat.py --sessions 10 --inject 2 --threshold 0.01,0.02
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

TEST = textwrap.dedent('''
    def ring(backend, n=20, m=200):
        """A message around a ring of n tasks, m times (the user's own code)."""
        chans = [backend.channel(1) for _ in range(n)]

        def node(i):
            for _ in range(m):
                chans[(i + 1) % n].put(chans[i].get() + 1)

        def anode(i):
            async def run():
                for _ in range(m):
                    await chans[(i + 1) % n].put(await chans[i].get() + 1)
            return run()

        if backend.family == "async":
            async def main():
                tasks = [backend.spawn(anode, i) for i in range(1, n)]
                total = 0
                for _ in range(m):
                    await chans[1].put(total)
                    total = await chans[0].get()
                for t in tasks:
                    await t.join()
                return total
        else:
            def main():
                tasks = [backend.spawn(node, i) for i in range(1, n)]
                total = 0
                for _ in range(m):
                    chans[1].put(total)
                    total = chans[0].get()
                for t in tasks:
                    t.join()
                return total
        return main

    def test_ring(benchmark, concurrency_backend):
        b = concurrency_backend
        result = benchmark.pedantic(lambda: b.run(ring(b)), rounds=5)
        assert result > 0
''')


def session(index: int, backends: str, root: str) -> dict:
    # another working-directory depth and environment size per session
    work = os.path.join(root, *[f"d{index}" * (index + 1)] * (index + 1))
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "test_plain.py"), "w") as fh:
        fh.write(TEST)
    env = {**os.environ, "PAD": "x" * (97 * index)}
    out = os.path.join(work, "run.json")
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_plain.py", "-q", "-p", "no:cacheprovider", "--benchmark-only",
         "--concurrency-measure=instructions", f"--concurrency-backends={backends}", f"--benchmark-json={out}"],
        cwd=work, env=env, capture_output=True, text=True, timeout=1800,
    )
    if run.returncode != 0:
        sys.exit(f"session {index} failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}")
    doc = json.load(open(out))
    rounds = {b["extra_info"]["backend"]: b["stats"]["data"] for b in doc["benchmarks"]}
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"session {index} ({time.monotonic() - started:.0f} s, cwd depth {index + 1}, +{97 * index} B env):",
          ", ".join(f"{k} {v:,.0f} (rounds {', '.join(f'{x:,.0f}' for x in rounds[k])})" for k, v in medians.items()),
          flush=True)
    return rounds


def judge(results: list, inject: float, thresholds: list) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from pytest_concurrency.gate import stats

    pairs = [(a, b) for a in range(len(results)) for b in range(len(results)) if a != b]
    for threshold in thresholds:
        print(f"the gate's rule for counts at threshold {threshold:.0%} ({len(pairs)} ordered pairs per model):")
        for backend in results[0]:
            aa = [stats.decide_exact(results[a][backend], results[b][backend], threshold).status for a, b in pairs]
            hit = [stats.decide_exact(results[a][backend], [x * (1 + inject / 100) for x in results[b][backend]],
                                      threshold).status for a, b in pairs]
            alarms = sum(s != "unchanged" for s in aa)
            print(f"  {backend}: A/A {alarms}/{len(pairs)} false alarms; +{inject:g}% caught "
                  f"{hit.count('regressed')}/{len(pairs)} (others: {sorted(set(hit) - {'regressed'}) or 'none'})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--backends", default="gevent,asyncio,threading")
    ap.add_argument("--inject", type=float, default=2.0, help="percent scaled onto the current side (default 2)")
    ap.add_argument("--threshold", default="0.01,0.02", help="thresholds to judge at, fractions (default 0.01,0.02)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="plain-count-") as root:
        results = [session(i, args.backends, root) for i in range(args.sessions)]
    print("spread of the medians between sessions, (max - min) / min:")
    for backend in results[0]:
        values = [statistics.median(r[backend]) for r in results]
        print(f"  {backend}: {(max(values) - min(values)) / min(values):.3%}  ({min(values):,.0f} .. {max(values):,.0f})")
    judge(results, args.inject, [float(t) for t in args.threshold.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
