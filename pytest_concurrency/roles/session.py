"""The measuring session: a pytest session whose benchmarks the plugin measures and judges.

``MeasuringSession`` is the user's session when it measures in its own process (time, or counted in
workers), and the base of the roles that are sessions too: the passes and the counted session
(counting.py) and the sides of --concurrency-against (against.py). Its hooks, in pytest's order:
configure (read the baseline now: a bad one must not cost a whole run first), session start
(the instrument's counter becomes pytest-benchmark's timer), collection (the status line; cases
measured ahead in lanes), each test (plain tests watched or run apart), and the session's end,
a straight pipeline: the records -> the gate -> the baseline saved -> the reports
(session_end.py), shown in the terminal summary.
"""

import functools
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from .. import benchmark_adapter as adapter
from .. import plain_tests, session_end, sharding
from ..backends import watchdog
from ..exit_codes import Exit
from ..gate import save
from ..measure import PROFILE_HERE, kernel, records
from ..report import progress
from ..settings import with_jobs
from . import crash
from .role import AT_START_UP

if TYPE_CHECKING:
    from ..runner import isolate
    from ..store.history import Baseline
    from .arbiter import Arbiter
    from .remeasure import SecondSessions

MARKER = "concurrency"


#: The options that ask for a gate (a baseline read or saved, a report, a base side).
GATE_OPTIONS = (
    "concurrency_baseline",
    "concurrency_save_baseline",
    "concurrency_report_md",
    "concurrency_against",
)


def gate_asked(option) -> bool:
    """Whether one of ``GATE_OPTIONS`` is given, in a parsed namespace (``config.option``, or
    ``early_config.known_args_namespace`` before the rest is parsed)."""
    return any(getattr(option, name, None) for name in GATE_OPTIONS)


