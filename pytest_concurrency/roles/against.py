"""``--concurrency-against=SPEC``: the same tests on the base side, round for round, in one run.

The process the user started measures nothing itself. It installs the base side apart
(runner/sides.py), then runs two pytest sessions with the same command line, started alike
(one hash seed, no address-space randomization, the same environment; which side each is, it is
told on its command line, ``roles.Role``): the head (side B, this code; its output is the run's) and the base (side A, its code
imported first; its output in a log). They take turns round by round (runner/lockstep.py); each
writes its rounds and what it imported to a file, and this process judges each benchmark on
the per-quad ratios (gate/paired.py). What moved runs again in a second pair of sessions, and is
judged on both pairs: two processes of the same code can differ for their whole life. What the
two pairs left inconclusive runs in a third, and the pair least like the others is left out.

Why two sessions alike, not the user's session against one more: the user's process holds
more (the coordinator, the collection of both) and its rounds read 1-2% slower than the
other side's in an A/A here, every time; two processes that differ in their hash seed and
address layout differed by up to 4%, and a base side with a larger environment (its
``PYTHONPATH``) by about 3% (gevent, the same code on both sides): the head gets one as long.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .. import benchmark_adapter as adapter
from .. import lifetime, session_end
from ..exit_codes import NOT_RUN, Exit, of_run
from ..gate import paired
from ..measure import records
from ..report import terminal
from ..runner import lockstep, sides
from ..store import atomic
from . import child_sessions, crash
from .arbiter import Arbiter
from .argv import HEAD_ONLY, own_coverage_data, without
from .role import AGAINST_INTERRUPTED, SIDE, Role
from .session import MeasuringSession, only_these

MIN_ROUNDS = paired.MIN_ROUNDS  # a benchmark's rounds on each side, at least
MIN_ROUND_S = 0.002  # a round's time, at least (pytest-benchmark's --benchmark-min-time)
#: The head's session ended so, and said why: there is nothing to judge, nor to run again.
HEAD_SAID_WHY = (Exit.INTERRUPTED, Exit.USAGE_ERROR, Exit.NO_TESTS_COLLECTED)
#: What a base side that wrote its rounds may exit with: it ran its tests through.
_BASE_RAN = (Exit.OK, Exit.TESTS_FAILED, Exit.NO_TESTS_COLLECTED, Exit.RERECORD_BASELINE, None)
#: How long the base side may run on after the head ended (its last tests, unpaired, or a stall).
BASE_GRACE_S = 300.0


def refuse(settings) -> None:
    """What --concurrency-against cannot pair round by round (yet): a usage error naming the ways out."""
    if settings.isolate:
        raise pytest.UsageError(
            "--concurrency-against with --concurrency-isolate: workloads timed in worker processes "
            "are not paired round by round yet; run without --concurrency-isolate, or count both "
            "sides (--concurrency-measure=instructions), which needs no turns"
        )


# -- the run the user started --------------------------------------------------------------------


class Orchestrator:
    """The process the user started with --concurrency-against: it measures nothing itself, runs
    both sides' sessions and judges them; its exit status is the run's."""

    def __init__(self, config, settings):
        self.config = config
        self.settings = settings
        self.written: list[str] = []  # the user's files this process wrote (the head: its own)

    def main(self) -> int:
        return orchestrate(self.config, self.settings, self.written)

    def interrupted(self) -> str:
        """A Ctrl-C that no side's session said a line for (plugin.CtrlCAnywhere)."""
        return (
            "interrupted after " + " and ".join(self.written)
            if self.written
            else AGAINST_INTERRUPTED
        )


def orchestrate(config, settings, written: list[str]) -> int:
    """Install the base side, run both sides in turns, judge the pairs; the run's exit status.
    ``written``: each file of the user's this process wrote, added as it is written."""
    from . import counted_against

    # counted, each side is a whole counted run: nothing refused
    if settings.instrument.machine_bound:
        refuse(settings)
    root = Path(str(config.invocation_params.dir))
    scratch = sides.run_directory()
    try:
        try:
            spec = sides.parse(settings.against, root)
            site = sides.install(spec, root, Path(scratch.name), log=lambda m: print(m, flush=True))
            sides.same_length(site).mkdir()  # the head's stand-in for it
        except sides.SideError as exc:
            raise pytest.UsageError(f"--concurrency-against={settings.against}: {exc}") from None
        run = sides.Run(spec, site, Path(scratch.name), root)
        if not settings.instrument.machine_bound:  # counts need no turns: each side counted whole
            return counted_against.run(config, settings, run, written)
        return _run_sides(config, settings, run, written)
    finally:
        if settings.against_keep:
            _keep(Path(scratch.name), settings.against_keep)
        scratch.cleanup()


