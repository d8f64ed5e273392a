"""Which process this is: one role per pytest process, decided once, held by one plugin object.

One run of the plugin can start several pytest processes (docs/contributing.md, "Processes"). The
process the user started has no ``--concurrency-role``: its role follows from its options (a
session, a run against a base that starts two sides, or a counted run that starts its passes and
runs again under valgrind). Every pytest process the plugin starts itself is told its role on its
command line, ``--concurrency-role=JSON`` (``Role.argv``), which this module reads once, at the
earliest hook (before any conftest imports the code under test: a base side imports its install
first). The role's object is registered with pytest's plugin manager: it holds the role's state
and implements that role's hooks, and no other module asks which process it is in.
"""

import pytest

from ..runner import lockstep, sides
from . import again, against, counting, recount
from .role import AGAIN, AT_START_UP, BASE, HEAD, RECOUNT, SIDE, Role, parse

ROLE = pytest.StashKey["object"]()  # the role's object, registered with the plugin manager


def given(early_config) -> Role | None:
    """The role this process was started with, read before conftests are (``None``: the user's)."""
    text = getattr(early_config.known_args_namespace, "concurrency_role", None)
    return parse(text) if text else None


def register(config, role: Role | None, settings) -> object:
    """Make and register the object of this process's role; its ``settings`` are read already."""
    obj: object
    if role is None:
        if settings.against and not counting.measures_nothing(config):
            obj = against.Orchestrator(config, settings)
        else:
            obj = counting.user_session(config, settings, watched=True)
    elif role.kind == SIDE:
        obj = against.Side(config, settings, role)
    elif role.kind == BASE:  # the user's session, on the base side's code
        obj = counting.user_session(
            config,
            settings,
            base_dir=role.base_dir,
            probed=role.measured_here,
            shared_start=role.shared_start,
        )
    elif role.kind == AGAIN:  # the suspects' tests run again (a stored time gate's)
        obj = again.Again(config, settings, role)
    elif role.kind == RECOUNT:  # a stored counted gate's tests counted again, started otherwise
        obj = recount.Recount(config, settings, role)
    elif role.kind == HEAD:  # the user's session, counted against the base (the run's output)
        obj = counting.user_session(
            config,
            settings,
            base_dir=role.base_dir,
            watched=True,
            probed=role.measured_here,
            shared_start=role.shared_start,
        )
    else:
        obj = counting.child(config, settings, role)
    config.stash[ROLE] = obj
    config.pluginmanager.register(obj, f"concurrency-role-{type(obj).__name__.lower()}")
    return obj


def imports_base_first(role: Role | None) -> None:
    """In a process on the base side's code (a side, or a counted base run and what it starts),
    before a conftest or a test module imports the code under test (runner/sides.py)."""
    if role is None or not role.base_dir:
        return
    head = role.kind == SIDE and role.side != lockstep.A  # the head's stand-in for its finder
    sides.import_base_first(role.base_dir, head=head)


def interrupted(config) -> str:
    """What a Ctrl-C that reached pytest's main (``plugin.CtrlCAnywhere``) interrupted, and what was
    written before it: the role's own line, when it has one."""
    obj = config.stash.get(ROLE, None)
    line = getattr(obj, "interrupted", None)
    return line() if line is not None else AT_START_UP


def of(config):
    """This process's role object (its settings, its state) for fixtures and other glue."""
    return config.stash[ROLE]
