"""The environment variables of the plugin's processes that are not pytest sessions, in one place.

A pytest process the plugin starts gets its role on its command line (``roles``); what reaches a
process that is not a pytest session, or code that runs before any option is read, goes through
the environment, which children inherit: a worker and valgrind's client (where callgrind writes
its dumps, whether the process must switch instrumentation on itself), the IO workload's latency
server, the native reference programs. No other module reads a ``PYTEST_CONCURRENCY_*`` variable.
"""

from __future__ import annotations

import os

#: Where callgrind writes a counted process's dumps; set only for a process started counted.
CALLGRIND_DIR = "PYTEST_CONCURRENCY_CALLGRIND_DIR"
#: Set when callgrind was started with --instr-atstart=no: the process switches it on itself.
CALLGRIND_LATE = "PYTEST_CONCURRENCY_CALLGRIND_LATE"
#: The PYTHONMALLOC of the process that started a counted one ("" for none): a session counted
#: whole runs with the C allocator, the workers it starts with this one (measure/callgrind.py).
USER_MALLOC = "PYTEST_CONCURRENCY_USER_MALLOC"
#: HOST:PORT of the latency server a session started, for its workers to reuse.
LATENCY_SERVER = "PYTEST_CONCURRENCY_LATENCY_SERVER"
#: "1": the native programs corrupt one message a round (the tests of their checks).
NATIVE_CORRUPT = "PYTEST_CONCURRENCY_NATIVE_CORRUPT"
#: The main script multiprocessing's fork server runs once (backends/_fork_server_main.py); set
#: only while the server starts.
FORK_SERVER_MAIN = "PYTEST_CONCURRENCY_FORK_SERVER_MAIN"
#: Set by a user: behave as on a runner where perf_event_open is refused.
NO_PERF = "PYTEST_CONCURRENCY_NO_PERF"
#: Padding, never read: the two sides of --concurrency-against start with environments of one size.
PAD = "PYTEST_CONCURRENCY_PAD"
#: Padding, never read: a counted process started otherwise (a recount, each save after a
#: baseline's first: roles/argv.py), where the interpreter's own objects land elsewhere.
START_PAD = "PYTEST_CONCURRENCY_START_PAD"

NAMES = (
    CALLGRIND_DIR,
    CALLGRIND_LATE,
    USER_MALLOC,
    LATENCY_SERVER,
    NATIVE_CORRUPT,
    FORK_SERVER_MAIN,
    NO_PERF,
)


def get(name: str) -> str | None:
    """The variable's value in this process, or None when unset or empty."""
    if name not in NAMES:
        raise KeyError(f"{name} is not one of the plugin's environment variables")
    return os.environ.get(name) or None