def _ended_in(pair: "_Pair", side: str) -> str:
    """Where a side's process ended, if in a test (``os._exit``, a segfault): its name, and how."""
    nodeid = crash.crashed(pair.running(side))
    code = pair.codes.get(side)
    if nodeid is None:
        return ""
    return f": {nodeid} ended its process ({crash.how(code) if code is not None else 'killed'})"


def _keep(directory: Path, keep: Path) -> None:
    """With ``--concurrency-against-keep=DIR``, each pair's rounds and logs (``1/side-A.json``,
    ``1/base-side.log``, ...; counted: ``base.json``, ``head.json``, ``base-side.log``) are copied
    into DIR before the run's directory goes: to look into a verdict, or judge the same sessions
    again by another rule (evidence/against_evidence.py)."""
    for path in [*directory.glob("[0-9]*/*"), *directory.glob("*")]:
        if path.is_file() and path.suffix in (".json", ".log"):
            target = Path(keep) / path.relative_to(directory)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def _run_sides(config, settings, run: sides.Run, written: list[str]) -> int:
    args = list(config.invocation_params.args)
    print(
        f"pytest-concurrency: this code (head) against {run.spec} (base), round for round in turns; "
        "the head's session follows",
        flush=True,
    )
    # with pytest's cache plugin off (-p no:cacheprovider) a cache_dir option is unknown to the
    # sides' pytest: a project whose warnings are errors (yarl's) failed to start
    cached = config.pluginmanager.has_plugin("cacheprovider")
    cache = str(run.directory / "1" / "cache") if cached else None
    lines = command_lines(args, True, cache, users_cache_dir(config) if cached else None)
    first = _run_pair(settings, run, 1, lines)
    try:
        again: list = []
        if first.codes[lockstep.B] not in HEAD_SAID_WHY:
            again = _again(settings, run, args, first, cached)
        return _judge(settings, run, first, again, Arbiter(config, settings), written)
    except KeyboardInterrupt:  # the head's session has ended, and said what it wrote
        print(
            "\npytest-concurrency: interrupted after the head's session: no verdict against the "
            "base side written",
            file=sys.stderr,
            flush=True,
        )
        return Exit.INTERRUPTED


class _Pair:
    """One pair of sessions, base and head: their exit statuses, outputs and what went wrong."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.codes: dict = {}
        self.errors: list = []
        self.docs: dict = {}
        self._parsed: dict = {}  # each side's doc, parsed once (records.Document)
        self.log = directory / "base-side.log"

    def running(self, side: str) -> str:
        """Where ``side``'s session keeps the test in progress, for a test that ends it (crash.py)."""
        return crash.path(str(self.directory), f"side-{side}")

    def read(self) -> None:
        for side in (lockstep.A, lockstep.B):
            out = self.directory / f"side-{side}.json"
            if out.exists():
                self.docs[side] = json.loads(out.read_text())
                self._parsed[side] = records.Document.of(self.docs[side])

    def records(self, side: str) -> list:
        parsed = self._parsed.get(side)
        return list(parsed.records) if parsed else []

    def tests_of(self, side: str, keys) -> list[str]:
        """The node ids of ``side``'s tests that measured the benchmarks ``keys``."""
        parsed = self._parsed.get(side)
        return parsed.tests_of(keys) if parsed else []


