"""The other layouts of a counted session, forked from it after its collection
(``--concurrency-layouts-from=fork``, the default).

Under valgrind a start-up, its imports and a collection cost most of a small suite's counted run
(yarl's 11 URL benchmarks with the project's own addopts: 25 s of CPU before the first test, 3.5 s
at full speed), and a layout started as a pytest process of its own paid them again. valgrind
follows ``fork()``: a child goes on under it with its parent's state, so layouts forked here share
the counted session's one start-up. Each child first moves its heap its own way
(``layouts.pad``), so that everything the tests allocate lands elsewhere, then runs the tests
measured in the session's process with their output in a log of its own, writes their rounds
where a started pass would (``Role.layouts``), and ends with ``os._exit``: nothing of pytest's
session end (its reports, junit XML, coverage data, pytest-benchmark's files) runs in it.

Of three layouts, the third is a median's tie-breaker: the median of three lies between any two,
so where the first two agree (``layouts.medians_agree``) it is theirs whatever the third counts.
Its child is forked with the others, pads its heap, then waits for the counted session to say,
once layout 1 has ended, which tests the first two disagree on (``tell``), and counts only those
(1 or 2 of yarl's 11 URL benchmarks in each save, none of propcache's 4).

A child dies with the counted session (PR_SET_PDEATHSIG) and ignores Ctrl-C, which the counted
session's end answers by killing it (``stop``). One that a test ended leaves that test's node id in
its ``running`` file and its exit status beside its rounds file (``exit_path``), for the launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import traceback
import warnings

from .. import benchmark_adapter as adapter
from .. import lifetime
from ..exit_codes import Exit
from ..measure import PROFILE_NONE, layouts
from ..store import atomic
from . import crash


def exit_path(out: str) -> str:
    """Where the counted session writes a forked layout's exit status, when it was not 0."""
    return out + ".exit"


def exit_code(out: str) -> int:
    """A forked layout's exit status, as the counted session wrote it (0: none written)."""
    try:
        with open(exit_path(out), encoding="utf-8") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 0


class Forked:
    """The layout passes a counted session forked: one child a rounds file (``outs``, layout 1 on)."""

    def __init__(self, outs: tuple[str, ...], log, running, measured_here):
        self.outs = outs
        self._log = log  # out -> where its child's output goes
        self._running = running  # out -> its child's ``running`` file (crash.py)
        self._measured_here = measured_here  # item -> whether the pass runs it
        self.pids: dict[str, int] = {}
        # of three layouts, the third waits to be told which tests to count (``tell``)
        self.waiting = outs[1:] if len(outs) + 1 == layouts.OF_THREE else ()
        self._told: dict[str, int] = {}  # out -> the pipe its child reads the tests from

    def start(self, session, counted) -> None:
        """Fork a child for each layout; in the child, run its pass and exit (never return)."""
        with_parent = lifetime.with_parent()  # made here: it checks the child's parent is this
        for n, out in enumerate(self.outs, 1):
            told = os.pipe() if out in self.waiting else None
            for stream in (sys.stdout, sys.stderr):
                stream.flush()  # or the child's copy of what is buffered is written twice
            with warnings.catch_warnings():  # 3.12+: fork with threads running (a suite's -W error)
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                for fd in self._told.values():  # an earlier child's: its end is the parent's
                    os.close(fd)
                if told is not None:
                    os.close(told[1])
                self._child(session, counted, n, out, with_parent, told[0] if told else None)
            self.pids[out] = pid
            if told is not None:
                os.close(told[0])
                self._told[out] = told[1]

    def tell(self, names: list[str]) -> None:
        """The waiting children count these tests (pytest-benchmark's names for them) and no
        other; each writes its rounds file, empty of tests for none."""
        for out in list(self._told):
            with contextlib.suppress(OSError), open(self._told.pop(out), "w") as fh:
                json.dump(names, fh)  # a child killed meanwhile: its exit status says so

    def ended(self, out: str) -> bool:
        """Whether the child writing ``out`` has ended (its exit status written if not 0)."""
        pid = self.pids.get(out)
        if pid is None:
            return True
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            return False
        del self.pids[out]
        code = os.waitstatus_to_exitcode(status)
        if code:
            atomic.write_text(exit_path(out), str(code))
        return True

    def stop(self) -> None:
        """Kill the children still running and wait for them (an interrupted session)."""
        for out in list(self._told):
            os.close(self._told.pop(out))
        for out, pid in list(self.pids.items()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            del self.pids[out]

    def _child(self, session, counted, layout: int, out: str, with_parent, told) -> None:
        code = 1
        try:
            with_parent()  # dies with the counted session
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the counted session's end stops it
            _output_to(session.config, self._log(out))
            layouts.pad(layout)
            counted.profiles = PROFILE_NONE  # only the counted session's are read and saved
            counted.memory_pass = False
            counted.in_progress = crash.Running(self._running(out))
            items = [item for item in session.items if self._measured_here(item)]
            if told is not None:
                names = _names(told)
                if names is None:  # the counted session ended without a word: nothing to count
                    code = 0
                    return
                items = [item for item in items if item.nodeid in names]
            for i, item in enumerate(items):
                following = items[i + 1] if i + 1 < len(items) else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
                if session.shouldfail or session.shouldstop:  # -x, --maxfail: as pytest's loop
                    break
            counted.settings.instrument.pause()  # on until the last test's end (counting.py)
            _summary(session.config)
            bs = adapter.session(session.config)
            ran = [b for b in adapter.benchmarks(bs) if adapter.ran(b)]
            found = {
                "exitstatus": int(Exit.TESTS_FAILED if session.testsfailed else Exit.OK),
                "tests": {b.fullname: adapter.rounds(b) for b in ran if adapter.rounds(b)},
            }
            atomic.write_text(out, json.dumps(found))
            code = 0
        except BaseException:  # whatever it was, the child ends here
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)


def _names(fd: int) -> set[str] | None:
    """The tests a waiting child is told to count (``Forked.tell``); None if it was told nothing."""
    with open(fd, encoding="utf-8") as fh:
        text = fh.read()  # blocks until the counted session writes and closes its end
    return set(json.loads(text)) if text else None


def _output_to(config, path: str) -> None:
    """This process's output (the terminal reporter's, and what pytest's capture gives back) into
    ``path``: pytest's fd capture keeps copies of the descriptors it found, so it is stopped, the
    descriptors pointed at the log, and started again on them."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.stop_global_capturing()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    if capman is not None:  # suspended, as pytest leaves it after its collection
        capman.start_global_capturing()
        capman.suspend_global_capture()


def _summary(config) -> None:
    """The failures and the short summary, as a session's end would print them (into the log)."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None:
        with contextlib.suppress(Exception):  # the reporter's own methods: best effort
            reporter.summary_failures()
            reporter.short_test_summary()
            reporter.flush()  # its own file object: what it wrote is in the log before os._exit
