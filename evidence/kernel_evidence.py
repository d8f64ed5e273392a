#!/usr/bin/env python3
"""Measure the kernel gate: false alarms and detection, on the ring, from real rounds.

Each trial measures the ring (10 tasks x 50 messages, bounded channels) the way an isolated
worker does (``measure.driver.run_rounds``, five rounds, time mode, kernel figures per round),
once as it is and once with a change injected into every hop, and judges the pair with the
kernel gate's own rule (``gate.kernel``). A/A trials measure it twice as it is. Every trial
measures both sides anew, after one measurement per model that is discarded (a process's
first threads are scheduled otherwise: their switches read ~40% fewer).

Injections (one at a time, per hop, in the channel's ``put``):
* ``yield``: ``os.sched_yield()``;
* ``syscall``: one cheap extra syscall (``os.getppid()``);
* ``lock``: a lock shared by 4 extra threads that take it in a loop while the round runs
  (threading only: the hops take it too);
* ``poll``: a blocking ``get`` replaced by polling ``get(timeout=0.0005)`` (threading only);
  ``poll:SECONDS`` with another timeout (one shorter than a hop's wait expires: ``poll:0.0001``);
* ``readv``: the same syscall doing more kernel work: ``os.readv`` of /dev/zero per hop, 4 KiB
  on the base side and 256 KiB on the changed one (syscalls and switches stay the same; only
  system CPU time can tell).

    python3 evidence/kernel_evidence.py --trials 20 --aa 50 --backends threading,asyncio,gevent
    python3 evidence/kernel_evidence.py --spread 40 --backends threading    # A/A change per figure
    python3 evidence/kernel_evidence.py --aa 0 --changes readv              # the readv case alone
    python3 evidence/kernel_evidence.py --smoke     # one A/A and one yield trial on threading
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from _documents import document_from_records

from pytest_concurrency import backends, measure, workloads
from pytest_concurrency.gate import kernel as kernel_gate
from pytest_concurrency.measure import driver
from pytest_concurrency.measure.plan import CasePlan
from pytest_concurrency.measure.records import Record
from pytest_concurrency.store.history import Baseline

#: --smoke: the smallest run that still measures and judges one A/A and one changed trial
SMOKE = {"trials": 1, "aa": 1, "backends": "threading", "changes": "yield"}

PARAMS = {"n": 10, "m": 50, "capacity": 10}
META = {
    "schema_version": 1,
    "python": {"version": "x", "implementation": "CPython", "minor": "x"},
    "backends": {},
    "libraries": {},
    "cpu_count": os.cpu_count(),
    "cpu_model": "x",
    "calibration": None,
}


_ZERO = os.open("/dev/zero", os.O_RDONLY)
#: what each change is measured against: the model as it is, or the same change with less work
BASE = {"readv": "readv:4096"}
CHANGED = {"readv": "readv:262144"}
#: system CPU time is read in scheduler ticks (getrusage: 4 ms here): the readv rounds are 10x
#: longer, so that a round's system time is many ticks
LONGER = {"n": 10, "m": 500, "capacity": 10}


class Injected:
    """A backend whose channels do one more thing per ``put`` (and ``get`` for ``poll``)."""

    def __init__(self, inner, how: str, lock=None):
        self._inner, self._how, self._lock = inner, how, lock

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def channel(self, capacity=None):
        return _Channel(
            self._inner.channel(capacity), self._how, self._lock, self._inner.family == "async"
        )


class _Channel:
    """A model's channel with the injected work; a wrapper, as C channels (gevent's) take no new attributes."""

    def __init__(self, inner, how, lock, is_async):
        self._inner, self._how, self._lock = inner, how, lock
        if how.startswith("readv:"):
            self._buffers = [bytearray(int(how.split(":")[1]))]
        if is_async:
            self.put, self.get = self._aput, inner.get
        else:
            self.put, self.get = self._sput, self._poll_get if how.startswith("poll") else inner.get
        self._timeout = float(how.split(":")[1]) if how.startswith("poll:") else 0.0005

    def _extra(self):
        if self._how == "yield":
            os.sched_yield()
        elif self._how == "syscall":
            os.getppid()
        elif self._how == "lock":
            with self._lock:
                pass
        elif self._how.startswith("readv:"):
            os.readv(_ZERO, self._buffers)

    async def _aput(self, item):
        self._extra()
        return await self._inner.put(item)

    def _sput(self, item):
        self._extra()
        return self._inner.put(item)

    def _poll_get(self):
        import queue

        while True:
            try:
                return self._inner.get(timeout=self._timeout)
            except queue.Empty:
                continue


def measure_once(spec: str, how: str | None) -> Record:
    params = LONGER if how and how.startswith("readv:") else PARAMS
    backend = backends.load(spec)
    lock, stop, hogs = threading.Lock(), threading.Event(), []
    if how == "lock":

        def contend():
            while not stop.is_set():
                with lock:
                    pass

        hogs = [threading.Thread(target=contend, daemon=True) for _ in range(4)]
        for t in hogs:
            t.start()
    try:
        subject = Injected(backend, how, lock) if how else backend
        plan = CasePlan(spec, workloads.get("ring"), params, 5, 1, measure.instrument("time"))
        samples, extra = driver.run_rounds(subject, plan, with_memory=False)
    finally:
        stop.set()
        for t in hogs:
            t.join()
    extra.update(task_kind=backend.task_kind)
    return Record("ring", dict(params), spec, samples, ops=extra["ops"], unit="hop", extra=extra)


def verdicts(base: Record, now: Record) -> dict:
    doc = Baseline.of(document_from_records([base], META))
    return {v.figure: v for v in kernel_gate.judge(doc, [now]).verdicts}


def spread(specs: list, pairs: int) -> int:
    for spec in specs:
        measure_once(spec, None)  # discarded: see above
        moved: dict = {}
        for _ in range(pairs):
            a, b = measure_once(spec, None), measure_once(spec, None)
            for key, before in a.extra.items():
                after = b.extra.get(key)
                if key.endswith("_per_op") and key != "ns_per_op" and before and after:
                    moved.setdefault(key, []).append(abs(after / before - 1))
        for key, changes in sorted(moved.items()):
            changes.sort()
            print(
                f"{spec} {key}: A/A |change| median {changes[len(changes) // 2]:.1%}, max {changes[-1]:.1%} "
                f"({len(changes)} pairs)"
            )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="injected trials per change and model")
    ap.add_argument("--aa", type=int, default=50, help="A/A trials per model")
    ap.add_argument("--backends", default="threading,asyncio,gevent")
    ap.add_argument(
        "--changes",
        default="yield,syscall,lock,poll,readv",
        help="injections to measure (lock and poll on threading only)",
    )
    ap.add_argument(
        "--spread",
        type=int,
        default=0,
        help="instead: N A/A pairs per model, and how far each figure per op moved (median, max)",
    )
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args()[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args()
    if args.spread:
        return spread(args.backends.split(","), args.spread)
    started = time.monotonic()
    for spec in args.backends.split(","):
        changes = [
            c
            for c in args.changes.split(",")
            if c.split(":")[0] not in ("lock", "poll") or spec == "threading"
        ]
        first = measure_once(spec, None)  # discarded: see above
        figures = {
            k: round(v, 3)
            for k, v in first.extra.items()
            if k.endswith("_per_op") and k != "ns_per_op"
        }
        print(
            f"{spec}: ring {PARAMS}, per hop: {figures} ({first.extra['kernel_source']['syscalls']})",
            flush=True,
        )
        alarms = 0
        for _ in range(args.aa):
            got = verdicts(measure_once(spec, None), measure_once(spec, None))
            alarms += any(v.status in ("regressed", "improved") for v in got.values())
        if args.aa:
            print(
                f"  A/A: {alarms}/{args.aa} trials with a kernel verdict other than unchanged",
                flush=True,
            )
        for how in changes:
            caught, which = 0, {}
            for _ in range(args.trials):
                got = verdicts(
                    measure_once(spec, BASE.get(how)), measure_once(spec, CHANGED.get(how, how))
                )
                failed = [f for f, v in got.items() if v.status == "regressed"]
                caught += bool(failed)
                for f in failed:
                    which[f] = which.get(f, 0) + 1
                last = got
            shown = {
                f: f"{v.change:+.0%}" if v.change is not None else "from 0" for f, v in last.items()
            }
            print(
                f"  +{CHANGED.get(how, how)} per hop (against {BASE.get(how, 'the model as it is')}): caught {caught}/{args.trials} (by {which}); last trial: {shown}",
                flush=True,
            )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
