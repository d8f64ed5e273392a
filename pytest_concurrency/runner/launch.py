"""Where a session whose instrument has a command of its own (callgrind) runs.

Workload cases are measured in worker processes, which the session starts in the
instrument's command (``Instrument.worker_command``), so the session itself runs at full
speed. A plain ``benchmark`` test is measured in the session's own process: a session with
one runs again whole inside the command (``Instrument.run_session``), 30-50x slower in
everything it does, start-up and collection included (a session counting one case took 63 s
that way, 17 s with only its worker under valgrind).

Which kind of session it is, is known only after collection, so the session is first
collected at full speed in a child (``--collect-only``, about a second for the seed suite),
whose plugin writes down how many tests it would measure in its own process.

pytest-xdist's ``-n N`` in a counted session becomes N lanes of this session (see
``lanes_instead_of_xdist``); ``--tx`` to other hosts is refused before anything runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from pytest import UsageError

from ..backends import scratch

PROBE_ENV = "PYTEST_CONCURRENCY_PROBE"  # set in the collecting child: where to write its count


def measured_here(item) -> bool:
    """Whether ``item`` is measured in the session's process: it uses pytest-benchmark's
    fixture other than through ``concurrency_benchmark`` (which measures in workers)."""
    names = getattr(item, "fixturenames", ())
    return "benchmark" in names and "concurrency_benchmark" not in names


def has_tests_measured_here(config) -> bool:
    """Collect this session's command line in a child at full speed; ``True`` also when that
    collection fails (the session that runs inside the command then reports why)."""
    params = config.invocation_params
    with tempfile.TemporaryDirectory(prefix="probe-", dir=scratch.directory()) as directory:
        out = os.path.join(directory, "count")
        subprocess.run(
            [sys.executable, "-m", "pytest", *params.args, "--collect-only", "-q"],
            cwd=str(params.dir),
            env={**os.environ, PROBE_ENV: out},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with open(out, encoding="utf-8") as fh:
                return int(fh.read()) > 0
        except (OSError, ValueError):
            return True


def write_probe(items) -> None:
    """In the collecting child: write how many of ``items`` are measured in the session's process."""
    out = os.environ.get(PROBE_ENV)
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(str(sum(map(measured_here, items))))


def lanes_instead_of_xdist(config, s) -> None:
    """``-n N`` in a counted session: the cases are counted in N lanes of this session (as with
    ``--concurrency-jobs=N``) rather than in N xdist workers, where pytest-benchmark switches
    itself off. Each case is counted in a process forked for it either way, so the counts and
    verdicts are a serial run's. Runs before xdist's own pytest_configure (trylast)."""
    lanes = len(config.getoption("tx") or []) or 1
    config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0
    if not (config.getoption("concurrency_jobs") or config.getini("concurrency_jobs")):
        s.jobs = lanes
    print(
        f"pytest-concurrency: -n {lanes} with --concurrency-measure={s.instrument.kind}: the cases are "
        f"counted in {s.jobs} lanes of this session, not in xdist workers",
        flush=True,
    )


def refuse_other_hosts(config) -> None:
    hosts = [tx for tx in (getattr(config.option, "tx", None) or []) if tx != "popen"]
    if hosts:
        raise UsageError(
            f"pytest-concurrency: --tx {hosts[0]}: counted cases run in lanes of this session on this "
            "machine; counting on other hosts is not supported (run a session there and compare its "
            "baseline, or use -n N / --concurrency-jobs=N here)"
        )


def xdist_active(config) -> bool:
    return (
        bool(getattr(config.option, "numprocesses", None))
        or getattr(config.option, "dist", "no") != "no"
    )
