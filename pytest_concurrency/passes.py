"""Passes: the user's command run again before a counted session, for what that session cannot
measure in its own process.

A user's plain test counted in the session's process (runner/launch.py) gets, before that session
starts, the same command line run again with only such tests, writing nothing of the user's (the
options a base side of ``--concurrency-against`` leaves out), with a cache directory of its own
and no xdist workers:

* the **kernel pass**, at full speed in time mode: under valgrind a process's threads run one at a
  time and valgrind makes syscalls of its own, so the test's kernel figures come from here, and the
  kernel gate judges them as for any test;
* **layout passes** (``--concurrency-layouts=N``: N-1 of them, side by side), counted as the session
  is, each with the interpreter's objects landing elsewhere (measure/layouts.py): the gate judges
  the median over the layouts, which follows the code rather than where its objects landed.

Each pass writes what it found, by pytest-benchmark's name for the test, to a file the counted
session reads. A pass that fails says why and prints its last lines; its tests then have no kernel
figures ("not measured"), or fewer layouts.
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
from .measure import callgrind, kernel, layouts
from .runner import launch

KERNEL, LAYOUT = "kernel", "layout"
PASS_ENV = "PYTEST_CONCURRENCY_PASS"  # in a pass: "KIND:FILE", what it writes and where
FOUND_ENV = (
    "PYTEST_CONCURRENCY_PASSES"  # in the counted session: {"kernel": FILE, "layout": [FILE...]}
)
INTERRUPTED = (
    "\npytest-concurrency: interrupted in {}, before the counted session: no baseline, report, "
    "verdict or rounds written"
)


def kind() -> str | None:
    """Which pass this session is, or None."""
    return os.environ.get(PASS_ENV, "").partition(":")[0] or None


@contextlib.contextmanager
def before(config, layout_count: int):
    """Run the passes, and while the block runs (the counted session, which inherits this process's
    environment) point at what they found."""
    with tempfile.TemporaryDirectory(
        prefix="passes-", dir=scratch.directory(), ignore_cleanup_errors=True
    ) as where:
        kernel_file = os.path.join(where, "kernel.json") if _kernel(config, where) else None
        found = {KERNEL: kernel_file, LAYOUT: _layouts(config, where, layout_count)}
        os.environ[FOUND_ENV] = json.dumps(found)
        try:
            yield
        finally:
            os.environ.pop(FOUND_ENV, None)


def _argv(config, where: str, name: str) -> list[str]:
    argv = head_only_removed(config.invocation_params.args)
    if config.pluginmanager.has_plugin(
        "cacheprovider"
    ):  # the user's cache (--lf) is the counted session's to write
        argv += ["-o", f"cache_dir={os.path.join(where, name + '-cache')}"]
    return argv


def _kernel(config, where: str) -> bool:
    out = os.path.join(where, "kernel.json")
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *_argv(config, where, KERNEL),
        "--concurrency-measure=time",
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=str(config.invocation_params.dir),
            env={**os.environ, PASS_ENV: f"{KERNEL}:{out}"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            preexec_fn=watchdog.with_parent(),
        )  # a kill -9 of this process ends it too
    except KeyboardInterrupt:  # run() has killed it; the counted session never starts
        print(INTERRUPTED.format("the pass for kernel figures"), file=sys.stderr, flush=True)
        raise SystemExit(2) from None  # pytest's own status for an interrupted session
    count = _written(out)
    if count is None:
        _failed(
            f"the pass at full speed for kernel figures exited {done.returncode} and wrote none: the tests "
            "counted here read them as not measured",
            done.stdout,
        )
        return False
    print(
        f"pytest-concurrency: kernel figures for {count} benchmark{'s' * (count != 1)} measured here, from a pass "
        f"at full speed outside valgrind ({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return True


def _layouts(config, where: str, count: int) -> list[str]:
    """Layouts 1 to ``count - 1``, counted side by side; the files of those that wrote their rounds."""
    if count < 2:
        return []
    runs = []
    for n in range(1, count):
        out, log = os.path.join(where, f"layout{n}.json"), os.path.join(where, f"layout{n}.log")
        runs.append(
            (
                out,
                log,
                (
                    layouts.pytest_argv(n) + _argv(config, where, f"layout{n}"),
                    {PASS_ENV: f"{LAYOUT}:{out}"},
                    log,
                ),
            )
        )
    print(
        f"pytest-concurrency: counting in {count - 1} more layout{'s' * (count > 2)} first (objects landing "
        f"elsewhere; the gate judges the median over {count} layouts)",
        flush=True,
    )
    started = time.monotonic()
    codes = callgrind.run_sessions([run for _, _, run in runs], str(config.invocation_params.dir))
    if codes is None:  # Ctrl-C: each has ended
        print(INTERRUPTED.format("the layout passes"), file=sys.stderr, flush=True)
        raise SystemExit(2)
    written = []
    for n, ((out, log, _), code) in enumerate(zip(runs, codes), 1):
        wrote = _written(out) is not None
        if code != 0 or not wrote:  # a test that failed there is judged without this layout
            with open(log, encoding="utf-8", errors="replace") as fh:
                _failed(
                    f"layout {n}'s counted pass exited {code}{'' if wrote else ' and wrote no rounds'}: "
                    "its tests are judged on the layouts that counted them",
                    fh.read(),
                )
        if wrote:
            written.append(out)
    print(
        f"pytest-concurrency: {len(written)} more layout{'s' * (len(written) != 1)} counted "
        f"({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return written


def _written(path: str) -> int | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return len(json.load(fh))
    except (OSError, ValueError):
        return None


def _failed(what: str, output: str) -> None:
    tail = "\n  ".join(output.splitlines()[-15:])
    print(f"pytest-concurrency: {what}. Its last lines:\n  {tail}", flush=True)


def configure(config) -> None:
    """In a pass: no pytest-xdist workers (pytest-benchmark switches itself off in them)."""
    if kind() and launch.xdist_active(config):
        config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0


def keep_measured_here(config, items) -> None:
    """In a pass: only the tests the counted session measures in its own process."""
    if kind():
        config.hook.pytest_deselected(
            items=[item for item in items if not launch.measured_here(item)]
        )
        items[:] = [item for item in items if launch.measured_here(item)]


def finish(bs) -> bool:
    """At a pass's end: write what it found for each test, by pytest-benchmark's name for it. False
    when this session is not a pass."""
    which = kind()
    if not which:
        return False
    ran = [b for b in bs.benchmarks if not getattr(b, "has_error", False) and b.stats is not None]
    if which == KERNEL:
        found = {
            b.fullname: kernel.keys_of(b.extra_info) for b in ran if "kernel_source" in b.extra_info
        }
    else:
        found = {b.fullname: list(b.stats.data) for b in ran if b.stats.data}
    atomic.write_text(os.environ[PASS_ENV].partition(":")[2], json.dumps(found))
    return True


def kernel_figures(fullname: str) -> dict | None:
    """In the counted session: the kernel pass's keys for this test, or None."""
    path = _found().get(KERNEL)
    return _load(path).get(fullname) if path else None


def layout_rounds(fullname: str) -> list[list[float]]:
    """In the counted session: this test's rounds in each layout pass that counted it."""
    return [_load(path)[fullname] for path in _found().get(LAYOUT, ()) if fullname in _load(path)]


def _found() -> dict:
    try:
        return json.loads(os.environ.get(FOUND_ENV) or "{}")
    except ValueError:
        return {}


@functools.cache  # read once a session, not once a test
def _load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}
