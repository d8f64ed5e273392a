"""Bound how long one round may take, so a deadlocked workload cannot hang the session.

In-process this is SIGALRM raising ``WorkloadTimeout`` in the main thread: it interrupts a
blocked ``get``/``join``/event loop, but cannot stop threads that are stuck elsewhere (they
are daemon threads and die with the process). Isolated runs get the hard guarantee: the
parent kills the worker process (see ``isolate``).
"""

from __future__ import annotations

import asyncio
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

        message = (
            f"{what} did not finish a round within {seconds:g} s "
            "(deadlock or stall?); raise --concurrency-timeout if it is just slow"
        )
        fired = []

        def on_alarm(signum, frame):
            fired.append(True)
            loop = asyncio.events._get_running_loop()
            if loop is not None:
                # uvloop logs and swallows exceptions raised by signal handlers, so stop
                # the loop instead (threadsafe: it must wake a selector blocked forever);
                # the error that causes becomes the timeout below.
                loop.call_soon_threadsafe(loop.stop)
                return
            raise WorkloadTimeout(message)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        except WorkloadTimeout:
            raise
        except BaseException as exc:
            if fired:
                raise WorkloadTimeout(message) from exc
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return guard