class MeasuringSession:
    """The role of a session that measures: it holds the session's state, not module globals."""

    #: Whether users' tests get the memory pass here (a pass before a counted session runs only
    #: for what it writes).
    memory_pass = True
    #: Whether a count that moved is counted again in a session started otherwise: in a counted
    #: session (roles/recount.py), not in one at full speed whose cases are counted in workers.
    recounts = False
    profiles = PROFILE_HERE  # where a counted test's last round's profile is read (``after_call``)
    #: Whether its tests run in this process whatever the user's -n (a pass, a second session):
    #: in xdist's workers pytest-benchmark is off.
    without_xdist = False

    def __init__(self, config, settings, watched: bool = False, on_a_side: bool = False):
        self.config = config
        self.settings = settings
        self.watched = watched  # the user's own process: a watcher names a test that ends it
        #: a side of a counted run against the base: its save is the run's own file, not a
        #: baseline of the user's (roles/counted_against.py), so where it went is not said
        self.on_a_side = on_a_side
        self.progress: progress.Progress | None = None
        self.running: str | None = None  # the test that started last: what a Ctrl-C interrupted
        self.baseline: Baseline | None = None  # --concurrency-baseline, read at start-up
        self.other_shards = 0  # the baseline's benchmarks left to other shards (gate/shards.py)
        self.positions: dict[str, int] = {}  # node id -> its place in the whole collection
        self.calibration: dict | None = None  # the machine's speed at start-up
        self.outcome: session_end.SessionOutcome | None = None
        self.pool: isolate.WorkerPool | None = None  # the workers' pool, made on first use
        self.ahead = None  # the cases measured ahead in lanes, when counting in several
        self.session = None
        self.tally = Tally()  # what became of the benchmark tests: why nothing was judged
        #: the suspects' tests run again in a fresh process (against a stored time baseline)
        self.second_sessions: SecondSessions | None = None
        #: what time left undecided counted on both sides (against a stored time baseline)
        self.arbiter: Arbiter | None = None
        self.written: list[str] = []  # what the session's end wrote: what a Ctrl-C after it left
        self.started = False  # every plugin's session start done: a Ctrl-C ends in sessionfinish
        # the first Ctrl-C (or SIGTERM) from then on: the session is interrupted, whatever exit
        # status pytest hands its end; pytest-benchmark's own saves are off from that moment
        self.stop = watchdog.StopFlag(lambda: adapter.nothing_saved(config))
        self.said_interrupted = False  # the summary said where it was interrupted: said once
        #: a role's ``running`` file: the test its process runs, so one that ends it is named
        self.in_progress = crash.Running(None)

    # -- start-up ------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before xdist's own pytest_configure starts its workers
    def pytest_configure(self, config) -> None:
        if self.without_xdist:
            no_xdist(config)
        if xdist_active(config) and self.settings.instrument.fresh_process:
            self.settings = lanes_instead_of_xdist(config, self.settings)
        settings = self.settings
        if settings.baseline is not None:
            from ..store import baseline

            # read now: a bad baseline must not cost a whole benchmark run first (a file the save
            # would refuse to replace was refused with the settings: outputs.py)
            try:
                self.baseline = baseline.load(settings.baseline)
            except baseline.BaselineError as exc:
                raise pytest.UsageError(str(exc)) from None
            if settings.shard is not None:
                from ..gate import shards

                self.baseline, self.other_shards = shards.mine(self.baseline, settings.shard)
        if (settings.baseline or settings.save_baseline) and settings.instrument.machine_bound:
            from ..gate import calibrate

            self.calibration = calibrate.measure()
        if self.baseline is not None and settings.instrument.machine_bound:
            from .arbiter import Arbiter
            from .remeasure import SecondSessions

            # a regression must reproduce before it fails the build
            self.second_sessions = SecondSessions(config, settings)
            self.arbiter = Arbiter(config, settings)
        elif self.baseline is not None and self.recounts:
            from .remeasure import SecondSessions

            # a count that moved must move in a second start-up too (roles/recount.py)
            self.second_sessions = SecondSessions(config, settings, counted=True)
        if xdist_active(config) and self.measures_benchmarks(config):
            # benchmarks in parallel would measure each other: the project's own -n (often in its
            # addopts) is set aside for this session, not refused
            workers = config.getoption("numprocesses", None) or len(config.getoption("tx") or [])
            no_xdist(config)
            print(
                f"pytest-concurrency: pytest-xdist's -n {workers} set aside: benchmarks are measured "
                "one at a time in this process (in parallel they would measure each other)",
                flush=True,
            )

    @staticmethod
    def measures_benchmarks(config) -> bool:
        """Whether this session is run to measure: --benchmark-only, or a gate asked for. A plain
        ``pytest -n auto`` of a project's tests keeps its workers, in which pytest-benchmark
        switches itself off, as it does without this plugin."""
        if config.getoption("benchmark_disable", False):
            return False
        return bool(config.getoption("benchmark_only", False)) or gate_asked(config.option)

    def pytest_sessionstart(self, session) -> None:
        # after every pytest_configure: pytest-benchmark's made its session in one (trylast)
        self.session = session
        measure_with(session.config, self.settings.instrument)
        # a counted session's table is left out whole (measure_with): its samples are counts
        if not self.settings.benchmark_table and self.settings.instrument.benchmark_timer() is None:
            cases_left_out(session.config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session) -> None:
        self.started = True
        self.stop.arm()  # after every session start: a side's or a counted one's take_ctrl_c

    @pytest.hookimpl(tryfirst=True)  # before pytest-benchmark skips what has no fixture
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        if not config.pluginmanager.is_blocked("pytest_benchmark"):  # --codspeed blocks it
            plain_tests.measure_whole_bodies(items)
        # the whole collection's order, before -k or a shard takes from it: a merge's order
        self.positions = {item.nodeid: i for i, item in enumerate(items)}
        if self.settings.only is not None:  # the counted run of what time left undecided
            only_these(str(self.settings.only), config, items)

    def pytest_collection_finish(self, session) -> None:
        if session.config.option.collectonly:
            return
        self.tally.collected = {item.nodeid for item in session.items if measures(item)}
        total = sum(
            "concurrency_benchmark" in getattr(item, "fixturenames", ()) for item in session.items
        )
        config = session.config
        terminal = config.pluginmanager.getplugin("terminalreporter") is not None
        if total and progress.wanted(terminal, config.getoption("verbose")):
            capture = config.pluginmanager.getplugin("capturemanager")
            self.progress = progress.Progress(config.get_terminal_writer, capture, total)
        settings = self.settings
        if total and settings.jobs > 1 and settings.instrument.fresh_process:
            from .. import cases

            self.ahead = cases.measure_ahead(self.workers(), session.items, settings)
        if self.watched and self.measures_here(session):
            from . import watcher

            watcher.start(config, isolated=settings.isolate)

    def measures_here(self, session) -> bool:
        """Whether a benchmark test runs in this process, where a test that ends it (``os._exit``,
        a segfault) ends the session: time mode, pytest-benchmark on (not off by
        --benchmark-disable, nor in an xdist worker or beside its controller's workers), and a
        test whose call is not forked. Isolated, the body of a ``concurrency_benchmark`` test
        still runs here (its workloads run in the workers)."""
        settings, config = self.settings, session.config
        return (
            not settings.instrument.fresh_process
            and adapter.measures(config)
            and not xdist_active(config)
            and any(
                measures(item) and not plain_tests.runs_apart(item, settings)
                for item in session.items
            )
        )

    def pytest_deselected(self, items) -> None:
        self.tally.deselected += sum(map(measures, items))

    def pytest_runtest_logreport(self, report) -> None:
        if report.nodeid in self.tally.collected:
            self.tally.seen(report)

    def workers(self):
        """This session's pool of worker processes (--concurrency-isolate, counted cases)."""
        if self.pool is None:
            from ..runner import isolate

            self.pool = isolate.WorkerPool()
        return self.pool

    # -- each test -----------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        with self.stop.set_aside():  # a test's event loop sees Python's own Ctrl-C handler
            return (yield)

    def pytest_runtest_setup(self, item) -> None:
        self.running = item.nodeid

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.in_progress.start(nodeid)

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.in_progress.done()

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        """A user's plain test: isolated, its call runs in a child forked for it; in-process,
        under a watch for what no ``backend.run`` deadline covers."""
        settings = self.settings
        timeout = plain_tests.bound(pyfuncitem, settings)
        if plain_tests.runs_apart(pyfuncitem, settings):
            prepare = functools.partial(self.prepare, pyfuncitem)
            apart = plain_tests.call_apart(pyfuncitem, settings.instrument, timeout, prepare)
            # None: in the child forked for it, which the session watches: the call itself
            return apart if apart is not None else plain_tests.call_whole_body(pyfuncitem)
        watched = plain_tests.call_watched(pyfuncitem, timeout)
        return watched if watched is not None else plain_tests.call_whole_body(pyfuncitem)

    def prepare(self, item) -> None:
        """What the plugin reads around a test's rounds, set up (``plain_tests.before_call``)."""
        settings = self.settings
        if plain_tests.bound(item, settings) and not plain_tests.runs_apart(item, settings):
            plain_tests.note_rounds(item)  # for its silence watch (apart: the child's signs)
        memory = marker_kwarg(item, "memory")
        wanted = memory if memory is not None else settings.memory_plain
        plain_tests.before_call(
            item, settings.instrument, wanted and self.memory_pass, settings.paired
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        settings = self.settings
        instrument = settings.instrument
        if not plain_tests.runs_apart(item, settings):  # else in the child forked for its call
            self.prepare(item)
        self.before_call(item)  # after: a side's turns are not in the rounds' kernel figures
        outcome = yield
        plain_tests.after_call(
            item, instrument, outcome.excinfo is None, self.counted_elsewhere, self.profiles
        )
        plain_tests.control_figures(item)
        bench = getattr(item, "funcargs", {}).get("benchmark")
        threshold = marker_kwarg(item, "threshold")
        if bench is not None and threshold is not None:
            from ..settings import parse_percent

            origin = f"@pytest.mark.{MARKER}(threshold=...) on {item.nodeid}"
            bench.extra_info["threshold"] = parse_percent(threshold, origin)
        if bench is not None:
            self.after_call(item, bench)

    def before_call(self, item) -> None:
        """A role's own work before a test's call (a side takes turns)."""

    def after_call(self, item, bench) -> None:
        """A role's own work after it (a side records its turns)."""

    def counted_elsewhere(self, fullname: str) -> dict:
        """What passes before this session found for a plain test counted here: none (see
        counting.Counted), so its kernel figures read as not measured."""
        return dict(kernel.not_measured(kernel.UNDER_VALGRIND))

    # -- the end -------------------------------------------------------------------------------

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        """pytest-benchmark saves its run (--benchmark-autosave/-save/-json) at the session's end,
        whatever its status: a run the user stopped must not become the history it compares with."""
        adapter.nothing_saved(self.config)
        if not self.started:  # in a plugin's configure or session start: pytest has no end for it
            print(f"\npytest-concurrency: {AT_START_UP}", file=sys.stderr, flush=True)

    def interrupted(self) -> str:
        """What a Ctrl-C in this session's end (judging, saving, reporting: after pytest's own
        handling of one, which ends in ``pytest_sessionfinish``) interrupted, and what it had written."""
        if not self.started:
            return AT_START_UP
        if self.said_interrupted:  # a Ctrl-C pending after the summary said where (a second one)
            return ""
        if not self.written:
            return (
                "interrupted at the session's end: no baseline, report, verdict or rounds written"
            )
        return "interrupted after " + " and ".join(self.written)

    def interrupted_at_the_end(self) -> str | None:
        """Where a Ctrl-C landed after the tests and before this session's end (a role that waits
        there), or None."""
        return None

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        # pytest-benchmark's own sessionfinish (a hookwrapper) has already collected the stats.
        bs = adapter.session(session.config)
        if bs is None or session.config.option.collectonly:
            return
        late = self.interrupted_at_the_end()
        stopped = exitstatus == Exit.INTERRUPTED or self.stop.signum is not None
        if stopped or late:  # what it measured is not a result
            self.close(now=True)
            where = late or (f"in {self.running}" if self.running else "before the first test")
            session.exitstatus = Exit.INTERRUPTED
            self.outcome = session_end.SessionOutcome(
                [],
                messages=[f"interrupted {where}: no baseline, report, verdict or rounds written"],
                interrupted=True,
            )
            return
        self.outcome = self.finish(session, bs)
        # 1 for a failure, 7 for a baseline to record again; and a gate that judged
        # nothing says so with its own status, even when pytest ran no test at all (5)
        if self.outcome is not None:
            session.exitstatus = self.outcome.status(session.exitstatus)
        shard = sharding.of(session.config)
        quiet = (Exit.OK, Exit.NO_TESTS_COLLECTED)
        if shard is not None and shard.empty and session.exitstatus in quiet:
            session.exitstatus = Exit.OK  # its tests are all in other shards
        if self.settings.verdicts is not None and self.outcome is not None:
            session.exitstatus = session_end.write_verdicts(
                self.settings,
                self.outcome,
                self.written,
                int(session.exitstatus),
                tests_failed=session.testsfailed > 0,
                positions=self.positions,
                shard=shard,
            )

    def finish(self, session, bs) -> session_end.SessionOutcome | None:
        """The session's end as a pipeline (session_end.py), told what this role knows; a role
        that writes something else at its end (a pass, a side) does that instead or first."""
        recs = records.from_session(adapter.benchmarks(bs))
        node_ids = records.node_ids(adapter.benchmarks(bs))
        again = self.second_sessions
        refused = self.may_save() or save.refusal(list(self.tally.failed))
        saving = self.settings.save_baseline and recs and not refused
        judging = self.settings.save_baseline or self.settings.baseline
        commit = adapter.commit_info(session.config) if judging else None
        ended = session_end.Ended(
            records=recs,
            node_ids=node_ids,
            document=adapter.document(session.config, bs, commit) if saving else None,
            code=adapter.code_identity(commit) if commit is not None else None,
            nothing_judged=self.nothing_judged(),
            refused=refused,
            shard=sharding.of(session.config),
            other_shards=self.other_shards,
            measure_again=functools.partial(again.for_suspects, node_ids=node_ids)
            if again
            else None,
            count_undecided=functools.partial(
                self.arbiter.for_stored, base=self.baseline, node_ids=node_ids
            )
            if self.arbiter is not None and self.baseline is not None
            else None,
            written=self.written,
            saved_for_the_run=self.on_a_side,
        )
        return session_end.finish(self.settings, self.baseline, self.calibration, ended)

    def nothing_judged(self) -> str:
        """Why this session recorded no benchmark, in one line."""
        if self.config.pluginmanager.is_blocked("pytest_benchmark"):
            return (
                "pytest-benchmark is switched off: pytest-codspeed measures instead (CODSPEED_ENV "
                "is set, or --codspeed was given without a gate's option), and the gates judge "
                "pytest-benchmark's rounds; unset CODSPEED_ENV, or give --codspeed with a gate's "
                "option (--concurrency-baseline, --concurrency-save-baseline, ...)"
            )
        disabled = self.config.getoption("benchmark_disable", False)
        return self.tally.why(disabled)

    def may_save(self) -> str | None:
        """Why this session must not write a baseline, or None (a counted one whose launcher is gone)."""
        if self.stop.signum is not None:  # a Ctrl-C at the end that a user's code swallowed
            return "the session was interrupted (a Ctrl-C or SIGTERM reached it)"
        return None

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.outcome is not None:
            session_end.show(terminalreporter, self.outcome)
            self.said_interrupted = self.outcome.interrupted
        left = [t.name for t in watchdog.threads_left()]
        if left:  # or the session seems to hang after its summary, with nothing said
            bound = plain_tests.exit_bound()
            waits = (
                f"here for at most {bound:g} s of them (then it exits without them). "
                if bound
                else "so it may not end. "
            )
            terminalreporter.write_line(
                f"pytest-concurrency: tests left threads running ({', '.join(left)}); Python waits for "
                f"them before this process exits, {waits}Join them in the test, or run with "
                "--concurrency-isolate, where a test's threads end with the child process it runs in.",
                yellow=True,
            )

    def pytest_unconfigure(self, config) -> None:
        self.stop.disarm()
        self.close()
        if self.session is not None:  # the status a process kept alive by users' threads exits with
            plain_tests.session_ended(int(self.session.exitstatus))

    def close(self, now: bool = False) -> None:
        if self.ahead is not None:
            self.ahead.close()
        if self.pool is not None:
            self.pool.close(now)


def measure_with(config, instrument) -> None:
    """Make the instrument's counter pytest-benchmark's timer, for every benchmark."""
    timer = instrument.benchmark_timer()
    bs = adapter.session(config)
    if timer is None or bs is None:
        return
    adapter.use_timer(bs, timer)

    # its table would print every count as seconds; ours say what they are
    def display(tr) -> None:
        tr.write_line(
            f"pytest-benchmark's table left out: the samples are {instrument.kind}, not seconds "
            "(see the tables below)"
        )

    adapter.replace_table(bs, display)


def cases_left_out(config) -> None:
    """pytest-benchmark's table without the built-in workloads' cases: a row of 12 columns a
    case (292 columns wide for the suite), where the comparison tables below give each model's
    figures in 100. A user's own benchmark tests keep their rows, and its regression check
    (--benchmark-compare-fail) runs as before. --concurrency-benchmark-table shows every row."""
    bs = adapter.session(config)
    if bs is None:
        return

    def say(left: int, tr) -> None:
        if left:
            tr.write_line(
                f"pytest-benchmark's table: {left} workload cases left out "
                "(--concurrency-benchmark-table)"
            )

    adapter.table_without(bs, lambda bench: "concurrency_case" in (bench.get("params") or {}), say)


def marker_kwarg(node, name: str):
    marker = node.get_closest_marker(MARKER)
    return marker.kwargs.get(name) if marker else None


def lanes_instead_of_xdist(config, settings):
    """``-n N`` in a counted session: the cases are counted in N lanes of this session (as with
    ``--concurrency-jobs=N``) rather than in N xdist workers, where pytest-benchmark switches
    itself off. Each case is counted in a process forked for it either way, so the counts and
    verdicts are a serial run's. Runs before xdist's own pytest_configure."""
    lanes = len(config.getoption("tx") or []) or 1
    no_xdist(config)
    if not (config.getoption("concurrency_jobs") or config.getini("concurrency_jobs")):
        settings = with_jobs(settings, lanes)
    print(
        f"pytest-concurrency: -n {lanes} with --concurrency-measure={settings.instrument.kind}: the cases "
        f"are counted in {settings.jobs} lanes of this session, not in xdist workers",
        flush=True,
    )
    return settings


def no_xdist(config) -> None:
    """This process runs its tests itself, not in xdist workers."""
    config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0


def xdist_active(config) -> bool:
    return (
        bool(getattr(config.option, "numprocesses", None))
        or getattr(config.option, "dist", "no") != "no"
    )


def only_these(path: str, config, items: list) -> None:
    """A session the plugin started for some of the user's tests: only the node ids in the JSON
    file ``path`` stay collected (the rest deselected, as -k would)."""
    with open(path, encoding="utf-8") as fh:
        wanted = set(json.load(fh))
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in wanted])
    items[:] = [item for item in items if item.nodeid in wanted]