def _run_pair(
    settings, run: sides.Run, number: int, lines: dict, only: list | None = None
) -> _Pair:
    """Run the base's and the head's sessions in turns, with their pytest arguments ``lines``
    (``command_lines``), in the run's directory ``number``; ``only``: the node ids to run (a second
    pair, whose head's output goes to a log too: the run's output is the first head's)."""
    directory = run.directory / str(number)
    directory.mkdir(parents=True)
    pair = _Pair(directory)
    coordinator = lockstep.Coordinator(
        str(directory / "turns.sock"), stall_s=max(settings.timeout or 0, 60.0) * 2
    )
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", str(random.randrange(1, 2**32)))  # one seed for both sides
    only_file = None
    if only is not None:
        only_file = str(directory / "only.json")
        atomic.write_text(only_file, json.dumps(only))
    launches = {}
    for side, argv in lines.items():
        path = run.site if side == lockstep.A else sides.same_length(run.site)
        role = Role(
            SIDE,
            side=side,
            socket=coordinator.path,
            out=str(directory / f"side-{side}.json"),
            base_dir=str(run.site),
            only=only_file,
            running=pair.running(side),
        )
        # the base's session (and a later pair's head) writes coverage's data in the run's own
        # directory: its files and the user's session's must not be combined into each other
        own = side == lockstep.A or only is not None
        launches[side] = (
            child_sessions.command([*argv, *role.argv()]),
            {
                **env,
                "PYTHONPATH": os.pathsep.join([str(path), *filter(None, [env.get("PYTHONPATH")])]),
                **(own_coverage_data(str(directory), f"side-{side}") if own else {}),
            },
        )
    sides.same_size(launches)
    procs = {}
    try:  # a Ctrl-C: the head's session (the run's output, in the first pair) says where
        with child_sessions.Children() as children:
            for side, log in (
                (lockstep.A, pair.log),
                (lockstep.B, None if only is None else directory / "head-side.log"),
            ):
                argv, side_env = launches[side]
                # both sides alike: one address layout (a layout is one more difference between
                # two processes), a Ctrl-C taken once their sessions started
                procs[side] = children.start(
                    argv, cwd=run.root, env=side_env, log=log, quiet_start=True, same_layout=True
                )
                threading.Thread(
                    target=_leave_on_exit, args=(coordinator, side, procs[side]), daemon=True
                ).start()
            pair.codes = _wait(procs)
    finally:
        coordinator.close()
    pair.errors = list(coordinator.stalled)
    if pair.codes[lockstep.A] is None:
        pair.errors.append(
            f"the base side did not end within {BASE_GRACE_S:.0f} s of the head and was stopped"
        )
    pair.read()
    return pair


def users_cache_dir(config) -> str:
    """The user's cache directory, as pytest's cache resolves ``cache_dir``."""
    try:
        name = config.getini("cache_dir")
    except ValueError:  # the cache plugin is off (-p no:cacheprovider): the name is never read
        name = ".pytest_cache"
    return str(Path(config.rootpath, os.path.expanduser(os.path.expandvars(name))))


def command_lines(
    args: list, first: bool, cache: str | None, head_cache: str | None = None
) -> dict:
    """Each side's pytest arguments. The base side's: the user's without what only the head writes,
    its cache in the run's directory (``cache``). The head's, in the ``first`` pair: the user's,
    its cache where it always is (``head_cache``), named explicitly as the base's is, both names
    one length (the shorter one with more slashes before its last part, which paths ignore): an
    asyncio A/A whose first pairs' command lines differed only there read the head -2.0% faster in
    their mean, and -0.0% with them alike (docs/gates/against.md). In later pairs both sides run
    the base's. With pytest's cache plugin off (``cache`` None), neither names a cache."""
    quiet = without(args, HEAD_ONLY)
    if cache is None:
        return {lockstep.A: quiet, lockstep.B: args if first else quiet}
    if not first:
        return {
            lockstep.A: [*quiet, "-o", f"cache_dir={cache}"],
            lockstep.B: [*quiet, "-o", f"cache_dir={cache}"],
        }
    head_cache = head_cache or cache
    width = max(len(os.fsencode(cache)), len(os.fsencode(head_cache)))

    def padded(path: str) -> str:
        parent, _, last = path.rpartition("/")
        return parent + "/" * (1 + width - len(os.fsencode(path))) + last

    return {
        lockstep.A: [*quiet, "-o", f"cache_dir={padded(cache)}"],
        lockstep.B: [*args, "-o", f"cache_dir={padded(head_cache)}"],
    }


def _again(settings, run: sides.Run, args: list, first: _Pair, cached: bool) -> list:
    """Further pairs of sessions, one at a time, for the benchmarks whose time is not decided yet:
    two processes of the same code differ by a percent or two for their whole life, so a change
    must show in two pairs of sessions, and a pair is the unit of the verdict (gate/paired.py)."""
    if len(first.docs) < 2:
        return []
    again: list = []
    for number in range(2, paired.MAX_SESSIONS + 1):
        keys = set(paired.undecided(_pairs_judged(settings, first, again)))
        only = first.tests_of(lockstep.B, keys)
        if not only:
            break
        them = f"{len(only)} test{'s' if len(only) > 1 else ''}"
        print(
            f"pytest-concurrency: {them} not decided against the base yet: measuring "
            f"{'them' if len(only) > 1 else 'it'} in pair of sessions {number} (of at most "
            f"{paired.MAX_SESSIONS}; two processes of the same code differ a little, so each pair is one "
            "measurement)",
            flush=True,
        )
        cache = str(run.directory / str(number) / "cache") if cached else None
        lines = command_lines(args, False, cache)
        again.append(_run_pair(settings, run, number, lines, only=only))
    return again


