"""pytest-timeout's limits in a process counted under valgrind, stretched by valgrind's slowdown.

A test runs 30-50x slower counted than at full speed, and a suite's ``timeout = 20`` (FastAPI
0.165's) stopped it there: its first counted save failed on tests that pass in 0.1 s. A test must
pass or fail counted as it does without the plugin, so a counted process (the counted session and
the layout passes it starts, forked ones included) multiplies pytest-timeout's own limits (from
its command line, ``PYTEST_TIMEOUT`` or its ini keys) before pytest-timeout reads them. A
``@pytest.mark.timeout(N)`` on a test is that test's own and is left as it is.
"""

import os

#: A counted round runs 30-50x slower than a timed one (measure/callgrind.py).
SLOWER = 50

#: pytest-timeout's option (``config.option`` name) and the environment variable it also reads
_LIMITS = (("timeout", "PYTEST_TIMEOUT"), ("session_timeout", None))


def stretch(config) -> None:
    """Call from a counted process's ``pytest_configure``, before pytest-timeout's (tryfirst)."""
    if not config.pluginmanager.has_plugin("timeout"):
        return
    for name, env in _LIMITS:
        value = config.getoption(name, None)
        if value is None and env:
            value = os.environ.get(env)
        if value is None:
            value = config.getini(name) or None
        try:
            seconds = float(value)
        except (TypeError, ValueError):  # unset, or not a number: pytest-timeout says which
            continue
        if seconds > 0:
            setattr(config.option, name, seconds * SLOWER)