def measures(item) -> bool:
    """Whether a test measures a benchmark: pytest-benchmark's fixture, directly or through
    ``concurrency_benchmark``."""
    names = getattr(item, "fixturenames", ())
    return "benchmark" in names or "concurrency_benchmark" in names


@dataclass
class Tally:
    """What became of a session's benchmark tests, for the one line that says why nothing was
    judged: a gate that judged nothing must not pass quietly."""

    collected: set = field(default_factory=set)  # node ids of the benchmark tests selected
    deselected: int = 0
    skipped: dict = field(default_factory=dict)  # node id -> why
    failed: dict = field(default_factory=dict)  # node id -> None, in the order they failed

    def seen(self, report) -> None:
        if report.skipped and report.nodeid not in self.failed:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
            self.skipped[report.nodeid] = str(reason).removeprefix("Skipped: ")
        elif report.failed:
            self.failed[report.nodeid] = None

    def why(self, disabled: bool) -> str:
        n = len(self.collected)
        if disabled:
            return "benchmarks are disabled (--benchmark-disable): no round was measured"
        if not n and self.deselected:
            return (
                f"all {self.deselected} benchmark test{'s' * (self.deselected != 1)} were "
                "deselected (-k, -m, --deselect or a plugin)"
            )
        if not n:
            return (
                "no test uses a benchmark fixture (pytest-benchmark's benchmark, or "
                "concurrency_benchmark): there is nothing to measure"
            )
        if len(self.skipped) == n:
            first = next(iter(self.skipped.values()))
            return f"all {n} benchmark test{'s' * (n != 1)} were skipped (the first: {first})"
        if self.failed:
            return (
                f"{len(self.failed)} of {n} benchmark tests failed and the rest recorded no round"
            )
        return f"none of the {n} benchmark tests recorded a round (did they call the fixture?)"
