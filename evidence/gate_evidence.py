#!/usr/bin/env python3
"""Measure the regression gate itself: false alarms, detection, and pytest-benchmark's rule.

Every figure comes from real runs of a real workload on real backends on this machine:

* A/A: record a baseline, then measure unchanged code again and compare, ``--repeats``
  times, on a quiet machine and with a CPU hog on the other core (the baseline is always
  recorded without the hog, as on a CI main branch).
* detection: the same with a 10% and a 5% slowdown injected into ONE backend's channel
  path (``SlowBackend`` below: its channels' put/get burn a calibrated extra time); the
  gate must name that backend and no other.
* the same sessions judged by pytest-benchmark's ``--benchmark-compare-fail=mean:5%``
  (its own ``PercentageRegressionCheck``), side by side.

Every session runs in a process of its own, as separate pytest sessions do (a process's
memory layout and hash seed are part of what differs between sessions). Each suspect is
re-measured once in that process, as the plugin does at session end ("gate"); the verdict
the first session alone would have given is reported beside it ("gate, 1 session").

A fresh baseline is recorded every ``--baseline-every`` repeats: one baseline's luck must
not decide the whole false-alarm figure. Each baseline holds ``--baseline-sessions``
sessions, saved one after the other to the same file as the plugin saves them (the default
is the plugin's; ``--baseline-sessions 1`` measures the single-session gate). Quick check:

    python3 evidence/gate_evidence.py --repeats 3
    python3 evidence/gate_evidence.py --smoke      # one repeat, asyncio and threading, no hog: seconds

The full run for the README's figures (about 35 minutes on 2 cores; run it with nothing
else running):

    python3 evidence/gate_evidence.py --repeats 100 --target asyncio --case '{"n": 20, "m": 1000, "capacity": 10}'

(``--case`` there is the ring's default size; the script's own default is 5x smaller.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _documents import document_from_records
from pytest_benchmark.stats import Stats
from pytest_benchmark.utils import PercentageRegressionCheck

from pytest_concurrency import backends, measure, workloads
from pytest_concurrency.gate import calibrate
from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate.verdicts import INCONCLUSIVE, REGRESSED
from pytest_concurrency.measure import driver
from pytest_concurrency.measure.plan import CasePlan
from pytest_concurrency.measure.records import Record
from pytest_concurrency.store import baseline, history

DEFAULT_BACKENDS = "threading,greenlet,gevent,asyncio,uvloop"
DEFAULT_CASE = {"n": 20, "m": 200, "capacity": 10}
SLOWDOWNS = {"slow 10%": 0.10, "slow 5%": 0.05}
TIME = measure.instrument("time")  # the instrument of the plugin's default mode (wall time)
#: --smoke: the smallest run that still records a baseline, calibrates the slowdown and judges
#: every condition once, each session in a process of its own
SMOKE = {
    "repeats": 1,
    "backends": "asyncio,threading",
    "target": "asyncio",
    "baseline_sessions": 1,
    "rounds": 5,
    "no_hog": True,
}


# -- the injected slowdown ------------------------------------------------------------


def _spin_ns_per_iteration() -> float:
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(200_000):
            pass
        best = min(best, (time.perf_counter_ns() - start) / 200_000)
    return best


class _SlowChannel:
    """Burns ``spin`` loop iterations in ``put``; ``get`` is the inner one (no extra cost)."""

    def __init__(self, inner, spin: int, counter: list):
        self._inner, self._spin, self._counter = inner, spin, counter
        self.get = inner.get

    def put(self, item):  # async backends: returns the inner coroutine, awaited by the caller
        self._counter[0] += 1
        for _ in range(self._spin):
            pass
        return self._inner.put(item)


class SlowBackend:
    """Test-only: a backend whose channels burn ``spin`` loop iterations per put.

    Only one channel in ``every`` is wrapped: a Python-level wrapper costs ~0.2-0.5 us per
    call, more than 10% of a gevent or greenlet hop by itself, so wrapping them all could
    not inject a 5% slowdown. ``injected_spin`` measures the wrapper's own cost and makes
    the spin add the rest.
    """

    def __init__(self, inner, spin: int = 0, every: int = 1):
        self._inner, self.spin, self.every = inner, spin, every
        self.calls, self._created = [0], 0

    def channel(self, capacity=None):
        inner = self._inner.channel(capacity)
        self._created += 1
        if (self._created - 1) % self.every:
            return inner
        return _SlowChannel(inner, self.spin, self.calls)

    def __getattr__(self, name):
        return getattr(self._inner, name)


# -- measuring ------------------------------------------------------------------------


def timed(backend, workload, case: dict, rounds: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        workload.run(backend, case)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        workload.run(backend, case)  # checks its own result: a wrong run raises
        samples.append(time.perf_counter() - start)
    return samples


def _runner(spec: str, backend, slow: dict | None, args):
    spin = (slow or {}).get(spec)
    return SlowBackend(backend, spin, args.wrap_every) if spin is not None else backend


def benchmark(spec: str, backend, workload, case, args, slow: dict | None) -> Record:
    """One benchmark as the plugin records it: raw samples plus its metrics (foreign load...)."""
    runner = _runner(spec, backend, slow, args)
    plan = CasePlan(spec, workload, case, args.rounds, args.warmup, TIME)
    samples, extra = driver.run_rounds(runner, plan, with_memory=False)
    extra.update(driver.identity(backend, workload, case, TIME))
    return Record(
        workload.name, dict(case), spec, samples, backend_version=backend.version, extra=extra
    )


def session(
    loaded: dict, workload, case, args, slow: dict | None = None
) -> tuple[list[Record], dict]:
    """One run of every backend, like one pytest session; ``slow``: spec -> spin count."""
    recs = [
        benchmark(spec, backend, workload, case, args, slow) for spec, backend in loaded.items()
    ]
    meta = baseline.current_meta({r.backend: r.backend_version for r in recs}, calibrate.measure())
    return recs, meta


def save_session(path: str, recs: list[Record], meta: dict, settings, keep: int) -> None:
    """Add a session to the baseline at ``path`` as ``--concurrency-save-baseline`` does."""
    doc, _ = gate.add_session(
        document_from_records(recs, meta),
        baseline.load_previous(path),
        recs,
        settings,
        keep,
    )
    baseline.save(path, doc)


def paired_change(plain, slowed, workload, case, rounds: int) -> float:
    """Median of slowed/plain over alternating rounds: drift hits both alike."""
    ratios = []
    for _ in range(rounds):
        a = timed(plain, workload, case, 1, 0)[0]
        ratios.append(timed(slowed, workload, case, 1, 0)[0] / a)
    return statistics.median(ratios) - 1


def injected_spin(backend, workload, case, args, fraction: float) -> int:
    """Spin count per put that makes the workload ``fraction`` slower, wrapper cost included.

    Estimated from the spin loop's speed, then corrected twice against measured rounds
    (the loop runs slower inside a busy workload than alone).
    """
    rounds = max(args.rounds, 31)
    counting = SlowBackend(backend, 0, args.wrap_every)
    for _ in range(args.warmup):
        workload.run(counting, case)
    counting.calls[0] = 0
    overhead = paired_change(backend, counting, workload, case, rounds)
    if overhead >= fraction:  # a busy machine can fake this: look again with three times the rounds
        overhead = paired_change(backend, counting, workload, case, 3 * rounds)
    if overhead >= fraction:
        said = (
            f"the channel wrapper alone slows {backend.name} by {overhead:.1%}, more than "
            f"{fraction:.0%}: choose another --target or a bigger --case (n >= --wrap-every)"
        )
        if not args.smoke:
            raise SystemExit(said)
        # --smoke runs the pipeline, its figures mean nothing: go on, calibrating from zero
        print(f"{said} (--smoke: going on)", file=sys.stderr)
        overhead = 0.0
    calls = counting.calls[0] / rounds
    round_s = statistics.median(timed(backend, workload, case, rounds, 0))
    spin = max(1, round((fraction - overhead) * round_s / calls * 1e9 / _spin_ns_per_iteration()))
    for _ in range(2):
        got = paired_change(
            backend, SlowBackend(backend, spin, args.wrap_every), workload, case, rounds
        )
        spin = max(1, round(spin * (fraction - overhead) / max(got - overhead, 0.002)))
    return spin


class Hog:
    """A busy loop in a child process, beside the benchmark on a 2-core machine."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