def _wait(procs: dict) -> dict:
    """Each side's exit status; the base side gets ``BASE_GRACE_S`` after the head ends (None: killed)."""
    codes = {lockstep.B: procs[lockstep.B].wait()}
    try:
        codes[lockstep.A] = procs[lockstep.A].wait(BASE_GRACE_S)
    except subprocess.TimeoutExpired:
        codes[lockstep.A] = None
    return codes


def _leave_on_exit(coordinator, side: str, proc) -> None:
    proc.wait()
    coordinator.leave(side)  # never connected, or gone: the other side runs on alone


def _judge(
    settings, run: sides.Run, first: _Pair, again: list, arbiter: Arbiter, written: list[str]
) -> int:
    """The pairs judged, said and added to the head's report; the run's exit status."""
    from ..gate import undecided

    head_code = first.codes[lockstep.B]
    if head_code in HEAD_SAID_WHY:
        return head_code  # the head's session said why; there is nothing to judge
    why = _nothing_judged(run.spec, first)
    if why is not None and head_code in (Exit.OK, Exit.RERECORD_BASELINE, Exit.NOTHING_JUDGED):
        print(
            f"pytest-concurrency: NOTHING JUDGED (exit {Exit.NOTHING_JUDGED}): against the base: {why}"
        )
        return Exit.NOTHING_JUDGED
    errors = [error for pair in (first, *again) for error in _pair_errors(run.spec, pair)]
    result = None
    if len(first.docs) == 2:
        result = _paired(settings, run, first, again, arbiter, errors)
        width = shutil.get_terminal_size().columns  # COLUMNS, else the terminal's, else 80
        for line in terminal.paired_lines(result, width):
            print(line)
        if settings.report_md:
            errors += _append_report(settings.report_md, result, written)
    for error in errors:
        print(f"pytest-concurrency: ERROR: {error}")
    return of_run(
        head_code,
        failed=bool(errors) or bool(result and result.failed),
        undecided=bool(result and result.undecided) and settings.undecided == undecided.EXIT,
    )


def _pair_errors(spec, pair: _Pair) -> list[str]:
    """What went wrong in one pair of sessions: a side that ended without its rounds, a base
    side that exited with a status that says it did not run its tests through."""
    errors = list(pair.errors)
    if lockstep.B not in pair.docs:
        errors.append(
            f"the head's session ended (exit {pair.codes[lockstep.B]}) without its rounds"
            + _ended_in(pair, lockstep.B)
        )
    if lockstep.A not in pair.docs:
        errors.append(
            f"the base side ({spec}) ended (exit {pair.codes[lockstep.A]}) without its rounds"
            + _ended_in(pair, lockstep.A)
            + "; its log:\n"
            + child_sessions.log_tail(pair.log)
        )
    elif pair.codes[lockstep.A] not in _BASE_RAN:
        errors.append(
            f"the base side ({spec}) exited {pair.codes[lockstep.A]}; its log:\n"
            + child_sessions.log_tail(pair.log)
        )
    return errors


def _paired(settings, run: sides.Run, first: _Pair, again: list, arbiter: Arbiter, errors: list):
    """The first pair's rounds judged with the later pairs', what time left undecided counted
    on both sides (when nothing went wrong: ``errors``, to which the sides' own are added)."""
    from ..gate import undecided

    base_ids = first.docs[lockstep.A].get("identity") or {}
    head_ids = first.docs[lockstep.B].get("identity") or {}
    errors += sides.check(run.site, base_ids, head_ids)
    result = _pairs_judged(settings, first, again)
    result.sides = paired.sides_line(base_ids, head_ids)
    keys = undecided.of_paired(result.verdicts)
    if keys and not errors:  # what time left undecided, counted on both sides
        counts = arbiter.count(keys, str(run.spec), first.tests_of(lockstep.B, keys))
        result.undecided = undecided.settle(result.verdicts, keys, counts)
    return result


def _pairs_judged(settings, first: _Pair, again: list):
    """The first pair's rounds judged with those of the later pairs that wrote both sides'."""
    further = [(p.records(lockstep.A), p.records(lockstep.B)) for p in again if len(p.docs) == 2]
    threshold = paired.thresholds(settings.gate)
    return paired.judge(first.records(lockstep.A), first.records(lockstep.B), threshold, further)


