"""Imported by multiprocessing's fork server only, among what it preloads (``_multiprocessing``):
runs the main script there once, so that a task process does not run it again itself.

A task process started from a script (``__main__`` has a path, not a module name: the ``pytest``
console script, not ``python -m pytest``) runs that script as ``__mp_main__`` before its task,
unless it inherited it from the fork server. CPython's fork server was meant to preload it when
``__main__`` is among its preloads (the default) but never did before 3.13.8 (gh-126631: it reads
a key that ``spawn.get_preparation_data`` does not set). Under the ``pytest`` script each task
process imported pytest: ~0.3 s of CPU and ~12 MiB a task, and a cancel cell 20x slower than
under ``python -m pytest``. The parent passes the script's path in
``child_env.FORK_SERVER_MAIN``, set only while it starts the server
(``_multiprocessing._start_fork_server``).
"""

from __future__ import annotations

import os
from multiprocessing import process, spawn

from . import child_env


def _import_main(path: str) -> None:
    # as CPython's fork server does: the script must not start processes while it is imported
    process.current_process()._inheriting = True  # type: ignore[attr-defined]
    try:
        spawn.import_main_path(path)  # a no-op where CPython preloaded it already
    except BaseException:  # (sys.exit too: it would end the server) each task process then
        pass  # runs the script itself, as before, and fails there
    finally:
        del process.current_process()._inheriting  # type: ignore[attr-defined]


_path = os.environ.pop(child_env.FORK_SERVER_MAIN, None)  # popped: the tasks have no use for it
if _path:
    _import_main(_path)