# -- judging --------------------------------------------------------------------------


def judge(base_doc, recs, meta, settings, remeasure) -> tuple[set, set, dict]:
    """What the plugin does at session end: compare; re-measure each suspect once (the
    faster of its two sessions decides). Returns the backends flagged after one session,
    after reproduction, and every backend's first-session change, threshold (drift included)
    and whether the machine's load made its verdict inconclusive."""
    first = gate.compare(base_doc, recs, meta, settings)
    if first.refused:
        raise SystemExit(f"gate refused: {first.refused}")
    reruns = {key: remeasure(key[2]) for key in gate.suspects(first)}
    final = first
    if reruns:
        final = gate.reproduce(
            first,
            gate.compare(base_doc, gate.faster_sessions(recs, reruns), meta, settings),
            reruns,
        )
    changes = {v.key[2]: v.change for v in first.verdicts if v.change is not None}
    thresholds = {v.key[2]: v.threshold for v in first.verdicts if v.threshold is not None}
    busy = sorted(v.key[2] for v in final.by_status(INCONCLUSIVE) if v.interference)
    flagged = lambda result: {v.key[2] for v in result.by_status(REGRESSED)}  # noqa: E731
    return (
        flagged(first),
        flagged(final),
        {"changes": changes, "thresholds": thresholds, "load_inconclusive": busy},
    )


