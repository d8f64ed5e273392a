"""Kernel figures for the tests a counted session measures in its own process, from a pass outside valgrind.

Under valgrind a process's threads run one at a time and valgrind makes syscalls of its own, so a
user's plain test counted in the session's process (runner/launch.py) has no kernel figures of its
own. Before that session starts, the launcher runs the same command once more at full speed, in
time mode, keeping only those tests and writing nothing of the user's (the options a base side of
``--concurrency-against`` leaves out): each test's kernel keys go to a file, which the counted
session reads and gives the test's record (``figures``), so the kernel gate judges them there too.
A pass that fails leaves them "not measured", and says why.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

from .against import head_only_removed
from .backends import scratch, watchdog
from .gate import atomic
from .measure import kernel
from .runner import launch

PASS_ENV = "PYTEST_CONCURRENCY_KERNEL_PASS"  # in the pass: where to write the figures
FIGURES_ENV = "PYTEST_CONCURRENCY_KERNEL_FIGURES"  # in the counted session: where to read them


def active() -> bool:
    """Whether this session is the pass."""
    return bool(os.environ.get(PASS_ENV))


@contextlib.contextmanager
def before(config):
    """Run the pass, and while the block runs (the counted session, which inherits this process's
    environment) point at its figures."""
    with tempfile.TemporaryDirectory(prefix="kernel-", dir=scratch.directory(), ignore_cleanup_errors=True) as where:
        out = os.path.join(where, "kernel.json")
        if _run(config, out, os.path.join(where, "cache")):
            os.environ[FIGURES_ENV] = out
        try:
            yield
        finally:
            os.environ.pop(FIGURES_ENV, None)


def _run(config, out: str, cache: str) -> bool:
    params = config.invocation_params
    argv = [sys.executable, "-m", "pytest", *head_only_removed(params.args), "--concurrency-measure=time"]
    if config.pluginmanager.has_plugin("cacheprovider"):  # the user's cache (--lf) is the counted session's to write
        argv += ["-o", f"cache_dir={cache}"]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=str(params.dir), env={**os.environ, PASS_ENV: out}, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              preexec_fn=watchdog.with_parent())  # a kill -9 of this process ends it too
    except KeyboardInterrupt:  # run() has killed it; the counted session never starts
        print("\npytest-concurrency: interrupted in the pass for kernel figures, before the counted session: no "
              "baseline, report, verdict or rounds written", file=sys.stderr, flush=True)
        raise SystemExit(2) from None  # pytest's own status for an interrupted session
    try:
        with open(out, encoding="utf-8") as fh:
            count = len(json.load(fh))
    except (OSError, ValueError):
        tail = "\n  ".join(done.stdout.splitlines()[-15:])
        print(f"pytest-concurrency: the pass at full speed for kernel figures exited {done.returncode} and wrote "
              f"none: the tests counted here read them as not measured. Its last lines:\n  {tail}", flush=True)
        return False
    print(f"pytest-concurrency: kernel figures for {count} benchmark{'s' * (count != 1)} measured here, from a pass "
          f"at full speed outside valgrind ({time.monotonic() - started:.0f} s)", flush=True)
    return True


def configure(config) -> None:
    """In the pass: no pytest-xdist workers (pytest-benchmark switches itself off in them)."""
    if active() and launch.xdist_active(config):
        config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0


def keep_measured_here(config, items) -> None:
    """In the pass: only the tests the counted session measures in its own process."""
    if active():
        config.hook.pytest_deselected(items=[item for item in items if not launch.measured_here(item)])
        items[:] = [item for item in items if launch.measured_here(item)]


def finish(bs) -> bool:
    """At the pass's end: write each test's kernel keys, by pytest-benchmark's name for it. False
    when this session is not the pass."""
    if not active():
        return False
    found = {b.fullname: kernel.keys_of(b.extra_info) for b in bs.benchmarks
             if not getattr(b, "has_error", False) and "kernel_source" in b.extra_info}
    atomic.write_text(os.environ[PASS_ENV], json.dumps(found))
    return True


def figures(fullname: str) -> dict | None:
    """In the counted session: the pass's kernel keys for this test, or None."""
    path = os.environ.get(FIGURES_ENV)
    return _load(path).get(fullname) if path else None


@functools.lru_cache(maxsize=None)  # read once a session, not once a test
def _load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}
