"""The tests' own pytest settings.

The safety net against a hang (pytest-timeout, from the ``[test]`` extra) is set here and
not as ``timeout = 600`` in setup.cfg: setup.cfg is also the config of ``pytest benchmarks``,
where a user with only ``[all]`` installed has no pytest-timeout, and an unknown ini key
is a warning that ``-W error`` turns into an INTERNALERROR.
"""

import os

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
