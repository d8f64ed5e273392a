"""``--codspeed`` under a gate: suites that CodSpeed measures often skip their benchmarks unless
"--codspeed" is in ``sys.argv`` (FastAPI's tests/benchmarks). Given with a gate's option, --codspeed
is left to such checks and the gate measures: pytest-codspeed's measurement is turned off (it would
switch pytest-benchmark off), and without pytest-codspeed the flag is accepted and does nothing else.
"""

from .session import gate_asked

CODSPEED_MODULE = "pytest_codspeed.plugin"  # registered by its entry point, or by -p


def active(pluginmanager) -> bool:
    return any(getattr(p, "__name__", "") == CODSPEED_MODULE for p in pluginmanager.get_plugins())


def gate_measures(option, role) -> bool:
    """Whether a gate measures in this process: a gate's option given, or a process the plugin
    started (its role: a side, a counted session, a pass)."""
    return role is not None or gate_asked(option)


def accept_flag(early_config, parser) -> None:
    """``--codspeed`` as a flag of ours, where pytest-codspeed does not add it (not installed, or
    blocked with ``-p no:codspeed``)."""
    if active(early_config.pluginmanager):
        return
    try:
        parser.addoption(
            "--codspeed",
            action="store_true",
            default=False,
            help="pytest-codspeed is not active: accepted beside a gate's option, for suites that "
            "run their benchmarks only when --codspeed is in sys.argv; the gate measures",
        )
    except ValueError:  # another plugin of the process added it already
        pass


def left_to_the_suite(config, role) -> str | None:
    """With a gate's option, ``--codspeed`` turned off for pytest-codspeed (it reads
    ``config.option.codspeed`` in its own ``pytest_configure``, after this hook), so that it
    neither measures nor switches pytest-benchmark off; what to say of it (None: not given)."""
    if not config.getoption("codspeed", False) or not gate_measures(config.option, role):
        return None
    config.option.codspeed = False
    if not active(config.pluginmanager):
        return "--codspeed accepted for the suite's own checks (pytest-codspeed is not active)"
    return (
        "--codspeed left to the suite's own checks of the command line: pytest-codspeed does "
        "not measure in this run, the gate does"
    )
