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
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

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
    with tempfile.TemporaryDirectory(prefix="pytest-concurrency-probe-") as directory:
        out = os.path.join(directory, "count")
        subprocess.run([sys.executable, "-m", "pytest", *params.args, "--collect-only", "-q"],
                       cwd=str(params.dir), env={**os.environ, PROBE_ENV: out},
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
