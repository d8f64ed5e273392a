#!/usr/bin/env python3
"""Is a change of a few percent in a user's plain counted test caught, and only then?

A plain test (``benchmark.pedantic`` + ``concurrency_backend``, written as a user would: a ring
of tasks passing a message around) is counted in the session's own process, which runs whole
under valgrind. This runs it in ``--sessions`` separate sessions of unchanged code and as many
sessions per ``--inject`` percentage of changed code, each session in a working directory of
another depth and with an environment of another size (what differs between a developer's
shell and CI, or between two checkouts).

The change is real work in the test's own code: every hop of the ring runs ``extra(k)``, ``k``
additions (``k = 0`` in unchanged sessions, so the call itself is in both); for a change smaller
than one step (its first costs 1.2-2% of a round), ``k`` on every n-th hop and 0 on the others.
``k`` per model is calibrated from two sessions (``CALIBRATION``), so that the additions add
the stated percentage of that model's unchanged count as nearly as whole steps can; the
percentage achieved is printed, measured from the sessions' counts.

Each session counts the test in ``--layouts`` layouts (the plugin's ``--concurrency-layouts``: the
interpreter's objects landing elsewhere) and its figure is the median over them, as the gate's.
Then it prints the spread of the unchanged sessions' figures, and judges the sessions with
the gate's own rule for counts (``stats.decide_layouts``): A/A, every unchanged session against
every other one (ordered pairs; any verdict but unchanged is a false alarm), and every changed
session against every unchanged one (anything but regressed is a miss).

    python3 evidence/plain_count_repeat.py --sessions 4 --inject 0
    python3 evidence/plain_count_repeat.py --sessions 10 --inject 2:5 --parallel 5
    python3 evidence/plain_count_repeat.py --sessions 10 --inject 0 --layout 0    # one checkout's sessions
    python3 evidence/plain_count_repeat.py --sessions 10 --inject 2:5,1:5 --parallel 2 --root DIR   # docs' three layouts
    python3 evidence/plain_count_repeat.py --sessions 8 --inject 2:6 --layouts 1  # one layout a session, as before
    python3 evidence/plain_count_repeat.py --smoke    # one unchanged session on asyncio, one layout
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

from pytest_concurrency.gate import stats

N_TASKS, LAPS = 20, 100
HOPS = N_TASKS * LAPS  # per round: every lap passes through every task's channel once
EXTRA_ENV = "PLAIN_EXTRA"  # "model:k,..." or "model:k/every,...": extra()'s steps, on every hop or every n-th
#: Steps per hop of the two calibration sessions. ``sum``'s first step costs ~400 instructions,
#: each further one ~74: calibrated from one session at 50 steps as if every step cost the same,
#: +2% came out +2.8 to +3.2%. A further step is 0.2-0.35% of these models' rounds (a step of a
#: Python loop: ~230 instructions), the first one 1.2-2%: the smallest change this test makes.
CALIBRATION = {"first-step": 1, "calibration": 50}
#: --smoke: the smallest run that still counts a real session under valgrind (one: ~1 minute)
SMOKE = {"sessions": 1, "inject": "0", "backends": "asyncio", "layouts": 1}

TEST = textwrap.dedent(f'''
    import os

    STEPS = dict(part.split(":") for part in os.environ.get("{EXTRA_ENV}", "").split(",") if part)


    def extra(k):
        """The change under test: k additions."""
        return sum(range(k))


    def ring(backend, n={N_TASKS}, m={LAPS}):
        """A message around a ring of n tasks, m times (the user's own code)."""
        chans = [backend.channel(1) for _ in range(n)]
        k, _, every = STEPS.get(backend.name, "0").partition("/")
        k, every = int(k), int(every or 1)

        def node(i):
            for j in range(m):
                extra(k if j % every == 0 else 0)
                chans[(i + 1) % n].put(chans[i].get() + 1)

        def anode(i):
            async def run():
                for j in range(m):
                    extra(k if j % every == 0 else 0)
                    await chans[(i + 1) % n].put(await chans[i].get() + 1)
            return run()

        if backend.family == "async":
            async def main():
                tasks = [backend.spawn(anode, i) for i in range(1, n)]
                total = 0
                for j in range(m):
                    extra(k if j % every == 0 else 0)
                    await chans[1].put(total)
                    total = await chans[0].get()
                for t in tasks:
                    await t.join()
                return total
        else:
            def main():
                tasks = [backend.spawn(node, i) for i in range(1, n)]
                total = 0
                for j in range(m):
                    extra(k if j % every == 0 else 0)
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


def session(root: str, label: str, layout: int, backends: str, steps: dict, layouts: int) -> dict:
    """One counted session; ``layout`` (0-9) picks its cwd depth and environment size. A session
    whose results are already in ``root`` (a run interrupted and resumed) is not run again."""
    work = os.path.join(root, label, *[f"d{layout}" * (layout + 1)] * (layout + 1))
    out = os.path.join(work, "run.json")
    started = time.monotonic()
    if not os.path.exists(out):
        os.makedirs(work, exist_ok=True)
        with open(os.path.join(work, "test_plain.py"), "w") as fh:
            fh.write(TEST)
        env = {
            **os.environ,
            "PAD": "x" * (97 * layout),
            EXTRA_ENV: ",".join(f"{m}:{k}" for m, k in steps.items()),
        }
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "test_plain.py",
                "-q",
                "-p",
                "no:cacheprovider",
                "--benchmark-only",
                "--concurrency-measure=instructions",
                f"--concurrency-backends={backends}",
                f"--benchmark-json={out}",
                f"--concurrency-layouts={layouts}",
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if run.returncode != 0:
            sys.exit(
                f"session {label} failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
            )
    with open(out) as fh:
        benchmarks = json.load(fh)["benchmarks"]
    rounds = {
        b["extra_info"]["backend"]: [b["stats"]["data"], *b["extra_info"].get("layouts", [])]
        for b in benchmarks
    }
    warmups = {b["extra_info"]["backend"]: b["extra_info"].get("warmup_rounds") for b in benchmarks}
    print(
        f"session {label} ({time.monotonic() - started:.0f} s, cwd depth {layout + 1}, +{97 * layout} B env):",
        "; ".join(
            f"{m} {center(r):,.0f} (layouts' medians {', '.join(f'{statistics.median(x):,.0f}' for x in r)}; "
            f"{warmups[m]} warm-up)"
            for m, r in rounds.items()
        ),
        flush=True,
    )
    return rounds


def center(layouts: list) -> float:
    """The median of the layouts' medians: the session's figure, as the gate's (``stats.center``)."""
    return statistics.median([statistics.median(rounds) for rounds in layouts])


def sessions(
    root: str, kinds: dict, backends: str, parallel: int, layout: int | None, layouts: int
) -> dict:
    """``{label: (count, steps)}`` -> ``{label: [rounds by model, per session]}``, all in one pool;
    each session in layout ``layout``, or in its own (its index)."""
    jobs = [(label, i, steps) for label, (count, steps) in kinds.items() for i in range(count)]
    with ThreadPoolExecutor(parallel) as pool:
        done = list(
            pool.map(
                lambda job: session(
                    root,
                    f"{job[0]}{job[1]}",
                    job[1] % 10 if layout is None else layout,
                    backends,
                    job[2],
                    layouts,
                ),
                jobs,
            )
        )
    return {label: [r for (lab, _, _), r in zip(jobs, done) if lab == label] for label in kinds}


def medians(results: list[dict], model: str) -> list[float]:
    return [center(r[model]) for r in results]


def judge(same: list[dict], changed: dict, thresholds: list) -> None:
    aa_pairs = [(a, b) for a in range(len(same)) for b in range(len(same)) if a != b]
    for threshold in thresholds:
        print(f"the gate's rule for counts at threshold {threshold * 100:g}%:")
        for model in same[0]:
            aa = [
                stats.decide_layouts(same[a][model], same[b][model], threshold).status
                for a, b in aa_pairs
            ]
            line = f"  {model}: A/A {sum(s != 'unchanged' for s in aa)}/{len(aa)} false alarms"
            for pct, results in changed.items():
                hit = [
                    stats.decide_layouts(base[model], cur[model], threshold).status
                    for base in same
                    for cur in results
                ]
                others = {s: hit.count(s) for s in sorted(set(hit) - {"regressed"})}
                line += f"; +{pct:g}% caught {hit.count('regressed')}/{len(hit)}" + (
                    f" (others: {others})" if others else ""
                )
            print(line)


def per_hop(target: float, fixed: float, step: float) -> str:
    """``k`` or ``k/every`` (``EXTRA_ENV``) adding ``target`` instructions per hop on average as nearly as
    whole steps can: on every n-th hop when one step (its first costs ``fixed`` more) is already more."""
    every = max(1, math.ceil((fixed + step) / target))
    k = max(1, round((target * every - fixed) / step))
    return f"{k}/{every}" if every > 1 else str(k)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=4, help="sessions per kind of code (default 4)")
    ap.add_argument("--backends", default="gevent,asyncio,threading")
    ap.add_argument(
        "--inject",
        default="2",
        help="percentages of real extra work, comma-separated, each with "
        "its number of sessions if not --sessions (2:10,1:5); 0 for none",
    )
    ap.add_argument(
        "--threshold",
        default="0.02,0.01,0.005",
        help="thresholds to judge at, fractions (default 0.02,0.01,0.005)",
    )
    ap.add_argument("--parallel", type=int, default=1, help="sessions at a time (default 1)")
    ap.add_argument(
        "--layout",
        type=int,
        choices=range(10),
        help="every session in this layout (cwd depth and "
        "environment size), as sessions of one checkout; default: each session in another",
    )
    ap.add_argument(
        "--layouts",
        type=int,
        default=3,
        help="layouts each session counts in (default 3, the plugin's)",
    )
    ap.add_argument(
        "--root",
        help="keep every session's files here, and resume: sessions found there are not run again",
    )
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args()[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args()
    models = args.backends.split(",")
    percents = {
        float(p): int(n or args.sessions)
        for p, _, n in (x.partition(":") for x in args.inject.split(","))
        if float(p)
    }
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plain-count-") as temporary:
        root = args.root or temporary
        first = sessions(
            root,
            {
                "same": (args.sessions, {m: 0 for m in models}),
                **{
                    label: (1 if percents else 0, {m: k for m in models})
                    for label, k in CALIBRATION.items()
                },
            },
            args.backends,
            args.parallel,
            args.layout,
            args.layouts,
        )
        same = first["same"]
        base = {m: statistics.median(medians(same, m)) for m in models}
        kinds = {}
        if percents:
            (low, high), (one, many) = (
                CALIBRATION.values(),
                (first[label][0] for label in CALIBRATION),
            )
            added = {m: [(center(r[m]) - base[m]) / HOPS for r in (one, many)] for m in models}
            per_step = {m: (added[m][1] - added[m][0]) / (high - low) for m in models}
            fixed = {m: added[m][0] - low * per_step[m] for m in models}
            print(
                "extra(k) per hop:",
                ", ".join(f"{m} {fixed[m]:.0f} + {per_step[m]:.1f} k instructions" for m in models),
            )
        for pct, count in percents.items():
            steps = {m: per_hop(pct / 100 * base[m] / HOPS, fixed[m], per_step[m]) for m in models}
            print(f"+{pct:g}%: steps per hop {steps}", flush=True)
            kinds[f"plus{pct:g}-"] = (count, steps)
        changed = dict(
            zip(
                percents,
                sessions(
                    root, kinds, args.backends, args.parallel, args.layout, args.layouts
                ).values(),
            )
        )
    print(f"all sessions: {time.monotonic() - started:.0f} s, {args.parallel} at a time")
    print("spread of the unchanged sessions' medians, (max - min) / min:")
    for m in models:
        values = medians(same, m)
        print(
            f"  {m}: {(max(values) - min(values)) / min(values):.3%}  ({min(values):,.0f} .. {max(values):,.0f})"
        )
    for pct, results in changed.items():
        print(
            f"the change achieved, median of the changed sessions' medians over the unchanged ones' (intended +{pct:g}%):"
        )
        for m in models:
            values = medians(results, m)
            print(
                f"  {m}: {statistics.median(values) / base[m] - 1:+.2%}  "
                f"(session by session {min(values) / base[m] - 1:+.2%} .. {max(values) / base[m] - 1:+.2%})"
            )
    judge(same, changed, [float(t) for t in args.threshold.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
