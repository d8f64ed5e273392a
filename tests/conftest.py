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

#: Set by .ci/run: a green CI run proves the tests ran. A test that needs a tool of the machine
#: (valgrind, tracefs, a toolchain) fails instead of skipping without it, and a fast-tier test that
#: took longer than FAST_LIMIT_S fails the run. (Not a PYTEST_CONCURRENCY_* name: those are the
#: package's, and only backends/child_env.py reads any.)
STRICT_ENV = "CONCURRENCY_TESTS_STRICT"
#: The fast tier's rule is 10 s a test on the 2-core CI machine (docs/contributing.md), where tox
#: runs four tests a core at once: the check lists every test over it, and fails the run only at
#: twelve times that, so that a loaded runner's noise never fails a build (a counted session read
#: 61 s at a load of 12). A test over the rule moves to the slow tier.
FAST_RULE_S = 10.0
FAST_LIMIT_S = 120.0
#: With STRICT_ENV set and no --durations given: the slowest tests, listed at the end of each run.
STRICT_DURATIONS = 15


def _strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


def need(tool: str, missing: str | None) -> None:
    """In a test: go on when ``missing`` is None; else skip it with ``missing`` (why ``tool`` is not
    on this machine), or, under .ci/run (CONCURRENCY_TESTS_STRICT=1), fail it: CI's machine has
    every tool, and a skip there would be a green run that tested nothing."""
    if missing is None:
        return
    if _strict():
        pytest.fail(
            f"{tool} is not on this machine ({missing}), and {STRICT_ENV}=1 says it must be: "
            "install it, or unset the variable to skip such tests",
            pytrace=False,
        )
    pytest.skip(f"{tool}: {missing}")


def needs(tool: str, missing: str | None) -> pytest.MarkDecorator:
    """``need`` as a mark: ``@needs("valgrind", callgrind.unavailable_reason())``."""
    return pytest.mark.needs(tool, missing)


def pytest_configure(config):
    if _strict() and config.option.durations is None:
        config.option.durations = STRICT_DURATIONS


def pytest_collection_modifyitems(config, items):
    # tox's fast envs leave `serial` out and its slow env runs it alone: a serial test that is not
    # also slow would run in no env at all
    astray = [
        i.nodeid for i in items if i.get_closest_marker("serial") and "slow" not in i.keywords
    ]
    if astray:
        raise pytest.UsageError(f"marked serial but not slow (mark it slow too): {astray[0]}")
    # the fast tier runs every test that is not slow already: essential says "of the slow tier"
    astray = [
        i.nodeid for i in items if i.get_closest_marker("essential") and "slow" not in i.keywords
    ]
    if astray:
        raise pytest.UsageError(
            f"marked essential but not slow (the fast tier runs it): {astray[0]}"
        )
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT_S))


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        need(*mark.args)


#: Each fast-tier test's time (not marked slow): its setup, call and teardown.
_took: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Runs where the reports arrive: xdist's controller, or the only session."""
    if "slow" not in report.keywords:
        _took[report.nodeid] = _took.get(report.nodeid, 0.0) + report.duration


def _offenders(limit: float) -> list[tuple[str, float]]:
    return sorted(((n, s) for n, s in _took.items() if s > limit), key=lambda t: -t[1])


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller judges
        return
    if _strict() and _offenders(FAST_LIMIT_S) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    offenders = [] if hasattr(terminalreporter.config, "workerinput") else _offenders(FAST_RULE_S)
    if not offenders:
        return
    failing = _strict() and offenders[0][1] > FAST_LIMIT_S
    terminalreporter.section(f"fast-tier tests over {FAST_RULE_S:.0f} s", sep="=", red=failing)
    for node, s in offenders:
        terminalreporter.line(f"{s:7.1f} s  {node}")
    terminalreporter.line(
        f"The fast tier's rule: {FAST_RULE_S:.0f} s a test on the 2-core CI machine. Mark a test "
        "over it @pytest.mark.slow, or make it cheaper"
        + (
            f" ({STRICT_ENV}=1: a test over {FAST_LIMIT_S:.0f} s fails the run)."
            if _strict()
            else "."
        )
    )


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
