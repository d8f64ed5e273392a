#!/usr/bin/env python3
"""Measure the instruction gate itself: false alarms and detection, from real counted sessions.

Every session is a real ``pytest benchmarks --benchmark-only --concurrency-measure=instructions``
run in a process of its own, saved as a one-session baseline. Then, offline, with the gate's
own ``compare``:

* A/A: every session judged against every other one (ordered pairs: n sessions give
  n*(n-1) comparisons). Any regressed or improved verdict is a false alarm.
* detection: sessions with a slowdown injected into ONE backend, judged against every A/A
  session. The injection is ``zlib.crc32`` over a buffer once per ``backend.run`` (every
  round enters it once), sized to ``--inject`` percent of the target's ring[capacity=10]
  round, so the function that grew has a name of its own (``crc32_z``, libz). A comparison
  catches it when that reference benchmark regresses, no other backend does, and the
  verdict names crc32. (A wrapper around each channel ``put`` would itself cost a Python
  call, 2-6% of a hop: too coarse for a 1% slowdown.) Every session, A/A included, runs the
  same ``sitecustomize`` with the same wrapper and an environment of the same size; A/A
  sessions hash an empty buffer. Only the work differs: an injection that changed what the
  processes import moved other models' counts by more than itself.
* ``--hog``: the A/A sessions with odd numbers run with a busy loop on the other core.
* ``--layouts``: each session (A/A and injected) first allocates a different number of
  objects in every process, as an unrelated change to the code would: it moves the
  addresses of what is allocated later, and with them the hits and misses of CPython's
  type attribute cache. Without it, A/A sessions are the same code run again.

    python3 evidence/count_evidence.py --sessions 3 --scale smoke           # quick check
    python3 evidence/count_evidence.py --sessions 4 --scale smoke --inject 1,2 --threshold 0.01   # the README's A/A
    python3 evidence/count_evidence.py --sessions 3 --layouts --backends greenlet,gevent,eventlet \
        --scale smoke --inject 1,2 --threshold 0.02                                          # ... under other layouts
    python3 evidence/count_evidence.py --smoke     # 2 A/A sessions and one +2%, greenlet's rings only
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate.verdicts import IMPROVED, INCONCLUSIVE, REGRESSED
from pytest_concurrency.measure.records import Document
from pytest_concurrency.store.history import Baseline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: its benchmarks/
#: --smoke: the smallest run that still counts real sessions under valgrind and judges them
SMOKE = {
    "sessions": 2,
    "scale": "smoke",
    "backends": "greenlet",
    "target": "greenlet",
    "inject": "2",
    "select": "ring",
}

CRC32_INSTRUCTIONS_PER_BYTE = 3.85  # zlib.crc32 of 64 KiB and 1 MiB under callgrind, measured here
REFERENCE = ("ring", "capacity=10")  # the benchmark the injection is sized against

SITECUSTOMIZE = """
import os
_layout = [object() for _ in range(int(os.environ.get("COUNT_LAYOUT_PAD", "0")))]
_target = os.environ.get("COUNT_INJECT_BACKEND")
if _target:
    import zlib
    import pytest_concurrency.backends as _backends

    _burden = bytes(int(os.environ["COUNT_INJECT_BYTES"]))  # b"" in A/A sessions
    _load = _backends.load

    def load(spec):
        backend = _load(spec)
        if backend.name == _target:
            enter = backend.run

            def run(main, *args):
                zlib.crc32(_burden)
                return enter(main, *args)

            backend.run = run
        return backend

    _backends.load = load