def pytest_benchmark_flags(base_recs, recs, rule: str) -> set:
    """What ``--benchmark-compare-fail=RULE`` says against the baseline's latest session."""
    field, _, pct = rule.partition(":")
    check = PercentageRegressionCheck(field, float(pct.rstrip("%")))
    base = {r.key: _stats(r.samples) for r in base_recs}
    return {
        r.backend for r in recs if r.key in base and check.fails(_stats(r.samples), base[r.key])
    }


def _stats(samples) -> dict:
    s = Stats()
    for x in samples:
        s.update(x)
    return s.as_dict()


def _quantile(values, q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def child(job: dict) -> dict:
    """One session in a process of its own, as one pytest session: a baseline session saved
    to ``job["path"]``, or a session judged against it (suspects re-measured in this process)."""
    args = argparse.Namespace(**job["args"])
    workload, case = workloads.get("ring"), json.loads(args.case)
    loaded = {spec: backends.load(spec) for spec in backends.parse_list(args.backends)}
    if job["mode"] == "spin":  # calibrated in a fresh process, like the sessions it slows down
        return {
            "spins": {
                str(f): injected_spin(loaded[args.target], workload, case, args, f)
                for f in SLOWDOWNS.values()
            }
        }
    settings = gate.GateSettings(threshold=args.threshold, alpha=args.alpha)
    slow = job.get("slow")
    recs, meta = session(loaded, workload, case, args, slow)
    if job["mode"] == "baseline":
        save_session(job["path"], recs, meta, settings, args.baseline_sessions)
        return {}
    base_doc = baseline.load(job["path"])
    single, flagged, seen = judge(
        base_doc,
        recs,
        meta,
        settings,
        lambda spec: benchmark(spec, loaded[spec], workload, case, args, slow),
    )
    pb = pytest_benchmark_flags(list(base_doc.records), recs, args.pytest_benchmark_rule)
    return {
        "gate": sorted(flagged),
        "gate_one_session": sorted(single),
        "pytest_benchmark": sorted(pb),
        **seen,
        "foreign_cpu": {r.backend: r.extra["foreign_cpu"] for r in recs},
    }


def run_session(job: dict, hog: bool = False) -> dict:
    with Hog() if hog else contextlib.nullcontext():
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(job)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        raise SystemExit(
            f"a {job['mode']} session failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--repeats", type=int, default=20, help="comparisons per condition (default 20)"
    )
    ap.add_argument(
        "--baseline-every", type=int, default=10, help="record a fresh baseline every N repeats"
    )
    ap.add_argument(
        "--baseline-sessions",
        type=int,
        default=history.DEFAULT_KEEP,
        help=f"sessions per baseline (default {history.DEFAULT_KEEP}, the plugin's)",
    )
    ap.add_argument("--backends", default=DEFAULT_BACKENDS)
    ap.add_argument(
        "--target", default="gevent", help="the backend that gets the injected slowdown"
    )
    ap.add_argument(
        "--rounds", type=int, default=15, help="timed rounds per benchmark (default 15)"
    )
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument(
        "--wrap-every",
        type=int,
        default=20,
        help="slow down one channel in N (default 20: the ring's first channel)",
    )
    ap.add_argument("--case", default=json.dumps(DEFAULT_CASE), help="ring parameters, JSON")
    ap.add_argument(
        "--threshold",
        type=float,
        default=TIME.default_threshold,
        help=f"fraction, e.g. 0.05 (default {TIME.default_threshold:g}, the time mode's)",
    )
    ap.add_argument("--alpha", type=float, default=gate.stats.DEFAULT_ALPHA)
    ap.add_argument("--pytest-benchmark-rule", default="mean:5%")
    ap.add_argument("--no-hog", action="store_true", help="skip the CPU-hog A/A condition")
    ap.add_argument("--json", help="write every comparison's outcome here")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # internal: one session, see child()
    ap.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if ap.parse_known_args(argv)[0].smoke:
        ap.set_defaults(**SMOKE)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0

    case = json.loads(args.case)
    loaded = backends.parse_list(args.backends)
    if args.target not in loaded:
        raise SystemExit(f"--target {args.target!r} is not among --backends {', '.join(loaded)}")
    conditions = ["A/A quiet"] + ([] if args.no_hog else ["A/A hog"]) + list(SLOWDOWNS)
    outcomes = {c: [] for c in conditions}
    tmpdir = tempfile.TemporaryDirectory(prefix="gate-evidence-")  # removed at exit
    job_args = {k: v for k, v in vars(args).items() if k not in ("child", "json")}
    started = time.perf_counter()

    for i in range(args.repeats):
        if i % args.baseline_every == 0:
            path = os.path.join(tmpdir.name, f"baseline-{i}.json")
            for _ in range(args.baseline_sessions):
                run_session({"mode": "baseline", "path": path, "args": job_args})
            spins = {
                float(f): n
                for f, n in run_session({"mode": "spin", "args": job_args})["spins"].items()
            }
        for cond in conditions:
            slow = {args.target: spins[SLOWDOWNS[cond]]} if cond in SLOWDOWNS else None
            job = {"mode": "compare", "path": path, "slow": slow, "args": job_args}
            outcomes[cond].append(run_session(job, hog=cond == "A/A hog"))
        print(
            f"repeat {i + 1}/{args.repeats} done ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )

    print(
        f"ring {case} on {', '.join(loaded)}; {args.rounds} rounds per benchmark; "
        f"gate threshold {args.threshold:.0%} alpha {args.alpha:g}; target {args.target}; "
        f"{args.repeats} comparisons per condition, a fresh {args.baseline_sessions}-session baseline "
        f"every {args.baseline_every}"
    )
    judges = [
        ("gate", "gate"),
        ("gate_one_session", "gate, 1 session"),
        ("pytest_benchmark", f"pb {args.pytest_benchmark_rule}"),
    ]
    print(
        f"{'condition':<11}"
        + "".join(f" {name + ' fails':>22} {'only target':>11}" for _, name in judges)
        + f" {'target change':>13} {'|change| p95':>12}"
    )
    for cond, rows in outcomes.items():
        n = len(rows)
        cells = "".join(
            f" {sum(bool(r[j]) for r in rows):>18}/{n:<3} {sum(r[j] == [args.target] for r in rows):>7}/{n:<3}"
            for j, _ in judges
        )
        worst = _quantile([max(abs(c) for c in r["changes"].values()) for r in rows], 0.95)
        tc = statistics.median(r["changes"][args.target] for r in rows)
        print(f"{cond:<11}{cells} {tc:>+13.1%} {worst:>12.1%}")
    print(
        "A/A rows: 'fails' are false alarms. slow rows: 'only target' is a correct detection. "
        "'gate' re-measures suspects as the plugin does; 'gate, 1 session' is its first verdict."
    )
    print(
        "A/A |change| of medians per backend, p50 / p95 / max over all A/A comparisons "
        "(the practical threshold must sit above the p99 of the models it guards):"
    )
    for spec in loaded:
        aa = [
            abs(r["changes"][spec])
            for c, rows in outcomes.items()
            if c.startswith("A/A")
            for r in rows
        ]
        print(
            f"  {spec:<28} {_quantile(aa, 0.5):6.1%} / {_quantile(aa, 0.95):6.1%} / {max(aa):6.1%}"
        )
    print(
        "per backend: threshold applied (median, drift included) / A/A verdicts left inconclusive "
        "by the machine's load, quiet and hog / other processes' CPU cores, quiet "
        "and hog (median):"
    )
    for spec in loaded:
        applied = [
            r["thresholds"][spec]
            for rows in outcomes.values()
            for r in rows
            if spec in r["thresholds"]
        ]
        load = {
            c: sum(spec in r["load_inconclusive"] for r in outcomes[c])
            for c in ("A/A quiet", "A/A hog")
            if c in outcomes
        }
        cores = {  # None where the machine's load was not read
            c: [r["foreign_cpu"][spec] for r in outcomes[c] if r["foreign_cpu"][spec] is not None]
            for c in load
        }
        print(
            f"  {spec:<28} {statistics.median(applied):6.1%} / "
            + ", ".join(f"{load[c]}/{len(outcomes[c])}" for c in load)
            + " / "
            + ", ".join(f"{statistics.median(cores[c]):.2f}" if cores[c] else "-" for c in cores)
        )
    for key, name in judges:
        wrong = {}
        for cond, rows in outcomes.items():
            for r in rows:
                for spec in r[key]:
                    if spec != args.target or cond.startswith("A/A"):
                        wrong[spec] = wrong.get(spec, 0) + 1
        print(
            f"{name}: wrongly named, all conditions: "
            + (", ".join(f"{k} {v}x" for k, v in sorted(wrong.items())) or "none")
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "outcomes": outcomes}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
