"""The processes of a counted run (``--concurrency-measure=instructions``).

Workload cases are counted in worker processes started under valgrind, so a session that has
only those runs at full speed (``MeasuringSession``). A plain ``benchmark`` test is measured in the
session's own process: a run with one becomes a ``Launcher``, which starts, in turn,

* a ``Probe``: the command line collected at full speed (about a second), to learn whether any
  test is measured in the session's own process (which is known only after collection);
* a ``KernelPass``, when asked for (``--concurrency-kernel-pass``): those tests at full speed in
  time mode, for their kernel figures (under valgrind a process's threads run one at a time, and
  valgrind makes syscalls of its own);
* the ``Counted`` session: the user's command line, whole, under valgrind (30-50x slower in
  everything it does; only the rounds are counted), which reads what the passes wrote;
* beside it, N-1 layout passes (``--concurrency-layouts=N``): those tests counted with the
  interpreter's objects landing elsewhere (measure/layouts.py), so that the gate judges the
  median over layouts, which follows the code rather than where its objects landed. By default
  the counted session forks them after its collection (forked_layouts.py: one start-up under
  valgrind for all); with ``--concurrency-layouts-from=start`` each is a ``LayoutPass`` process
  of its own, which holds a lock, taken by the launcher before it started, until it ends however
  it ends. Counts do not depend on what else runs, so all N run at once (on two cores, 1.5
  sessions' time rather than 2); the counted session waits for them at its end
  (``_BeforeSaving``). Forked, the third of three counts only the tests the first two disagree
  on (forked_layouts.py), once the counted session has compared its rounds with layout 1's.

Each child is told its role on its command line (``Role.argv``). A pass writes nothing of the
user's (the options a base side of --concurrency-against leaves out), has a cache directory of
its own and no xdist workers. A pass that fails says why and prints its last lines; its tests
then have no kernel figures ("not measured"), or fewer layouts.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING, NamedTuple

import pytest

from .. import benchmark_adapter as adapter
from .. import lifetime, plain_tests
from ..backends import scratch
from ..exit_codes import Exit
from ..measure import PROFILE_HANDED_OVER, PROFILE_NONE, callgrind, kernel, layouts
from ..store import atomic
from . import child_sessions, crash, forked_layouts, shared_start, stretched_timeouts
from .argv import (
    QUIET_FAULTHANDLER,
    apart,
    no_coverage,
    own_coverage_data,
    started_otherwise,
    traced_by_coverage,
)
from .role import COUNTED, KERNEL_PASS, LAYOUT_PASS, PROBE, Role
from .session import MeasuringSession, no_xdist

if TYPE_CHECKING:
    from ..settings import Settings

#: How long the kernel pass times each test (pytest-benchmark's ``--benchmark-max-time``, 1 s by
#: default): its figures are per call, read in ten groups of rounds or more lasting 2 ms each
#: (measure/driver.py ``KernelPerRounds``), and this pass runs before the counted processes, alone:
#: 69 s of a counted run of yarl's 91 URL benchmarks at 1 s.
KERNEL_MAX_TIME_S = 0.2

#: Said once by a run whose counted processes run without the suite's coverage
COVERAGE_OFF = (
    "pytest-concurrency: counted without your coverage (pytest-cov's --no-cov in each counted "
    "process: its tracer and data file stay out of them); take coverage in a run that does not "
    "count"
)

INTERRUPTED = (
    "\npytest-concurrency: interrupted in {}, before the counted session: no baseline, report, "
    "verdict or rounds written"
)


def user_session(
    config,
    settings,
    base_dir: str | None = None,
    watched: bool = False,
    probed: bool | None = None,
    shared_start: int | None = None,
):
    """The role of the process the user started, when it is not a run against a base (or of a
    side of a counted run against the base: ``base_dir`` the base's install, or the head's
    stand-in for it, ``probed`` what the run's probe found, ``tests_measured_here``,
    ``shared_start`` the run's start-up that forks its counted session, shared_start.py);
    ``watched``: a session in it has a watcher (watcher.py), as nothing else would name a test
    that ended its process."""
    if settings.instrument.fresh_process:
        refuse_other_hosts(config)
    if settings.instrument.needs_launch and not measures_nothing(config):
        # before any process is counted: whichever counts (workers, or the session whole under
        # valgrind) would otherwise compile this package's modules from source, in every process
        settings.instrument.prepare_session()
        if probed if probed is not None else tests_measured_here(config, base_dir).here:
            return Launcher(config, settings, base_dir, shared_start)
    return MeasuringSession(config, settings, watched=watched, on_a_side=base_dir is not None)


def child(config, settings, role: Role):
    """The role of a process a ``Launcher`` started."""
    if role.kind == PROBE:
        return Probe(config, settings, role)
    if role.kind == KERNEL_PASS:
        return KernelPass(config, settings, role)
    if role.kind == LAYOUT_PASS:
        return LayoutPass(config, settings, role)
    assert role.kind == COUNTED, role
    return Counted(config, settings, role)


def measures_nothing(config) -> bool:
    opt = config.option
    return bool(
        getattr(opt, "help", False)
        or getattr(opt, "version", False)
        or getattr(opt, "collectonly", False)
        or getattr(opt, "benchmark_disable", False)
    )


def measured_here(item) -> bool:
    """Whether ``item`` is measured in the session's process: it uses pytest-benchmark's
    fixture other than through ``concurrency_benchmark`` (which measures in workers), or is
    marked as a whole-body benchmark (pytest-codspeed's style)."""
    names = getattr(item, "fixturenames", ())
    marked = any(item.get_closest_marker(m) for m in plain_tests.BODY_MARKERS)
    return plain_tests.measured_here(names) or (marked and "concurrency_benchmark" not in names)


# -- the process the user started ---------------------------------------------------------------


class Found(NamedTuple):
    here: int  # tests measured in the session's own process


def tests_measured_here(config, base_dir: str | None = None) -> Found:
    """Collect this session's command line in a ``Probe`` at full speed. When that collection
    fails, the counted session runs (and reports why), with every pass."""
    with tempfile.TemporaryDirectory(prefix="probe-", dir=scratch.directory()) as directory:
        out = os.path.join(directory, "count")
        role = Role(PROBE, out=out, base_dir=base_dir)
        # coverage (a suite's addopts) traced the probe's imports and wrote its report: 1-2 s
        # of yarl's 3-3.5 s of CPU, and nothing of what a collection finds
        args = [*config.invocation_params.args, "--collect-only", "-q", *no_coverage(config)]
        log = os.path.join(directory, "log")
        child_sessions.run_apart(config, [*args, *role.argv()], directory, "probe", log=log)
        try:
            with open(out, encoding="utf-8") as fh:
                return Found(*json.load(fh))
        except (OSError, ValueError, TypeError):
            return Found(1)


class Launcher:
    """The user's process in a counted run with a test measured in its own process: it runs the
    passes, then the whole session again under valgrind, and exits with that session's status."""

    def __init__(
        self, config, settings, base_dir: str | None = None, shared_start: int | None = None
    ):
        self.config = config
        self.settings = settings
        # counted against the base: the base's install, or the head's stand-in for it (as long),
        # and the run's start-up under valgrind that forks the counted session
        self.base_dir = base_dir
        self.shared_start = shared_start

    def main(self) -> int:
        config, settings = self.config, self.settings
        print(
            f"pytest-concurrency: counting {settings.instrument.kind}: a benchmark test measured in this "
            "process makes the session run again under valgrind (callgrind, about 30-50x slower "
            "than timing; only the rounds are counted)",
            flush=True,
        )
        if traced_by_coverage(config):
            print(COVERAGE_OFF, flush=True)
        params = config.invocation_params
        with tempfile.TemporaryDirectory(
            prefix="passes-", dir=scratch.directory(), ignore_cleanup_errors=True
        ) as where:
            try:
                kernel_file = self._kernel(where) if settings.kernel_pass else None
                forked = settings.layouts_from == "fork"
                outs = _layout_files(where, settings.layouts)
                passes = [] if forked else self._layouts(where, outs)
                if outs:
                    how = "forked from it after its collection" if forked else "beside it"
                    third = ", the third where the first two disagree" * (forked and len(outs) == 2)
                    print(
                        f"pytest-concurrency: counting in {len(outs)} more "
                        f"layout{'s' * (len(outs) > 1)} {how} (objects landing elsewhere; the "
                        f"gate judges the median over {len(outs) + 1} layouts{third})",
                        flush=True,
                    )
                shared = (
                    shared_start.Server(self.shared_start)
                    if self.shared_start is not None
                    else None
                )
                role = Role(
                    COUNTED,
                    base_dir=self.base_dir,
                    launcher=shared.pid if shared else os.getpid(),  # its parent
                    kernel=kernel_file,
                    layouts=outs,
                    forked=forked,
                    running=crash.path(where, "counted"),
                )
                # a save into a baseline that holds sessions starts otherwise than they did
                padded = self._saved_before() if shared is None else 0
                counted = Command(
                    [*params.args, *role.argv(), *no_coverage(config)],
                    started_otherwise(padded),
                    None,
                )
                codes = run_sessions(
                    [counted, *(command for _, command in passes)], str(params.dir), shared
                )
                if codes is None:  # Ctrl-C: each has ended, and the counted session said so
                    return Exit.INTERRUPTED
                _stop_if_crashed(role.running, "the counted session under valgrind", codes[0])
                ended = [forked_layouts.exit_code(out) for out in outs] if forked else codes[1:]
                for n, (out, code) in enumerate(zip(outs, ended), 1):
                    _stop_if_crashed(_running(out), f"layout {n}'s counted pass", code)
                return codes[0]
            except _Crashed as exc:
                print(exc.args[0], file=sys.stderr, flush=True)
                return Exit.TESTS_FAILED

    def _saved_before(self) -> int:
        """The sessions already in the baseline this run saves into (0 when it saves none, or
        when that file is not a baseline: the counted session says so). Each save starts as many
        pads over, so that the sessions the gate pools span as many start-ups; saves of one
        command line would otherwise count alike to the instruction, a draw of the start-up
        included (roles/recount.py)."""
        if not self.settings.save_baseline:
            return 0
        from ..store import baseline

        try:
            previous = baseline.load_previous(self.settings.save_baseline)
        except baseline.BaselineError:
            return 0
        return len(previous.calibrations) if previous is not None else 0

    def _kernel(self, where: str) -> str | None:
        out = os.path.join(where, "kernel.json")
        try:  # pytest-benchmark's option, as given (a string by default)
            given = float(self.config.getoption("benchmark_max_time", None) or KERNEL_MAX_TIME_S)
        except (TypeError, ValueError):  # its own usage error is the counted session's to say
            given = KERNEL_MAX_TIME_S
        argv = [
            *apart(self.config, where, "kernel"),
            "--concurrency-measure=time",
            f"--benchmark-max-time={min(given, KERNEL_MAX_TIME_S)}",
            *no_coverage(self.config),
            *Role(
                KERNEL_PASS, out=out, base_dir=self.base_dir, running=crash.path(where, "kernel")
            ).argv(),
        ]
        started = time.monotonic()
        log = _log(out)
        try:
            code = child_sessions.run_apart(self.config, argv, where, "kernel", log=log)
        except KeyboardInterrupt:  # it has ended; the counted session never starts
            print(INTERRUPTED.format("the pass for kernel figures"), file=sys.stderr, flush=True)
            raise SystemExit(Exit.INTERRUPTED) from None
        _stop_if_crashed(
            crash.path(where, "kernel"), "the pass at full speed for kernel figures", code
        )
        count = _written(out)
        if count is None:
            print(
                f"pytest-concurrency: the pass at full speed for kernel figures exited {code} and "
                "wrote none: the tests counted here read them as not measured. Its last lines:\n  "
                + child_sessions.log_tail(log, 15, "\n  "),
                flush=True,
            )
            return None
        print(
            f"pytest-concurrency: kernel figures for {count} benchmark{'s' * (count != 1)} measured "
            f"here, from a pass at full speed outside valgrind ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
        return out

    def _layouts(self, where: str, outs: tuple[str, ...]) -> list[tuple[str, Command]]:
        """Layouts 1 on, each started as a pytest process of its own: (rounds file, command) of
        each pass, its lock taken."""
        passes = []
        for n, out in enumerate(outs, 1):
            role = Role(
                LAYOUT_PASS,
                out=out,
                launcher=os.getpid(),
                layout=n,
                base_dir=self.base_dir,
                running=_running(out),
            )
            argv = [
                *apart(self.config, where, f"layout{n}"),
                *role.argv(),
                *no_coverage(self.config),
            ]
            env = own_coverage_data(where, f"layout{n}")
            passes.append((out, Command(argv, env, _log(out), (_held(out),), n)))
        return passes


def _layout_files(where: str, count: int) -> tuple[str, ...]:
    """Where layouts 1 to ``count - 1`` write their rounds."""
    return tuple(os.path.join(where, f"layout{n}.json") for n in range(1, count))


# -- the counted processes, side by side under valgrind --------------------------------------


class Command(NamedTuple):
    """One counted pytest session for ``run_sessions``."""

    args: list[str]  # pytest's
    env: dict  # added to this process's environment
    log: str | None  # where its output goes; None: this terminal
    fds: tuple[int, ...] = ()  # handed to this process alone, and closed here once it started
    layout: int = 0  # where its heap starts (measure/layouts.py)


def run_sessions(
    commands: list[Command], cwd: str, shared: shared_start.Server | None = None
) -> list[int] | None:
    """Run pytest sessions counted, side by side (child_sessions.py: each in a session of its own,
    dying with this process, ignoring a Ctrl-C until its session started); the first forked by
    ``shared``, when given (a side's counted session against the base). Their exit statuses;
    None after a Ctrl-C, forwarded to each, once all have ended."""
    callgrind.prepare()
    with contextlib.ExitStack() as directories, child_sessions.Children() as children:
        running: list[tuple[child_sessions.Process, str]] = []
        for n, (args, added, log, fds, layout) in enumerate(commands):
            if n == 0 and shared is not None:
                env = {**callgrind.counted_env(dict(os.environ), shared.directory), **added}
                forked = shared.request([*args, *QUIET_FAULTHANDLER], env, cwd, log)
                running.append((children.adopt(forked, on_terminal=log is None), shared.directory))
                continue
            directory = directories.enter_context(
                tempfile.TemporaryDirectory(
                    prefix="callgrind-", dir=scratch.directory(), ignore_cleanup_errors=True
                )
            )
            env = {**callgrind.counted_env(dict(os.environ), directory), **added}
            argv = child_sessions.command([*args, *QUIET_FAULTHANDLER], layout)
            proc = children.start(
                callgrind.command(argv, directory),
                cwd=cwd,
                env=env,
                log=log,
                fds=fds,
                quiet_start=True,
            )
            running.append((proc, directory))
        try:
            codes = [proc.wait() for proc, _ in running]
        except KeyboardInterrupt:
            return None  # each is stopped on the way out of ``watched``
        for code, (_, directory) in zip(codes, running):
            # not pytest's own nor the gate's 7 and 8: valgrind may say why
            if code < 0 or code > Exit.NOTHING_JUDGED:
                callgrind.show_logs(directory)
        return codes


def launcher_gone(launcher: int) -> bool:
    """Whether the process that started this counted session (pid ``launcher``) is no longer its
    parent: killed, so what this session measured must not become a result."""
    return os.getppid() != launcher


def _held(out: str) -> int:
    """A lock on ``out``'s lock file, taken here and handed to the pass that writes ``out``: it
    holds it until it ends, however it ends (the launcher closes its own copy once it started)."""
    fd = os.open(out + ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _ended(out: str) -> bool:
    """Whether the pass that writes ``out`` has ended (its lock is free)."""
    try:
        fd = os.open(out + ".lock", os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _log(out: str) -> str:
    """Where the pass that writes ``out`` writes its output."""
    return os.path.splitext(out)[0] + ".log"


def _running(out: str) -> str:
    """Where the pass that writes ``out`` keeps the test in progress (crash.py)."""
    return crash.path(os.path.dirname(out), os.path.splitext(os.path.basename(out))[0])


class _Crashed(Exception):
    """A test ended a process of the run; the message is the line that says which."""


def _stop_if_crashed(running: str | None, where: str, code: int) -> None:
    nodeid = crash.crashed(running)
    if nodeid and code != 0:
        raise _Crashed(crash.line(nodeid, where, code))


def _written(path: str) -> int | None:
    """How many tests a pass wrote figures for, or None if it wrote nothing."""
    found = _found(path)
    return None if found is None else len(found["tests"])


def _found(path: str) -> dict | None:
    """What a pass wrote at its end (``_Pass.finish``), or None."""
    try:
        with open(path, encoding="utf-8") as fh:
            found = json.load(fh)
        return found if isinstance(found.get("tests"), dict) else None
    except (OSError, ValueError, AttributeError):
        return None


def refuse_other_hosts(config) -> None:
    hosts = [tx for tx in (getattr(config.option, "tx", None) or []) if tx != "popen"]
    if hosts:
        raise pytest.UsageError(
            f"pytest-concurrency: --tx {hosts[0]}: counted cases run in lanes of this session on this "
            "machine; counting on other hosts is not supported (run a session there and compare its "
            "baseline, or use -n N / --concurrency-jobs=N here)"
        )


# -- the processes it starts --------------------------------------------------------------------


class Probe:
    """Collects only, and writes how many tests its session would measure in its own process,
    leaving out those a skip mark skips: a run with none is not relaunched under valgrind, so a
    session that would count nothing says so in seconds, not after minutes of counting."""

    def __init__(self, config, settings, role: Role):
        self.settings = settings
        self.out = role.need("out")

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config) -> None:
        no_xdist(config)  # the controller of xdist workers collects nothing itself

    def pytest_collection_finish(self, session) -> None:
        counted = [item for item in session.items if measured_here(item) and not _skipped(item)]
        with open(self.out, "w", encoding="utf-8") as fh:
            json.dump(Found(len(counted)), fh)


def _skipped(item) -> bool:
    """Whether a skip or skipif mark skips the test (pytest's own evaluation of them)."""
    try:
        from _pytest.skipping import evaluate_skip_marks  # private: looked up, and optional

        return evaluate_skip_marks(item) is not None
    except Exception:  # another pytest, or a condition that raises: its session will say
        return False


class _UnderValgrind:
    """A session under valgrind whose tests are counted in its own process (a layout pass, the
    counted session): its timeouts stretched, Ctrl-C ignored until its session started (an
    interrupt in start-up is a traceback), and callgrind's instrumentation kept on from one counted
    test to the next and switched off before anything else (a test counted elsewhere, the
    session's end): each switch makes callgrind translate again all the code that runs after it
    (``Counter.pause``)."""

    settings: Settings

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config) -> None:
        stretched_timeouts.stretch(config)  # before pytest-timeout reads its limits
        super().pytest_configure(config)  # type: ignore[misc]

    def pytest_sessionstart(self, session) -> None:
        lifetime.take_ctrl_c()
        super().pytest_sessionstart(session)  # type: ignore[misc]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.settings.instrument.stays_on = True
        try:
            return (yield from super().pytest_runtest_protocol(item, nextitem))  # type: ignore[misc]
        finally:
            if nextitem is None or not measured_here(nextitem):
                self.settings.instrument.pause()


class _Pass(MeasuringSession):
    """A pass before the counted session: only the tests measured in the session's process, no
    xdist workers (pytest-benchmark switches itself off in them); at its end it writes what it
    found for each test, by pytest-benchmark's name for it, to ``role.out``."""

    memory_pass = False  # the memory pass's calls are the counted session's
    profiles = PROFILE_NONE  # only the counted session's are judged and saved
    without_xdist = True

    def __init__(self, config, settings, role: Role):
        super().__init__(config, settings)
        self.role = role
        self.in_progress = crash.Running(role.running)

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        super().pytest_collection_modifyitems(session, config, items)
        config.hook.pytest_deselected(items=[item for item in items if not measured_here(item)])
        items[:] = [item for item in items if measured_here(item)]

    def finish(self, session, bs):
        ran = [b for b in adapter.benchmarks(bs) if adapter.ran(b)]
        found = {"exitstatus": int(session.exitstatus), "tests": self.found(ran)}
        atomic.write_text(self.role.need("out"), json.dumps(found))
        return None

    def found(self, ran: list) -> dict:
        raise NotImplementedError


class KernelPass(_Pass):
    """At full speed (time mode): the kernel figures of each test."""

    def found(self, ran: list) -> dict:
        return {
            b.fullname: kernel.keys_of(b.extra_info) for b in ran if "kernel_source" in b.extra_info
        }


class LayoutPass(_UnderValgrind, _Pass):
    """Counted under valgrind in another layout: the rounds of each test."""

    def found(self, ran: list) -> dict:
        return {b.fullname: adapter.rounds(b) for b in ran if adapter.rounds(b)}


class Counted(_UnderValgrind, MeasuringSession):
    """The user's session run again under valgrind by a ``Launcher``."""

    profiles = PROFILE_HANDED_OVER  # read at full speed at the end (``_BeforeSaving``)
    recounts = True

    def __init__(self, config, settings, role: Role):
        # started by a side of a counted run against the base: the base's install (or the
        # head's stand-in) passed on in its role
        super().__init__(config, settings, on_a_side=role.base_dir is not None)
        self.role = role
        self.in_progress = crash.Running(role.running)
        self.forked = (
            forked_layouts.Forked(role.layouts, _log, _running, measured_here)
            if role.forked and role.layouts
            else None
        )
        ended = self.forked.ended if self.forked is not None else _ended
        self.layouts = _BeforeSaving(role, settings.instrument, ended, self.forked)
        config.pluginmanager.register(self.layouts, "pytest-concurrency-layouts")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session) -> None:
        """After the collection, before the first test: the other layouts fork from here (pytest's
        own loop then runs this session's tests)."""
        if self.forked is None or session.testsfailed or session.config.option.collectonly:
            return  # collection errors: pytest's loop stops at once, with nothing to count
        self.forked.start(session, self)

    def counted_elsewhere(self, fullname: str) -> dict:
        """A plain test's kernel figures from the kernel pass (its layouts come at the end)."""
        found = (_load(self.role.kernel) if self.role.kernel else {}).get(fullname)
        return dict(found or kernel.not_measured(kernel.UNDER_VALGRIND))

    def may_save(self) -> str | None:
        refused = super().may_save()
        if refused:
            return refused
        if self.role.launcher is not None and launcher_gone(self.role.launcher):
            return "the run that started this counted session is gone (killed)"
        if self.layouts.crashed:  # the launcher stops the run on it: nothing of it is written
            return self.layouts.crashed
        return None

    def interrupted_at_the_end(self) -> str | None:
        return "while the other layouts were counted" if self.layouts.interrupted else None

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for line in self.layouts.notes:
            terminalreporter.write_line(f"pytest-concurrency: {line}")
        super().pytest_terminal_summary(terminalreporter)


class _BeforeSaving:
    """In a counted session, at its end and before pytest-benchmark writes anything: wait for the
    layout passes counted beside it, give each test its rounds in them (``layouts``), and read
    each test's profile, handed over by ``after_rounds``, outside valgrind."""

    POLL_S = 0.2

    def __init__(self, role: Role, instrument, ended=None, forked=None):
        self.role = role
        self.instrument = instrument
        self._ended = ended or _ended  # rounds file -> whether its pass has ended
        self._forked = forked  # forked_layouts.Forked, when this session forked them
        self.interrupted = False
        self.notes: list[str] = []  # how the layouts went, for the session's summary
        self.crashed: str | None = None  # a test that ended a layout pass's process
        self.started = time.monotonic()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self.instrument.pause()  # a loop -x stopped left it on
        bs = adapter.session(session.config)
        if self._forked is not None and exitstatus == Exit.INTERRUPTED:
            self._forked.stop()
        if bs is not None and exitstatus != Exit.INTERRUPTED:
            if self.role.layouts:
                self._join(session.config, adapter.benchmarks(bs))
            if not self.interrupted:
                self.instrument.received_apart([b.extra_info for b in adapter.benchmarks(bs)])
        yield

    def _join(self, config, benchmarks) -> None:
        waiting = self._forked.waiting if self._forked is not None else ()
        try:
            if not self._wait([out for out in self.role.layouts if out not in waiting]):
                return  # killed: nothing of this session becomes a result (may_save)
            if waiting:
                assert self._forked is not None
                self._forked.tell(self._disagreeing(benchmarks, self.role.layouts[0]))
                if not self._wait(waiting):
                    return
        except KeyboardInterrupt:  # forwarded by the launcher, which stops the passes too
            if self._forked is not None:  # ... or this session, which forked them
                self._forked.stop()
            self.interrupted = True  # the session's end says so and writes nothing
            adapter.nothing_saved(config)
            return
        for bench in benchmarks:
            others = [
                _load(path)[bench.fullname]
                for path in self.role.layouts
                if bench.fullname in _load(path)
            ]
            if others:  # the gate judges the median over layouts
                bench.extra_info["layouts"] = others
        self._say_how_they_went()

    def _wait(self, outs) -> bool:
        """Wait for the passes that write ``outs`` to end; False if the launcher is gone."""
        while not all(map(self._ended, outs)):
            if self.role.launcher is not None and launcher_gone(self.role.launcher):
                return False
            time.sleep(self.POLL_S)
        return True

    def _disagreeing(self, benchmarks, first: str) -> list[str]:
        """The tests counted here that layout 1 (which writes ``first``) did not count alike
        (``layouts.medians_agree``): the third layout counts these; of the others, the median of
        three is the first two's."""
        theirs = _load(first)
        names = [
            b.fullname
            for b in benchmarks
            if adapter.rounds(b)
            and not (
                b.fullname in theirs
                and layouts.medians_agree(adapter.rounds(b), theirs[b.fullname])
            )
        ]
        counted = sum(bool(adapter.rounds(b)) for b in benchmarks)
        self.notes.append(
            f"the third layout counted {len(names)} of {counted} tests: the others counted alike "
            f"in the first two (within {layouts.AGREE:.1%}), whose median of three is theirs"
        )
        return names

    def _say_how_they_went(self) -> None:
        counted = 0
        for n, out in enumerate(self.role.layouts, 1):
            found = _found(out)
            counted += found is not None
            nodeid = crash.crashed(_running(out)) if found is None else None
            if nodeid:
                self.crashed = f"{nodeid} ended layout {n}'s counted pass"
            if found is None or found["exitstatus"] != Exit.OK:  # its failed tests lack this layout
                how = "wrote no rounds" if found is None else f"exited {found['exitstatus']}"
                self.notes.append(
                    f"layout {n}'s counted pass {how}: its tests were judged on the layouts that "
                    "counted them. Its last lines:\n  "
                    + child_sessions.log_tail(_log(out), 15, "\n  ")
                )
        self.notes.append(
            f"{counted} more layout{'s' * (counted != 1)} counted beside this session "
            f"({time.monotonic() - self.started:.0f} s since it started)"
        )


@functools.cache  # read once a session, not once a test
def _load(path: str) -> dict:
    """The figures of each test a pass wrote (by pytest-benchmark's name for it)."""
    found = _found(path)
    return {} if found is None else found["tests"]
