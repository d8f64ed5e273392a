"""Which test ended a process, and the lines that name it.

A counted run: the passes and the counted session each keep the node id of the test in progress
in a small file (``Role.running``), cleared when the test is done, so that a process that ends in
the middle of a test (``os._exit``, a segfault, the OOM killer) leaves the name behind for the
launcher to say, rather than an exit status alone. The launcher stops the run at the first such
end: a test that ended the full-speed pass would otherwise run three more times, each under
valgrind, and end each of them the same way.

A time session measured in its own process has no launcher: its watcher (watcher.py) says the
lines below that begin ``the session's process``, with no exit status (it is not the process's
parent, so it cannot read one).
"""

import os

from .. import lifetime


class Running:
    """The hooks of a process whose role names a ``running`` file (a pass, the counted session)."""

    def __init__(self, path: str | None):
        self.path = path

    def start(self, nodeid: str) -> None:
        if self.path:  # written before the test runs: whatever ends the process, it is on disk
            with open(self.path, "w", encoding="utf-8") as fh:
                fh.write(nodeid)

    def done(self) -> None:
        if self.path:
            with open(self.path, "w", encoding="utf-8"):
                pass


def crashed(path: str | None) -> str | None:
    """The test a process ended in, if it ended in one."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def how(code: int) -> str:
    """An exit status as a reader knows it (``lifetime.how_it_ended``), 128 + N from a shell or
    valgrind read as signal N, as a negative status from subprocess is."""
    return lifetime.how_it_ended(128 - code if 128 < code < 128 + 65 else code)


def line(nodeid: str, where: str, code: int) -> str:
    return (
        f"pytest-concurrency: {nodeid} ended the process of {where} ({how(code)}), so the "
        f"counted run stops here and writes nothing: {_advice(nodeid)}"
    )


#: How a process ended, as its watcher can tell it: not its parent, it sees only the pipe close.
UNSEEN = "os._exit, a fatal signal such as SIGSEGV, or a kill"


def in_session(nodeid: str, isolated: bool = False) -> str:
    """The line for a time session's process that ended in the middle of test ``nodeid``;
    ``isolated``: under --concurrency-isolate, which forks the call of a test that takes
    ``benchmark``, not the body of one that takes ``concurrency_benchmark``."""
    advice = _advice(nodeid) if not isolated else _advice_isolated(nodeid)
    return (
        f"pytest-concurrency: {nodeid} ended the session's process ({UNSEEN}), so it wrote no "
        f"baseline, report or verdict: {advice}"
    )


def outside_tests(where: str, then: str = "it wrote no baseline, report or verdict") -> str:
    """The line for a time session's process that ended ``where``, not in a test."""
    return f"pytest-concurrency: the session's process ended {where} ({UNSEEN}), so {then}"


def _advice(nodeid: str) -> str:
    return (
        "fix the test (--concurrency-isolate runs it in a process of its own, where it fails "
        f"alone), or deselect it (--deselect {nodeid})"
    )


def _advice_isolated(nodeid: str) -> str:
    return (
        "fix the test (--concurrency-isolate runs a workload's rounds in a worker and the call of a "
        "test that takes benchmark in a process of its own; this test's body ran in the "
        f"session's), or deselect it (--deselect {nodeid})"
    )


def path(where: str, name: str) -> str:
    return os.path.join(where, f"{name}.running")
