#!/usr/bin/env python3
"""The kernel gate on a user's plain test, from real sessions of the plugin.

A ring written in a test file as a user would (``benchmark.pedantic`` + ``concurrency_backend``,
10 tasks x 50 messages over bounded channels, 500 hops a round), measured by the plugin in
separate pytest sessions (time mode; the kernel figures are read around each ``run`` call),
each session saving a baseline. Sessions are then judged against each other with the kernel
gate's own rule (``gate.compare``, its kernel part), as ``--concurrency-baseline`` would judge them:

* A/A: ``--aa`` pairs of sessions of the unchanged test; a regressed or improved figure is a false
  alarm (inconclusive, which the gate gives when other processes' load explains a move, is counted apart);
* each change, ``--trials`` sessions, each judged against an unchanged session of its own:
  ``yield`` (``os.sched_yield()`` per hop), ``syscall`` (one ``os.getppid()`` per hop),
  ``lock`` (a lock every hop takes, contended by 4 more threads; threading only) and
  ``poll`` (``get(timeout=0.5 ms)`` in a loop instead of a blocking get; threading only;
  ``poll:SECONDS`` another timeout: one shorter than a hop's wait expires, and polls).

``--against`` judges each change the other way: the change is in a small library the test imports,
and each trial is one session of ``--concurrency-against`` (the unchanged library installed apart
as the base side, rounds paired in turns, gate/paired.py), its verdicts read from the markdown
report; A/A sessions have the same library on both sides. There the lock is taken in the loop of
``--table`` (4 threads, the shared lock every iteration), with its own A/A (``--aa-loop``).

``--table`` instead reproduces, from the plugin's own figures, the measurement that motivated the
kernel gate: 4 threads x 4,000 iterations of a small loop, as it is, with an ``os.sched_yield()``
per iteration and with one shared ``threading.Lock`` taken per iteration; wall time, syscalls and
context switches per round from a time-mode session, instructions from a counted one.

    python3 evidence/kernel_plain_evidence.py --aa 50 --trials 20 --keep /tmp/kplain
    python3 evidence/kernel_plain_evidence.py --against --aa 20 --trials 10 --backends threading --keep /tmp/ka
    python3 evidence/kernel_plain_evidence.py --against --aa 0 --aa-loop 20 --trials 20 --changes lock --keep /tmp/kl
    python3 evidence/kernel_plain_evidence.py --rejudge /tmp/ka
    python3 evidence/kernel_plain_evidence.py --table --sessions 3
    python3 evidence/kernel_plain_evidence.py --aa 10 --trials 3 --changes syscall,lock --busy 2 --keep /tmp/kbusy
    python3 evidence/kernel_plain_evidence.py --smoke    # one A/A pair and one yield trial, threading
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from against_evidence import busy_loops  # beside this script

from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate import kernel as kernel_gate
from pytest_concurrency.gate import paired as paired_gate
from pytest_concurrency.measure.records import Document
from pytest_concurrency.store.history import Baseline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: tests/data/
INJECT_ENV = "KERNEL_INJECT"
KEEP_OPTION = "--concurrency-against-keep"  # the plugin copies each pair's rounds into its DIR
#: --smoke: the smallest run that still runs real sessions: a warm-up, one A/A pair, one yield trial
SMOKE = {"aa": 1, "trials": 1, "backends": "threading", "changes": "yield"}

RING = textwrap.dedent('''
    import os
    import queue
    import threading

    HOW = os.environ.get("KERNEL_INJECT", "")
    LOCK = threading.Lock()


    def extra():
        if HOW == "yield":
            os.sched_yield()
        elif HOW == "syscall":
            os.getppid()
        elif HOW == "lock":
            with LOCK:
                pass


    def ring(backend, n=10, m=50):
        """A message around a ring of n tasks, m times (the user's own code)."""
        chans = [backend.channel(10) for _ in range(n)]

        def get(ch):
            if not HOW.startswith("poll"):
                return ch.get()
            timeout = float(HOW.partition(":")[2] or 0.0005)
            while True:
                try:
                    return ch.get(timeout=timeout)
                except queue.Empty:
                    continue

        def node(i):
            for _ in range(m):
                item = get(chans[i]) + 1
                extra()
                chans[(i + 1) % n].put(item)

        async def anode(i):
            for _ in range(m):
                item = await chans[i].get() + 1
                extra()
                await chans[(i + 1) % n].put(item)

        if backend.family == "async":
            async def main():
                tasks = [backend.spawn(anode, i) for i in range(1, n)]
                total = 0
                for _ in range(m):
                    extra()
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
                    extra()
                    chans[1].put(total)
                    total = get(chans[0])
                for t in tasks:
                    t.join()
                return total
        return main


    def contended(run):
        """Four more threads take LOCK in a loop while a round runs (the "lock" change)."""
        def round_():
            stop = threading.Event()

            def hog():
                while not stop.is_set():
                    with LOCK:
                        pass
            hogs = [threading.Thread(target=hog) for _ in range(4)] if HOW == "lock" else []
            for t in hogs:
                t.start()
            try:
                return run()
            finally:
                stop.set()
                for t in hogs:
                    t.join()
        return round_


    def test_ring(benchmark, concurrency_backend):
        b = concurrency_backend
        total = benchmark.pedantic(contended(lambda: b.run(ring(b))), rounds=5, warmup_rounds=1)
        assert total == 50 * 9  # every message went round: 9 increments each
''')

#: The loop of the motivating measurement: four threads, each 4,000 iterations of a little work.
LOOP = textwrap.dedent("""
    import os
    import threading

    HOW = os.environ.get("KERNEL_INJECT", "")
    LOCK = threading.Lock()


    def worker(iterations=4000):
        total = 0
        for i in range(iterations):
            if HOW == "lock":  # the iteration's work under the lock: a GIL switch inside it makes the others wait
                with LOCK:
                    total += sum(range(100))
            else:
                total += sum(range(100))
            if HOW == "yield":
                os.sched_yield()
        return total


    def loop(backend):
        def main():
            tasks = [backend.spawn(worker) for _ in range(4)]
            for t in tasks:
                t.join()
        return main


    def test_loop(benchmark, concurrency_backend):
        b = concurrency_backend
        benchmark.pedantic(lambda: b.run(loop(b)), rounds=5, warmup_rounds=1)
""")


def session(
    test: str, how: str, backends: str, work: str, index: int, counted: bool = False
) -> dict:
    """One pytest session of ``test`` with change ``how``; the baseline document it saved (kept
    from an earlier run into the same ``--keep`` directory when there is one: the same arguments
    give the same sessions in the same order)."""
    directory = os.path.join(work, f"s{index}")
    saved = os.path.join(directory, "baseline.json")
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as fh:
            return json.load(fh)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "test_user.py"), "w") as fh:
        fh.write(test)
    env = {**os.environ, INJECT_ENV: how}
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        f"--concurrency-backends={backends}",
        f"--concurrency-save-baseline={saved}",
        "test_user.py",
    ]
    if counted:
        argv.append("--concurrency-measure=instructions")
    done = subprocess.run(
        argv, cwd=directory, env=env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(
            f"session {index} ({how or 'unchanged'}) exited {done.returncode}:\n{done.stdout[-3000:]}"
        )
    with open(saved, encoding="utf-8") as fh:
        return json.load(fh)


def model_of(key) -> str:
    return next((part for part in key if part in MODELS), str(key))


MODELS = ("threading", "asyncio", "gevent")


def injections(args, work: str) -> int:
    started, n = time.monotonic(), 0

    def run(how: str, backends: str) -> dict:
        nonlocal n
        n += 1
        return session(RING, how, backends, work, n)

    run("", args.backends)  # discarded: the machine's first session warms its caches
    changes = [c for c in args.changes.split(",") if c]
    alarms: dict = {}
    for i in range(args.aa):
        for model, by_figure in _by_model(run("", args.backends), run("", args.backends)).items():
            moved = [
                f"{f} {v.status}" + (f" {v.change:+.0%}" if v.change is not None else "")
                for f, v in by_figure.items()
                if v.status != "unchanged"
            ]
            alarms.setdefault(model, []).append(moved)
            if moved:
                print(f"A/A {model} pair {i + 1}: {'; '.join(moved)}", flush=True)
    for model, found in alarms.items():
        false = sum(any(" regressed" in m or " improved" in m for m in a) for a in found)
        unsure = sum(
            bool(a) and not any(" regressed" in m or " improved" in m for m in a) for a in found
        )
        print(
            f"| {model} | {false}/{len(found)} regressed or improved ({unsure} more inconclusive: the load) |",
            flush=True,
        )
    for how in changes:
        backends = "threading" if how.split(":")[0] in ("lock", "poll") else args.backends
        rows: dict = {}
        for _ in range(args.trials):
            for model, by_figure in _by_model(run("", backends), run(how, backends)).items():
                row = rows.setdefault(model, {"caught": 0, "trials": 0, "changes": {}})
                row["trials"] += 1
                row["caught"] += any(v.status == "regressed" for v in by_figure.values())
                for f, v in by_figure.items():
                    if v.change is not None:
                        row["changes"].setdefault(f, []).append(v.change)
        for model, row in rows.items():
            moved = ", ".join(
                f"{kernel_gate.find(f).what} {statistics.median(c):+.0%}"
                for f, c in sorted(
                    row["changes"].items(), key=lambda kv: -abs(statistics.median(kv[1]))
                )[:2]
            )
            print(
                f"| {model} | {how}: {row['caught']}/{row['trials']} regressed (median change: {moved}) |",
                flush=True,
            )
    print(f"({n} sessions, {time.monotonic() - started:.0f} s)")
    return 0


def _by_model(base: dict, now: dict) -> dict:
    """Per model, by figure: the kernel verdicts the plugin gives ``now`` against ``base`` (the
    whole gate, so that a busier machine is taken into account as in a real session)."""
    out: dict = {}
    judged = gate.compare(Baseline.of(base), Document.of(now).records, now["pytest_concurrency"])
    for v in judged.kernel.verdicts:
        out.setdefault(model_of(v.key), {})[v.figure] = v
    return out


def table(args, work: str) -> int:
    """The motivating table from the plugin's figures (median of ``--sessions`` sessions each)."""
    figures: dict = {}
    n = 0
    for _ in range(args.sessions):
        for how in ("", "yield", "lock"):
            n += 1
            rec = Document.of(session(LOOP, how, "threading", work, n)).records[0]
            got = figures.setdefault(
                how, {"wall": [], "syscalls": [], "csw": [], "instructions": []}
            )
            got["wall"].append(statistics.median(rec.samples))
            got["syscalls"].append(rec.extra["syscalls_per_op"])
            got["csw"].append(rec.extra["csw_per_op"])
    if args.counted:
        for how in ("", "yield", "lock"):
            n += 1
            rec = Document.of(session(LOOP, how, "threading", work, n, counted=True)).records[0]
            figures[how]["instructions"].append(rec.median)  # over its layouts
    base = {k: statistics.median(v) for k, v in figures[""].items() if v}
    print("| change | instructions | wall | syscalls | context switches |")
    print("|---|---|---|---|---|")
    for how, label in (
        ("", "none"),
        ("yield", "`os.sched_yield()` per iteration"),
        ("lock", "one shared `threading.Lock`"),
    ):
        got = {k: statistics.median(v) for k, v in figures[how].items() if v}
        if not how:
            cells = [
                f"{got['instructions'] / 1e6:,.1f}M" if "instructions" in got else "",
                f"{got['wall'] * 1e3:.1f} ms",
                f"{got['syscalls']:,.0f}",
                f"{got['csw']:,.0f}",
            ]
        else:
            cells = [
                f"{got[k] / base[k] - 1:+.1%}" if k in got and base.get(k) else ""
                for k in ("instructions", "wall", "syscalls")
            ]
            cells.append(
                f"x{got['csw'] / base['csw']:.1f}" if base["csw"] else f"{got['csw']:,.0f}"
            )
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(
        f"\n(medians of {args.sessions} time-mode sessions per row, 5 rounds each; per round: 4 threads x 4,000 iterations"
        + ("; instructions from one counted session per row" if args.counted else "")
        + ")"
    )
    return 0


#: The against mode's library: the change is in code the two sides import from different places.
MYLIB = '__version__ = "{version}"\nHOW = "{how}"\n'
PYPROJECT = open(
    os.path.join(ROOT, "tests", "data", "mylib.pyproject.toml"), encoding="utf-8"
).read()
ROW = re.compile(
    r"^\| test_(?:ring|loop) on (\w+) \| ([^|]+) \| ([^|]*) \|(?:[^|]*\|){4} \**(\w+)\** \|"
)


def against(args, work: str) -> int:
    """Each trial one ``--concurrency-against`` session; its verdicts, per model and figure. The lock
    is taken in the loop of the motivating table (4 threads, the shared lock every iteration), not
    in the ring: the ring's 4 contending threads hold the GIL, and 64 rounds a side of it take ~10
    minutes a session. Its A/A is ``--aa-loop`` sessions of that loop unchanged."""

    def paired(test: str) -> str:
        return test.replace(
            'HOW = os.environ.get("KERNEL_INJECT", "")', "from mylib import HOW"
        ).replace("rounds=5, warmup_rounds=1", "rounds=64, warmup_rounds=1")  # 16 quads a side

    started, n = time.monotonic(), 0
    changes = [c for c in args.changes.split(",") if c]
    aa_loop = args.aa if args.aa_loop is None else args.aa_loop
    scenarios = [
        ("", "ring", args.aa),
        *([("", "loop", aa_loop)] if "lock" in changes else []),
        *((how, "loop" if how == "lock" else "ring", args.trials) for how in changes),
    ]
    for how, shape, runs in scenarios:
        test = paired(LOOP if shape == "loop" else RING)
        label = (how or "A/A") + (" (the loop)" if shape == "loop" and not how else "")
        backends = "threading" if how.startswith("poll") or shape == "loop" else args.backends
        tally: dict = collections.defaultdict(collections.Counter)
        changes_seen: dict = collections.defaultdict(list)
        for i in range(runs):
            n += 1
            project = os.path.join(work, f"a{n}")
            for side, version, side_how in (("base", "1.0", ""), ("head", "1.1", how)):
                os.makedirs(os.path.join(project, side, "mylib"), exist_ok=True)
                with open(os.path.join(project, side, "mylib", "__init__.py"), "w") as fh:
                    fh.write(MYLIB.format(version=version, how=side_how))
                with open(os.path.join(project, side, "pyproject.toml"), "w") as fh:
                    fh.write(PYPROJECT.format(version=version))
            with open(os.path.join(project, "head", "test_user.py"), "w") as fh:
                fh.write(test)
            report = os.path.join(project, "head", "report.md")
            if not os.path.exists(report):
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pytest",
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        "--benchmark-only",
                        f"--concurrency-backends={backends}",
                        "--concurrency-against=../base",
                        f"--concurrency-report-md={report}",
                        f"{KEEP_OPTION}={os.path.join(project, 'kept')}",
                        "test_user.py",
                    ],
                    cwd=os.path.join(project, "head"),
                    capture_output=True,
                    text=True,
                    timeout=1800,
                )
                if done.returncode not in (0, 1) or not os.path.exists(report):
                    raise SystemExit(
                        f"session {n} ({how or 'A/A'}) exited {done.returncode}:\n{done.stdout[-3000:]}"
                    )
            verdicts: dict = {}
            with open(report, encoding="utf-8") as fh:
                for line in fh.read().partition("## Against the base side")[2].splitlines():
                    match = ROW.match(line)
                    if match:
                        model, figure, change, status = (g.strip() for g in match.groups())
                        verdicts.setdefault(model, {})[figure] = (change, status)
            moved = []
            for model, by_figure in verdicts.items():
                kernel = {f: v for f, v in by_figure.items() if f != "time"}
                caught = any(st == "regressed" for _, st in kernel.values())
                alarm = any(st in ("regressed", "improved") for _, st in kernel.values())
                tally[model]["caught" if (caught if how else alarm) else "not"] += 1
                for f, (change, _) in by_figure.items():
                    if change:
                        changes_seen[(model, f)].append(float(change.rstrip("%")))
                moved.append(
                    f"{model}: "
                    + ", ".join(
                        f"{f} {c} {st}"
                        for f, (c, st) in by_figure.items()
                        if st != "unchanged" or f == "time"
                    )
                )
            print(f"{label} {i + 1}/{runs}: " + "; ".join(moved), flush=True)
        for model, counts in sorted(tally.items()):
            total = sum(counts.values())
            ranges = ", ".join(
                f"{f} {min(c):+.1f}%..{max(c):+.1f}% (median {statistics.median(c):+.1f}%)"
                for (m, f), c in sorted(changes_seen.items())
                if m == model
            )
            what = "kernel regressed or improved (false alarms)" if not how else "kernel regressed"
            print(
                f"| {model} | {label}: {counts['caught']}/{total} {what} | {ranges} |", flush=True
            )
    print(f"({n} sessions, {time.monotonic() - started:.0f} s)")
    return 0


def rejudge(work: str) -> int:
    """The sessions an ``--against --keep DIR`` run kept, judged again by the plugin's rule as it is
    now (its pairs of sessions as they ran: which tests ran again was decided at the time)."""

    def read(pair: str, side: str) -> list:
        path = os.path.join(pair, f"side-{side}.json")
        return (
            Document.of(json.load(open(path, encoding="utf-8"))).records
            if os.path.exists(path)
            else []
        )

    tally: dict = collections.defaultdict(collections.Counter)
    for name in sorted(os.listdir(work), key=lambda n: int(n[1:]) if n[1:].isdigit() else 0):
        kept = os.path.join(work, name, "kept")
        if not name.startswith("a") or not os.path.isdir(kept):
            continue
        with open(os.path.join(work, name, "head", "mylib", "__init__.py"), encoding="utf-8") as fh:
            how = re.search(r'HOW = "([\w:.]*)"', fh.read()).group(1) or "A/A"
        with open(os.path.join(work, name, "head", "test_user.py"), encoding="utf-8") as fh:
            how += " (the loop)" if "def test_loop" in fh.read() and how == "A/A" else ""
        pairs = sorted(
            (os.path.join(kept, p) for p in os.listdir(kept)),
            key=lambda p: int(os.path.basename(p)),
        )
        result = paired_gate.judge(
            read(pairs[0], "A"),
            read(pairs[0], "B"),
            paired_gate.default_threshold,
            again=[(read(p, "A"), read(p, "B")) for p in pairs[1:]],
        )
        for v in result.verdicts:
            tally[(how, v.key[2], v.figure)][v.status] += 1
    for (how, model, figure), counts in sorted(tally.items()):
        print(f"{how} {model} {figure}: " + ", ".join(f"{n} {s}" for s, n in counts.most_common()))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aa", type=int, default=50, help="A/A pairs of sessions")
    ap.add_argument(
        "--trials",
        type=int,
        default=20,
        help="sessions per change (each against its own unchanged one)",
    )
    ap.add_argument("--backends", default="threading,asyncio,gevent")
    ap.add_argument("--changes", default="yield,syscall,lock,poll")
    ap.add_argument(
        "--aa-loop",
        type=int,
        help="with --against and the lock among the changes: A/A sessions of "
        "the lock's loop (default: --aa)",
    )
    ap.add_argument(
        "--against",
        action="store_true",
        help="instead: each trial one --concurrency-against session",
    )
    ap.add_argument(
        "--table",
        action="store_true",
        help="instead: the motivating table from the plugin's figures",
    )
    ap.add_argument(
        "--sessions", type=int, default=3, help="with --table: time-mode sessions per row"
    )
    ap.add_argument(
        "--counted", action="store_true", help="with --table: also count instructions (slow)"
    )
    ap.add_argument(
        "--keep",
        metavar="DIR",
        help="keep every session in DIR; a run with the same arguments "
        "into the same DIR reuses the sessions that finished",
    )
    ap.add_argument(
        "--rejudge",
        metavar="DIR",
        help="instead: judge the sessions an --against --keep DIR run kept "
        "again, by the plugin's rule as it is now",
    )
    ap.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N busy-loop processes beside every session (load: what a shared runner has)",
    )
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args()[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args()
    if args.rejudge:
        return rejudge(args.rejudge)
    with tempfile.TemporaryDirectory(prefix="kernel-plain-") as scratch, busy_loops(args.busy):
        work = args.keep or scratch
        os.makedirs(work, exist_ok=True)
        return (
            table(args, work)
            if args.table
            else against(args, work)
            if args.against
            else injections(args, work)
        )


if __name__ == "__main__":
    sys.exit(main())