"""


def run_session(path: str, args, env_extra: dict, hog: bool) -> float:
    if args.reuse and os.path.exists(path):
        return 0.0
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        os.path.join(ROOT, "benchmarks"),
        "--benchmark-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "--concurrency-measure=instructions",
        f"--concurrency-backends={args.backends}",
        f"--concurrency-scale={args.scale}",
        f"--concurrency-save-baseline={path}",
        "--concurrency-baseline-sessions=1",
        *(["-k", args.select] if args.select else []),
    ]
    env = {**os.environ, **env_extra}
    started = time.monotonic()
    with busy_loop(hog):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=args.workdir)
    if done.returncode != 0:
        sys.exit(
            f"session failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
        )
    return time.monotonic() - started


@contextlib.contextmanager
def busy_loop(on: bool):
    if not on:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def _fixed_width(n: int) -> str:
    return f"{n:012d}"  # the environment's size must not differ between A/A and injected sessions


def judge(base_doc: dict, doc: dict, threshold: float | None):
    settings = gate.GateSettings(threshold=threshold)
    return gate.compare(
        Baseline.of(base_doc), Document.of(doc).records, doc["pytest_concurrency"], settings
    )


def _reference_count(doc: dict, target: str) -> float:
    for rec in Document.of(doc).records:
        if rec.backend == target and rec.workload == REFERENCE[0] and REFERENCE[1] in rec.key[1]:
            return rec.median
    sys.exit(
        f"no {REFERENCE[0]}[{REFERENCE[1]}] on {target} in the A/A sessions to size the injection by"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sessions", type=int, default=3, help="A/A sessions (comparisons: n*(n-1))")
    ap.add_argument("--scale", default="default")
    ap.add_argument("--backends", default="greenlet,gevent,eventlet,asyncio,uvloop")
    ap.add_argument("--target", default="gevent", help="the backend whose channels get slower")
    ap.add_argument(
        "--inject",
        default="1.3,2",
        help="percent of the reference round, one injected session each",
    )
    ap.add_argument(
        "--threshold", type=float, default=None, help="fraction; default: the gate's (2%%)"
    )
    ap.add_argument("--hog", action="store_true", help="odd A/A sessions run beside a busy loop")
    ap.add_argument(
        "--layouts", action="store_true", help="every session with another memory layout"
    )
    ap.add_argument("--keep", help="directory to keep the session files in")
    ap.add_argument(
        "--reuse", action="store_true", help="with --keep: judge the session files already there"
    )
    ap.add_argument(
        "-k",
        dest="select",
        help="only the benchmarks pytest's -k selects (the reference ring[capacity=10] among them)",
    )
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args(argv)[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args(argv)

    args.workdir = args.keep or tempfile.mkdtemp(prefix="count-evidence-")
    os.makedirs(args.workdir, exist_ok=True)
    site = os.path.join(args.workdir, "site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
        fh.write(textwrap.dedent(SITECUSTOMIZE))
    # compiled now, or the first session alone compiles it, and starts with another memory layout
    compileall.compile_dir(site, quiet=2)
    path_env = {
        "PYTHONPATH": os.pathsep.join(p for p in [site, os.environ.get("PYTHONPATH")] if p),
        "COUNT_INJECT_BACKEND": args.target,
        "COUNT_INJECT_BYTES": _fixed_width(0),
        "COUNT_LAYOUT_PAD": _fixed_width(0),
    }
    layout = (
        (lambda i: {"COUNT_LAYOUT_PAD": _fixed_width(97 * i)}) if args.layouts else (lambda i: {})
    )

    aa = []
    for i in range(args.sessions):
        path = os.path.join(args.workdir, f"aa{i}.json")
        hog = args.hog and i % 2 == 1
        wall = run_session(path, args, {**path_env, **layout(i)}, hog)
        aa.append(path)
        print(
            f"A/A session {i + 1}/{args.sessions}{' (hog)' if hog else ''}: {wall:.0f} s",
            file=sys.stderr,
        )
    reference = _reference_count(json.load(open(aa[0])), args.target)
    slowed = []
    for n, pct in enumerate([float(x) for x in args.inject.split(",") if x], start=args.sessions):
        size = int(pct / 100 * reference / CRC32_INSTRUCTIONS_PER_BYTE)
        path = os.path.join(args.workdir, f"slow{pct:g}.json")
        env = {**path_env, **layout(n), "COUNT_INJECT_BYTES": _fixed_width(size)}
        wall = run_session(path, args, env, False)
        slowed.append((f"+{pct:g}% of the reference ({size} bytes of crc32 per round)", path))
        print(
            f"injected session (+{pct:g}%: {size} bytes per round on {args.target}): {wall:.0f} s",
            file=sys.stderr,
        )

    docs = {p: json.load(open(p)) for p in aa + [p for _, p in slowed]}
    alarms, inconclusive, compared = [], {}, 0
    for a, b in itertools.permutations(aa, 2):
        result = judge(docs[a], docs[b], args.threshold)
        compared += 1
        alarms += [(a, b, v) for v in result.verdicts if v.status in (REGRESSED, IMPROVED)]
        for v in result.by_status(INCONCLUSIVE):
            inconclusive[v.key] = inconclusive.get(v.key, 0) + 1
    print(f"\nA/A: {compared} comparisons, {len(alarms)} false alarms")
    for a, b, v in alarms:
        print(
            f"  {os.path.basename(b)} vs {os.path.basename(a)}: {v.status} {v.key} {v.change:+.2%} {v.note}"
        )
    for key, n in sorted(inconclusive.items()):
        print(f"  inconclusive {n}x: {key}")

    for what, path in slowed:
        caught, changes, lines = 0, {}, []
        for a in aa:
            result = judge(docs[a], docs[path], args.threshold)
            regressed = result.by_status(REGRESSED)
            target = [v for v in result.verdicts if v.key[2] == args.target]
            for v in target:
                changes.setdefault(v.key, []).append((v.change, v.status))
            only_target = {v.key[2] for v in regressed} == {args.target}
            reference = any(
                v.key[0] == REFERENCE[0] and REFERENCE[1] in v.key[1] for v in regressed
            )
            named = all("crc32" in v.note for v in regressed)
            caught += only_target and reference and named
            if not (only_target and reference and named):
                lines.append(
                    f"  missed vs {os.path.basename(a)}: "
                    + "; ".join(
                        f"{v.key} {v.status} {v.change:+.2%}"
                        for v in result.verdicts
                        if v.status != "unchanged"
                    )
                )
        print(f"\n{what} on {args.target}: caught {caught} of {len(aa)}")
        for key, values in sorted(changes.items()):
            flagged = sum(status == REGRESSED for _, status in values)
            print(
                f"  {key}: {min(c for c, _ in values):+.2%} .. {max(c for c, _ in values):+.2%}, "
                f"regressed in {flagged} of {len(values)}"
            )
        print("\n".join(lines))
    print(f"\nsession files in {args.workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
