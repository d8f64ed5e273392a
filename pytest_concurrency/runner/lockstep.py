"""Paired rounds: the two sides of ``--concurrency-against`` take turns, round by round.

Both sessions run the same tests in the same order. Before each round (each call of
pytest-benchmark's runner, outside its timer) a side asks for its turn; within one test the
turns go A B B A | A B B A | ... Each group of four is a *quad*: a drift of the machine within
it weighs on both sides alike (their mean positions are equal), and each side has one round
that follows its own (warm caches) and one that follows the other's. A side records each
round with its turn number, so the head can match the rounds of one quad. A side never waits
for a test the other side has already passed or will not run, and a side that ended or died
lets the other run on alone (turn -1): pairing is lost, never the session.

Both sides are sessions of their own, started alike (against.py): the process the user
started holds the ``Coordinator`` and serves each side over a Unix socket, with a line
protocol: ``side A|B`` (first), ``order JSON`` (the node ids it collected, in order), ``at
NODEID`` (starts that test), ``turn NODEID`` (answered ``go T`` when granted, T the turn's
number in the test), ``done`` (the round ended), ``bye``. The head's order is the order.
"""

import contextlib
import json
import os
import socket
import threading
import time

import pytest

from .. import benchmark_adapter as adapter
from ..backends import watchdog
from ..measure import usage

A, B = "A", "B"
SAMPLE_EVERY_S = 0.01  # other processes' load read at a turn's end at most this often
_ABBA = (A, B, B, A)
GONE = float("inf")  # a side's position once it ended: every test is behind it


class Coordinator:
    """Grants the turns of both sides, serving them at ``path``."""

    def __init__(self, path: str, stall_s: float = 300.0):
        self.index: dict | None = None  # the head's test order, once it sent it
        self.path = path
        self.stall_s = (
            stall_s  # how long a side waits on the other, silent all along, before going alone
        )
        self._heard = {
            A: time.monotonic(),
            B: time.monotonic(),
        }  # when each side last said anything
        self.stalled: list[str] = []  # "side A at test X": what stopped being paired, and where
        self._cond = threading.Condition()
        self._pos = {A: -1.0, B: -1.0}
        self._turns: dict[int, int] = {}  # test index -> turns granted within it
        self._busy = False
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._server.bind(path)
        except (
            OSError
        ) as exc:  # "AF_UNIX path too long" under a deep TMPDIR, as a traceback otherwise
            self._server.close()
            raise pytest.UsageError(
                f"pytest-concurrency: cannot make the sides' socket {path} ({exc.strerror or exc}): a Unix "
                "socket's path is at most 107 bytes; set TMPDIR to a shorter directory (TMPDIR=/tmp)"
            ) from None
        os.chmod(path, 0o600)
        self._server.listen(2)
        for _ in (A, B):
            threading.Thread(target=self._serve, name="lockstep", daemon=True).start()

    def order(self, side: str, nodeids: list) -> None:
        if side == B:
            with self._cond:
                self.index = {nodeid: i for i, nodeid in enumerate(nodeids)}
                self._cond.notify_all()

    def _known(self) -> bool:
        return self.index is not None or self._pos[B] == GONE

    def at(self, side: str, nodeid: str) -> None:
        with self._cond:
            self._heard[side] = time.monotonic()
            self._cond.wait_for(self._known)
            self._pos[side] = float((self.index or {}).get(nodeid, -1))
            self._cond.notify_all()

    def turn(self, side: str, nodeid: str) -> int:
        """Block until ``side`` may run a round of ``nodeid``; its turn's number, -1 if it runs alone."""
        with self._cond:
            self._cond.wait_for(self._known)
            test = (self.index or {}).get(nodeid)
            if test is None:  # not a test the head runs: nothing to pair with
                self._cond.wait_for(lambda: not self._busy)
                self._busy = True
                return -1
            self._pos[side] = float(test)
            self._heard[side] = time.monotonic()
            other = B if side == A else A

            def mine() -> bool:
                if self._busy:
                    return False
                if self._pos[other] > test:  # passed it, ended, or died: run alone
                    return True
                return self._pos[other] == test and _ABBA[self._turns.get(test, 0) % 4] == side

            while not self._cond.wait_for(mine, 1.0):
                if time.monotonic() - self._heard[other] > self.stall_s:
                    break
            if not mine():  # the other side said nothing for stall_s: stuck, go on alone
                self.stalled.append(
                    f"side {other} did not take its turn within {self.stall_s:.0f} s "
                    f"(side {side} waited at {nodeid})"
                )
                self._pos[other] = GONE
                self._cond.wait_for(lambda: not self._busy)
            self._busy = True
            if self._pos[other] > test:
                return -1
            number = self._turns.get(test, 0)
            self._turns[test] = number + 1
            return number

    def done(self, side: str | None = None) -> None:
        with self._cond:
            if side is not None:
                self._heard[side] = time.monotonic()
            self._busy = False
            self._cond.notify_all()

    def leave(self, side: str) -> None:
        with self._cond:
            self._pos[side] = GONE
            self._busy = False
            self._cond.notify_all()

    # -- a side's connection ------------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
        except OSError:
            return  # closed before the side connected
        granted, side = False, None
        try:  # closing the stream flushes it: onto a side that died (a Ctrl-C), a broken pipe
            with conn, conn.makefile("rw", encoding="utf-8", newline="\n") as stream:
                for line in stream:
                    verb, _, arg = line.rstrip("\n").partition(" ")
                    if verb == "side" and arg in (A, B):
                        side = arg
                    elif side is None:
                        break  # not one of ours
                    elif verb == "order":
                        self.order(side, json.loads(arg))
                    elif verb == "at":
                        self.at(side, arg)
                    elif verb == "turn":
                        number = self.turn(side, arg)
                        granted = True
                        stream.write(f"go {number}\n")
                        stream.flush()
                    elif verb == "done":
                        granted = False
                        self.done(side)
                    elif verb == "bye":
                        break
        except OSError:
            pass
        if granted:
            self.done()
        if side is not None:
            self.leave(side)  # ended or died: the other side runs on alone

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


