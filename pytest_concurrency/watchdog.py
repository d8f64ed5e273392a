"""Bound how long one round may take, so a deadlocked workload cannot hang the session.

In-process this is SIGALRM raising ``WorkloadTimeout`` in the main thread: it interrupts a
blocked ``get``/``join``/event loop, but cannot stop threads that are stuck elsewhere (they
are daemon threads and die with the process). Isolated runs get the hard guarantee: the
parent kills the worker process (see ``isolate``).
"""

from __future__ import annotations

import contextlib
import signal
import threading

from .backends.base import ConcurrencyError


class WorkloadTimeout(ConcurrencyError):
    pass


def deadline(seconds: float | None, what: str):
    """Context manager factory: ``with deadline(5, "ring on gevent")(): ...``."""

    @contextlib.contextmanager
    def guard():
        usable = (
            seconds
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )
        if not usable:
            yield
            return

        def on_alarm(signum, frame):
            raise WorkloadTimeout(
                f"{what} did not finish a round within {seconds:g} s "
                "(deadlock or stall?); raise --concurrency-timeout if it is just slow"
            )

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return guard
