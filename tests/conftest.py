"""The tests' own pytest settings.

The safety net against a hang (pytest-timeout, from the ``[test]`` extra) is set here and
not as ``timeout = 600`` in setup.cfg: setup.cfg is also the config of ``pytest benchmarks``,
where a user with only ``[all]`` installed has no pytest-timeout, and an unknown ini key
is a warning that ``-W error`` turns into an INTERNALERROR.
"""

import os
import signal
import subprocess
import sys
from typing import NamedTuple

import psutil
import pytest

TIMEOUT_S = 600  # per test; a test that needs less to prove "no hang" sets its own marker


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT_S))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (tox): two workers a core. Most tests wait on a pytest session they started (its
    start-up, sleeps and deadlines), so one a core left the CPUs ~40% idle: the fast tier took 156 s
    with 2 workers, 128 s with 4 and 127 s with 6 on 2 cores."""
    return 2 * (os.cpu_count() or 1)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch):
    """The sessions a test starts are the user's, not xdist workers: without this, under
    ``tox`` (``-n auto``) they would inherit PYTEST_XDIST_WORKER and pytest-benchmark would
    disable itself in them."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


#: Says which watcher (roles/watcher.py) a session had, so that a test of silence proves it had one.
WATCHER_SAID = """
import sys

def pytest_sessionfinish(session):
    watcher = session.config.pluginmanager.get_plugin("concurrency-watcher")
    print(f"the watcher: {watcher.proc.pid if watcher else None}", file=sys.stderr, flush=True)
"""


class Ended(NamedTuple):
    status: int
    out: str
    err: str
    watcher: int | None  # its pid, when the session reached its end and had one
    watcher_alive: bool  # after the session's process ended


@pytest.fixture
def watched_session(pytester):
    """Run ``pytest ARGS`` in pytester's directory as a user types it, in a process group of its
    own that takes Ctrl-C as at a terminal, and read its output to the end: the watcher's line
    (roles/watcher.py) comes after the session's process ended, when pytester's own runs have
    stopped reading. A conftest says which watcher the session had."""
    pytester.makeconftest(WATCHER_SAID)

    def run(*args: str, timeout: float = 120) -> Ended:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        said = [line for line in done.stderr.splitlines() if line.startswith("the watcher: ")]
        pid = int(said[-1].split()[-1]) if said and said[-1] != "the watcher: None" else None
        return Ended(
            done.returncode, done.stdout, done.stderr, pid, pid is not None and _alive(pid)
        )

    return run


def _alive(pid: int) -> bool:
    """Whether the watcher ``pid`` still runs (a zombie, its parent gone, has ended)."""
    try:
        return "SIG_IGN" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