def _nothing_judged(spec, first: _Pair) -> str | None:
    """Why the first pair gave nothing to judge (a gate that judged nothing must not pass), or None."""
    head = first.docs.get(lockstep.B)
    if head is not None and not head.get("benchmarks"):
        return head.get("nothing_judged") or "the head's session recorded no benchmark"
    base_code = first.codes.get(lockstep.A)
    if head is not None and lockstep.A not in first.docs and base_code in NOT_RUN:
        return (
            f"the base side ({spec}) could not collect its tests (exit {base_code}): "
            f"{child_sessions.first_error(first.log)}"
        )
    return None


def _append_report(path: Path, result, written: list[str]) -> list[str]:
    """The verdicts against the base after the head's tables in its markdown report (one file for
    the CI job summary; the head's session wrote its part, if it got that far), written as every
    session's report is (session_end.write_report); the error, if it was not."""
    from ..report import markdown

    head_part = path.read_text(encoding="utf-8") + "\n" if path.exists() else ""
    error = session_end.write_report(path, head_part + markdown.render_paired(result), written)
    if error:
        return [error]
    print(f"pytest-concurrency: the verdicts against the base side added to {path}")
    return []


# -- in each side's session --------------------------------------------------------------------------


class Side(MeasuringSession):
    """One side's session: its rounds take turns with the other side's (runner/lockstep.py), and
    at its end it writes them, with what it imported, for the ``Orchestrator`` to judge."""

    def __init__(self, config, settings, role: Role):
        super().__init__(config, settings)
        self.role = role
        self.side = role.need("side")
        self.socket, self.out = role.need("socket"), role.need("out")
        self.base_dir = role.need("base_dir")
        self.turns: lockstep.Client | None = None
        self.calls: dict = {}  # node id -> its runner calls: [turn, s per iteration, iterations, CPU]
        self.in_progress = crash.Running(role.running)  # a test that ends it is named (crash.py)

    @pytest.hookimpl(tryfirst=True)  # as MeasuringSession's: before xdist starts workers
    def pytest_configure(self, config) -> None:
        refuse(self.settings)
        super().pytest_configure(config)

    def pytest_sessionstart(self, session) -> None:
        super().pytest_sessionstart(session)
        lifetime.take_ctrl_c()  # ignored until now (child_sessions: quiet_start)
        bs = adapter.session(session.config)
        if bs is not None:
            adapter.at_least(bs, "min_rounds", MIN_ROUNDS)
            # every round waits for its turn over a socket (tens of microseconds, milliseconds
            # under load): rounds of microseconds, 200,000 of them a test, took longer than a
            # suite's faulthandler_timeout. Both sides alike: each round runs the function longer
            adapter.at_least(bs, "min_time", MIN_ROUND_S)

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        """In a later pair of sessions: only the tests it measures again (the same on both sides)."""
        super().pytest_collection_modifyitems(session, config, items)
        if self.role.only is not None:
            only_these(self.role.only, config, items)

    def pytest_collection_finish(self, session) -> None:
        super().pytest_collection_finish(session)
        self.turns = lockstep.Client(self.socket, self.side)
        self.turns.order(self.side, [item.nodeid for item in session.items])

    def pytest_runtest_setup(self, item) -> None:
        super().pytest_runtest_setup(item)
        if self.turns is not None:
            self.turns.at(self.side, item.nodeid)

    def before_call(self, item) -> None:
        """Before a test's call: its benchmark's rounds take turns with the other side's."""
        bench = getattr(item, "funcargs", {}).get("benchmark")
        if bench is not None and self.turns is not None and getattr(bench, "enabled", False):
            # single-threaded rounds on one CPU, the same for both sides, round by round (pinned for
            # a whole test instead, threading later in the same sessions read 4-16% apart in one
            # A/A in three: docs/gates/against.md)
            cpu = lockstep.shared_cpu(item.funcargs.get("concurrency_backend"))
            self.calls[item.nodeid] = lockstep.pair_rounds(
                bench, self.turns, self.side, item.nodeid, cpu
            )

    def after_call(self, item, bench) -> None:
        """After it: its rounds' turns into the record (``paired_rounds``), for gate/paired.py."""
        calls = self.calls.pop(item.nodeid, None)
        measured = adapter.fixture_rounds(bench)
        if calls and measured:
            bench.extra_info["paired_rounds"] = calls[-len(measured) :]

    def finish(self, session, bs):
        """Write its rounds and what it imported, let the other side go on, then end as a session."""
        doc = {
            "identity": sides.identity(Path(self.base_dir), base_side=self.side == lockstep.A),
            **records.document(adapter.benchmarks(bs)),
        }
        if not doc["benchmarks"]:
            doc["nothing_judged"] = self.nothing_judged()
        atomic.write_text(self.out, json.dumps(doc))
        if self.turns is not None:
            self.turns.close()
        return super().finish(session, bs)
