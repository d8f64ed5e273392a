"""Every seed workload's module, imported at once: what multiprocessing's fork server imports
before it forks a task process (backends/_multiprocessing.py), so that a task does not import its
workload's module itself. The package's own ``__init__`` imports them lazily (``get``): preloading
it alone left each of cancel's task processes importing cancel and psutil, ~100 ms of CPU each,
most of the smoke-scale job's CPU (evidence/bench_breakdown/)."""

from __future__ import annotations

import importlib

from . import _MODULES

for _module in _MODULES.values():
    importlib.import_module(f"{__package__}.{_module}")