class Client:
    """A side's end: the coordinator's calls, over its socket."""

    def __init__(self, path: str, side: str):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._stream = self._sock.makefile("rw", encoding="utf-8", newline="\n")
        self._say(f"side {side}")

    def _say(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()

    def order(self, side: str, nodeids: list) -> None:
        self._say(f"order {json.dumps(nodeids)}")

    def at(self, side: str, nodeid: str) -> None:
        self._say(f"at {nodeid}")

    def turn(self, side: str, nodeid: str) -> int:
        self._say(f"turn {nodeid}")
        verb, _, number = self._stream.readline().partition(" ")
        if verb != "go":
            raise ConnectionError("the run that takes the turns is gone")
        return int(number)

    def done(self) -> None:
        self._say("done")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._say("bye")
        with contextlib.suppress(OSError):
            self._sock.close()


def pair_rounds(benchmark, turns, side: str, nodeid: str, cpu: int | None = None) -> list:
    """Make each round of this ``benchmark`` fixture wait for its side's turn (outside its timer);
    ``cpu``: run each round on that CPU (``shared_cpu``), restoring the thread's CPUs after it.

    Returns the list it fills with ``[turn, seconds per iteration, iterations, CPU, others]`` for
    every runner call (calibration and warm-up first: the rounds are the last ``len(stats.data)``);
    CPU is the one the round ended on, others how many threads of other processes were running as
    it ended (``usage.OthersRunning``, at most every ``SAMPLE_EVERY_S``; both -1: unknown).
    """
    make_runner = adapter.factories(benchmark)[0]
    calls: list = []
    # the run's process started both sides
    others_running = usage.OthersRunning(os.getppid(), SAMPLE_EVERY_S)
    allowed = os.sched_getaffinity(0) if cpu is not None else None

    def paired_runner(function, args, kwargs):
        runner = make_runner(function, args, kwargs)

        def run(loops_range, *rest, **kw):
            with watchdog.excused():  # the other side's round holds it up, not this test
                number = turns.turn(side, nodeid)
            try:
                if cpu is not None:
                    with contextlib.suppress(
                        OSError
                    ):  # a CPU taken away meanwhile: run where allowed
                        os.sched_setaffinity(0, {cpu})
                got = runner(loops_range, *rest, **kw)
                ran_on, others = current_cpu(), others_running()  # the turn is still ours
            finally:
                if allowed is not None:
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(0, allowed)
                turns.done()
            seconds, iterations = (got, len(loops_range)) if loops_range else (got[0], 1)
            calls.append([number, seconds / iterations, iterations, ran_on, others])
            return got

        return run

    adapter.use_factories(benchmark, paired_runner)
    return calls


def shared_cpu(backend) -> int | None:
    """The CPU both sides run a test's rounds on, when its tasks all run in the test's thread.

    Each side's process tends to keep to the CPU it last ran on, and the two sides mostly sit on
    different ones (A/As here: a side ran 70-100% of its rounds on one CPU, the other side on the
    other), while the two CPUs of a shared machine ran the same rounds up to 27% apart for a
    stretch: a pair of sessions then read a whole-life difference of 5-15% that was where they ran,
    not their code. On one CPU both sides share its speed, and the quads cancel how it drifts.
    Threads and processes keep every CPU (they are measured running in parallel), and so do the
    native runtimes, which start threads of their own.
    """
    if (
        getattr(backend, "task_kind", None) != "light"
        or getattr(backend, "family", "") == "native"
        or not hasattr(os, "sched_setaffinity")
    ):
        return None
    return max(os.sched_getaffinity(0))


def current_cpu() -> int:
    """The CPU this thread runs on (Linux), else -1."""
    try:
        with open("/proc/thread-self/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[36])  # field 39, "processor"
    except (OSError, ValueError, IndexError):
        return -1
