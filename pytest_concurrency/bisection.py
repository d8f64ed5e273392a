"""``python -m pytest_concurrency bisect``: where a regression came in, by counted runs.

Between a good and a bad end (two commits of this git checkout, or two releases of a package on
the index), the suite is counted at the good end and saved as a baseline; each step after that
is a counted run judged against it, chosen by binary search, so a history of N points costs
about log2(N) runs. Counts are exact, so each step's verdict is too: no step is repeated.

* commits: one worktree (``git worktree add --detach``) in a directory of its own, checked out
  at each step and removed at the end: the user's tree is never touched. Every step runs in the
  same directory, as counts follow the directory's name. The tree (and its ``src/``) comes first
  on ``PYTHONPATH``, so the tests import its code, not an installed copy.
* releases (``--versions 'pkg==A..pkg==B'``): the index's releases from A to B, each installed
  with ``pip install --no-deps --target`` into one directory first on ``PYTHONPATH`` (the
  environment keeps the suite's other requirements; only the package moves).

A step whose code does not build (``--setup`` fails, the install fails) or whose suite does not
collect is skipped, said, and the search moves to a neighbour. The search assumes a benchmark
that crossed stays crossed; each benchmark a step found regressed gets its own first crossing
(the steps are shared). The bad end is a point of the search like the others (a history of 32
commits: the good end and 5 steps, whichever commit it is, or that nothing crossed); ``--each``
counts it first, so that every benchmark regressed there is located, including one that crossed
after the first one did (one run more, at most).

Nothing is left behind, however it ends: its directory (``pytest-concurrency-bisect-PID-...``)
holds a file its process keeps locked, so a later bisection removes, at its start, what one that
was killed (SIGKILL) left, its worktree's registration included; a SIGTERM (``timeout``, a
cancelled CI job) ends it as a Ctrl-C does, cleaned up, with one line naming the step it stopped
at, exit 2. Each step's processes die with it (PDEATHSIG).
"""

import contextlib
import fcntl
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import lifetime
from .exit_codes import NOT_RUN, Exit
from .roles import child_sessions

_TAIL = 6  # lines of a skipped step's output shown
#: A bisection's own directory in TMPDIR: the prefix, then its process's id (``work_dir``)
PREFIX = "pytest-concurrency-bisect-"
OWNER = ".owner"  # in it: a file its process holds locked (``flock``) for as long as it runs


class BisectError(Exception):
    """One line, and the exit status it ends with."""

    def __init__(self, line: str, code: int = Exit.TOOL_USAGE):
        super().__init__(line)
        self.code = code


class Interrupted(BaseException):
    """A Ctrl-C or a SIGTERM: the run stops, cleans up and says where it was (not an ``Exception``,
    which code on the way could take for its own error)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclass
class Point:
    """One point of the history: a commit, or a release."""

    name: str  # abc1234, or yarl==1.9.4
    title: str = ""  # the commit's subject


@dataclass
class Step:
    point: int  # index in the history
    status: str  # "saved" (the good end), "judged", "skipped"
    regressed: dict = field(default_factory=dict)  # key label -> the verdict's line
    changes: dict = field(default_factory=dict)  # key label -> change against the good end
    why: str = ""  # why skipped
    seconds: float = 0.0


# -- the two kinds of history -----------------------------------------------------------------


class Commits:
    """The commits from ``good`` to ``bad`` (first parents' ancestry path), the good end first."""

    preparing = "checking out"  # what ``prepare`` does, for the line of an interrupted run

    def __init__(self, good: str, bad: str, setup: str | None):
        self.setup = setup
        self.top = _git("rev-parse", "--show-toplevel", what="a git checkout (run bisect in one)")
        self.rel = os.path.relpath(os.getcwd(), self.top)
        g, b = (
            _git("rev-parse", "--verify", f"{r}^{{commit}}", what=f"the revision {r!r}")
            for r in (good, bad)
        )
        if g == b:
            raise BisectError(f"--good and --bad are the same commit ({g[:10]}): nothing to search")
        if lifetime.run(["git", "merge-base", "--is-ancestor", g, b], cwd=self.top).returncode:
            raise BisectError(
                f"--good {good} is not an ancestor of --bad {bad}: give a good end the bad end came from"
            )
        shas = _git(
            "rev-list", "--reverse", "--ancestry-path", f"{g}..{b}", what="the history"
        ).split()
        self.shas = [g, *shas]
        self.points = [
            Point(s[:10], _git("log", "-1", "--format=%s", s, what="a commit")) for s in self.shas
        ]
        self.tree = ""

    def open(self, work: str) -> None:
        self.tree = os.path.join(work, "tree")
        _git("worktree", "add", "--detach", "--quiet", self.tree, self.shas[0], what="a worktree")

    def close(self) -> None:
        if self.tree:
            lifetime.run(
                ["git", "worktree", "remove", "--force", self.tree],
                cwd=self.top,
                capture_output=True,
            )
            lifetime.run(["git", "worktree", "prune"], cwd=self.top, capture_output=True)

    def left(self) -> list[str]:
        """What of the run is still there once closed: its worktree, if git still lists it."""
        return [t for t in _worktrees(self.top) if self.tree and t == os.path.realpath(self.tree)]

    def prepare(self, i: int) -> tuple[str, dict] | str:
        """(the directory to run in, the environment), or why the step cannot run."""
        for args in (
            ("checkout", "--detach", "--force", "--quiet", self.shas[i]),
            ("clean", "-fdxq"),
        ):
            done = _step_process(["git", "-C", self.tree, *args])
            if done.returncode:
                return f"git {args[0]} failed: {done.stderr.strip()[-200:]}"
        cwd = os.path.normpath(os.path.join(self.tree, self.rel))
        src = os.path.join(self.tree, "src")
        env = _with_path([self.tree, *filter(os.path.isdir, [src])])
        if self.setup:
            self.preparing = "building (--setup)"
            done = _step_process(self.setup, shell=True, cwd=cwd, env=env)
            self.preparing = "checking out"
            if done.returncode:
                return f"did not build (--setup exited {done.returncode}): {_tail(done.stdout + done.stderr)}"
        return cwd, env


class Releases:
    """The index's releases of one package from A to B (``pkg==A..pkg==B``), oldest first."""

    preparing = "installing"

    def __init__(self, spec: str, listed: Callable[[str], list[str]] | None = None):
        from packaging.version import InvalidVersion, Version

        m = re.fullmatch(
            r"\s*([A-Za-z0-9_.\-\[\]]+)==([^.\s][^\s]*?)\.\.(?:([A-Za-z0-9_.\-]+)==)?(\S+)\s*", spec
        )
        if not m or (m[3] and m[3].lower() != m[1].lower()):
            raise BisectError(
                f"--versions {spec!r}: write PKG==GOOD..PKG==BAD, e.g. 'yarl==1.9.0..yarl==1.9.4'"
            )
        self.package = m[1]
        try:
            good, bad = Version(m[2]), Version(m[4])
        except InvalidVersion as exc:
            raise BisectError(f"--versions {spec!r}: {exc}") from None
        if not good < bad:
            raise BisectError(f"--versions {spec!r}: the good release must come before the bad one")
        found = (listed or _index_versions)(self.package)
        versions = []
        for text in found:
            try:
                v = Version(text)
            except InvalidVersion:
                continue
            if good <= v <= bad and (not v.is_prerelease or v in (good, bad)):
                versions.append(v)
        versions = sorted(set(versions))
        for end in (good, bad):
            if end not in versions:
                raise BisectError(f"--versions {spec!r}: {self.package} {end} is not on the index")
        self.points = [Point(f"{self.package}=={v}") for v in versions]
        self.site = ""

    def open(self, work: str) -> None:
        self.site = os.path.join(work, "site")

    def close(self) -> None:
        pass

    def left(self) -> list[str]:
        return []

    def prepare(self, i: int) -> tuple[str, dict] | str:
        shutil.rmtree(self.site, ignore_errors=True)
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            self.site,
            self.points[i].name,
        ]
        done = _step_process(command)
        if done.returncode:
            return f"did not install: {_tail(done.stdout + done.stderr)}"
        return os.getcwd(), _with_path([self.site])


def _index_versions(package: str) -> list[str]:
    """The package's releases on the index pip is configured with."""
    done = lifetime.run(
        [sys.executable, "-m", "pip", "index", "versions", package], capture_output=True, text=True
    )
    for line in done.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise BisectError(
        f"--versions: the index lists no release of {package!r} ({_tail(done.stderr) or 'pip index versions'})"
    )


# -- the search --------------------------------------------------------------------------------


class Search:
    def __init__(
        self, history, pytest_args: list[str], measure: str, work: str, say: Callable[[str], None]
    ):
        self.history = history
        self.points: list[Point] = history.points
        self.args = pytest_args
        self.measure = measure
        self.work = work
        self.say = say
        self.steps: dict[int, Step] = {}
        self.baseline = os.path.join(work, "good.json")
        # what it is doing, for the line of an interrupted run (``doing``): a step's (label,
        # where in the search, whether counting yet), or what it does between steps
        self._step: tuple[str, str, bool] | None = None
        self._between = "setting up, before its first step"

    def doing(self) -> str:
        if self._step is None:
            return self._between
        label, at, counting = self._step
        return f"{'counting' if counting else self.history.preparing} {label} ({at})"

    def expected(self) -> int:
        """About how many runs the search takes (the good end, then binary search)."""
        return max(1, (len(self.points) - 1).bit_length()) + 1

    def run(self, i: int) -> Step:
        if i in self.steps:
            return self.steps[i]
        start = time.monotonic()
        point = self.points[i]
        label = f"{point.name}" + (f" ({point.title})" if point.title else "")
        at = f"step {len(self.steps) + 1} of about {max(self.expected(), len(self.steps) + 1)}"
        self._step = (label, at, False)
        ready = self.history.prepare(i)
        if isinstance(ready, str):
            step = Step(i, "skipped", why=ready)
        else:
            self._step = (label, at, True)
            step = self._counted(i, *ready)
        step.seconds = time.monotonic() - start
        self.steps[i] = step
        self._step, self._between = None, f"after step {len(self.steps)}, choosing the next"
        counted = len(self.steps)
        if step.status == "skipped":
            self.say(f"step {counted}: {label}: skipped, {step.why}")
        elif step.status == "saved":
            self.say(
                f"step {counted}: {label}: the good end counted and saved ({step.seconds:.0f} s)"
            )
        else:
            what = (
                ", ".join(f"{k} {step.changes.get(k, '')}".strip() for k in step.regressed)
                or "nothing crossed"
            )
            self.say(f"step {counted}: {label}: {what} ({step.seconds:.0f} s)")
        return step

    def _counted(self, i: int, cwd: str, env: dict) -> Step:
        from .gate import verdict_file
        from .gate.verdicts import REGRESSED
        from .measure.records import key_label
        from .report import tables

        good = i == 0
        out = os.path.join(self.work, f"step-{i}.json")
        extra = (
            [f"--concurrency-save-baseline={self.baseline}", "--concurrency-baseline-sessions=1"]
            if good
            else [f"--concurrency-baseline={self.baseline}"]
        )
        command = child_sessions.command(
            [
                *self.args,
                f"--concurrency-measure={self.measure}",
                "-p",
                "no:cacheprovider",
                f"--concurrency-verdicts={out}",
                *extra,
            ]
        )
        log = os.path.join(self.work, f"step-{i}.log")
        # a counted run, whose own counted sessions get their grace first (depth)
        code = child_sessions.run(command, cwd=cwd, env=env, log=log, depth=1)
        with open(log, encoding="utf-8", errors="replace") as fh:
            output = fh.read()
        if not os.path.exists(out) or code in NOT_RUN:
            return Step(
                i,
                "skipped",
                why=f"did not collect or run (pytest exit {code}): {_tail(output)}",
            )
        v = verdict_file.read(out)
        if good:
            if v.exit_status != Exit.OK or not os.path.exists(self.baseline):
                return Step(
                    i, "skipped", why=f"did not run clean (exit {v.exit_status}): {_tail(output)}"
                )
            return Step(i, "saved")
        gate = v.gate
        if gate is None or gate.refused or gate.rerecord:
            why = (gate.refused or gate.rerecord) if gate is not None else "no verdicts"
            return Step(i, "skipped", why=f"not judged: {why}")
        step = Step(i, "judged")
        for verdict in gate.verdicts:
            label = key_label(verdict.key)
            if verdict.change is not None:
                step.changes[label] = f"{verdict.change:+.2%}"
            if verdict.status == REGRESSED:
                step.regressed[label] = tables.verdict_line(verdict)
        return step

    def crossed(self, i: int) -> set | None:
        step = self.run(i)
        return None if step.status == "skipped" else set(step.regressed)

    def between(self, lo: int, hi: int) -> int | None:
        """The untried point nearest the middle of (lo, hi), or None."""
        mid = (lo + hi) // 2
        for d in range(hi - lo):
            for j in (mid + d, mid - d):
                if lo < j < hi and j not in self.steps:
                    return j
        return None

    def first_crossing(self, lo: int, hi: int, crossed: Callable[[set], bool]) -> tuple[int, int]:
        """(last point known not crossed, first point known crossed) of a predicate on a step's
        regressed benchmarks, from ``lo`` (not crossed) and ``hi`` (crossed)."""
        while hi - lo > 1:
            j = self.between(lo, hi)
            if j is None:  # every point between was skipped
                break
            found = self.crossed(j)
            if found is None:
                continue
            if crossed(found):
                hi = j
            else:
                lo = j
        return lo, hi


@dataclass
class Finding:
    benchmark: str
    last_good: int
    first_bad: int
    line: str  # the verdict at the first bad point
    skipped_between: int = 0


def search(task: Search, each: bool = False) -> list[Finding]:
    """The first crossing of every benchmark a step found regressed; ``each``: the bad end is
    counted too (one run more), so that every benchmark regressed there is located, not only
    those that crossed first."""
    n = len(task.points) - 1
    if task.run(0).status != "saved":
        raise BisectError(
            f"the good end {task.points[0].name} did not build or collect: {task.steps[0].why}",
            Exit.END_BROKEN,
        )
    if each:
        task.run(n)
    # n + 1 stands for "beyond the bad end": the bad end is a point like the others, so that N
    # points and "nothing crossed" take log2(N + 1) steps, whichever point the culprit is
    lo, hi = task.first_crossing(0, n + 1, bool)
    if hi == n + 1 and task.steps.get(n, Step(n, "skipped", why="not counted")).status == "skipped":
        raise BisectError(
            f"the bad end {task.points[n].name} did not build or collect: {task.steps.get(n, Step(n, '')).why}",
            Exit.END_BROKEN,
        )
    keys = sorted({k for st in task.steps.values() for k in st.regressed})
    if not keys:
        raise BisectError(
            f"nothing crossed the threshold from {task.points[0].name} to {task.points[n].name}: the bad end "
            f"counts as the good end does (is the good end already slow? give an earlier --good)",
            Exit.NOTHING_CROSSED,
        )
    found = []
    for key in keys:
        first = min(i for i, st in task.steps.items() if key in st.regressed)
        last = max(
            i
            for i, st in task.steps.items()
            if i < first and st.status != "skipped" and key not in st.regressed
        )
        last, first = task.first_crossing(last, first, {key}.issubset)
        skipped = sum(
            1
            for i in range(last + 1, first)
            if task.steps.get(i) and task.steps[i].status == "skipped"
        )
        found.append(Finding(key, last, first, task.steps[first].regressed[key], skipped))
    return found


# -- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    b = sub.add_parser(
        "bisect",
        help="find the commit or release where each regressed benchmark crossed the threshold",
        description="Count the suite at the good end, then bisect to the first commit (--good/--bad, "
        "in a git checkout: one worktree, your tree untouched) or release (--versions "
        "'pkg==A..pkg==B', from the index) where each benchmark regressed against it, in about "
        "log2(N) counted runs. Everything after -- is pytest's command line, e.g. -- tests/perf "
        f"--benchmark-only. Exit status: {Exit.OK} found; {Exit.NOTHING_CROSSED} nothing crossed "
        f"the threshold at the bad end; {Exit.END_BROKEN} an end does not build or collect; "
        f"{Exit.TOOL_USAGE} usage.",
    )
    b.add_argument("--good", metavar="REV", help="a commit without the regression")
    b.add_argument("--bad", metavar="REV", help="a later commit with it")
    b.add_argument(
        "--versions", metavar="'PKG==A..PKG==B'", help="bisect releases on the index instead"
    )
    b.add_argument(
        "--measure",
        default="instructions",
        choices=("instructions", "time"),
        help="default: instructions",
    )
    b.add_argument(
        "--setup",
        metavar="CMD",
        help="a shell command run in each step's tree first (a build); failing skips the step",
    )
    b.add_argument(
        "--each",
        action="store_true",
        help="count the bad end too (one run more): every benchmark regressed there is located, "
        "not only those that crossed first",
    )
    b.add_argument("--json", metavar="PATH", help="also write the steps and findings as JSON")
    b.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS")


def main(args) -> int:
    from . import measure

    with _on_signals(_raise_interrupted):
        try:
            if bool(args.versions) == bool(args.good or args.bad):
                raise BisectError("give --good REV --bad REV, or --versions 'PKG==A..PKG==B'")
            if not args.versions and not (args.good and args.bad):
                raise BisectError("give both --good REV and --bad REV")
            reason = measure.instrument(args.measure).unavailable_reason()
            if reason:
                raise BisectError(f"--measure {args.measure}: {reason}")
            for work in sweep(_toplevel()):
                print(f"bisect: removed what a bisection that was killed left: {work}", flush=True)
            history = (
                Releases(args.versions)
                if args.versions
                else Commits(args.good, args.bad, args.setup)
            )
            return _run(history, args)
        except BisectError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.code
        except Interrupted as exc:  # before its first step: it has made nothing yet
            print(
                _interrupted(exc.signum, "setting up, before its first step", []), file=sys.stderr
            )
            return Exit.INTERRUPTED


def _run(history, args) -> int:
    n = len(history.points)
    work, lock = work_dir()
    task = Search(
        history, list(args.pytest_args), args.measure, work, lambda line: print(line, flush=True)
    )
    print(
        f"bisect: {n} points from {history.points[0].name} to {history.points[-1].name}, counted "
        f"({args.measure}); about {task.expected()} runs",
        flush=True,
    )
    try:
        try:
            history.open(work)
            found = search(task, args.each)
        finally:
            with _on_signals(signal.SIG_IGN):
                history.close()
                shutil.rmtree(work, ignore_errors=True)
                os.close(lock)
    except Interrupted as exc:
        left = [*history.left(), *filter(os.path.exists, [work])]
        print(_interrupted(exc.signum, task.doing(), left), file=sys.stderr)
        return Exit.INTERRUPTED
    except BisectError as exc:
        _write_json(args.json, task, [], str(exc))
        raise
    runs = sum(1 for st in task.steps.values() if st.status != "skipped")
    for f in found:
        first, last = task.points[f.first_bad], task.points[f.last_good]
        where = f"{first.name}" + (f" ({first.title})" if first.title else "")
        gap = f", {f.skipped_between} skipped between" if f.skipped_between else ""
        print(f"{f.benchmark}: first crossed at {where}, after {last.name}{gap}")
        print(f"  {f.line}")
    skipped = [
        task.points[i].name for i, st in sorted(task.steps.items()) if st.status == "skipped"
    ]
    print(
        f"bisect: {len(found)} benchmark(s) located in {runs} counted runs"
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
    )
    _write_json(args.json, task, found, "")
    return Exit.OK


def _interrupted(signum: int, doing: str, left: list[str]) -> str:
    """The one line of a run stopped by a Ctrl-C or a SIGTERM (it writes no --json)."""
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    after = (
        f"left behind: {', '.join(left)} (the next bisection removes it)"
        if left
        else "nothing left behind"
    )
    return f"bisect: interrupted ({how}) while {doing}; {after}"


# -- signals, and what a run leaves ------------------------------------------------------------


def _raise_interrupted(signum, frame) -> None:
    for each in (signal.SIGINT, signal.SIGTERM):  # the clean-up that follows is not interrupted
        signal.signal(each, signal.SIG_IGN)
    raise Interrupted(signum)


@contextlib.contextmanager
def _on_signals(handler):
    """A Ctrl-C or a SIGTERM (``timeout``, a cancelled CI job) handled by ``handler`` meanwhile:
    ``_raise_interrupted`` raises ``Interrupted`` once; in the clean-up, ``SIG_IGN``: a signal
    then is not to stop it halfway (the run ends right after)."""
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _step_process(command, **popen) -> subprocess.CompletedProcess:
    """A step's command (git in its worktree, the build, pip), its output captured: it and what
    it starts (pip's build backend, a compiler) die with this process and end with the step, a
    Ctrl-C or a SIGTERM (``lifetime.run``)."""
    return lifetime.run(command, capture_output=True, text=True, **popen)


def work_dir() -> tuple[str, int]:
    """This run's directory in TMPDIR, named after its process, and the descriptor of the lock in
    it (``OWNER``), held until the process ends, however it ends: ``sweep`` in a later run knows a
    directory whose lock it can take as a leftover (a pid used again, or another pid namespace's,
    does not fool it)."""
    work = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    lock = os.open(os.path.join(work, OWNER), os.O_CREAT | os.O_WRONLY, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    return work, lock


def sweep(top: str | None) -> list[str]:
    """What bisections that were killed (SIGKILL, a machine's reset) left, their processes gone:
    their directories in TMPDIR, and the worktrees they registered in the checkout ``top`` (found
    there too when TMPDIR was another); their repositories forget the worktrees (``git worktree
    prune``). Returns the directories removed."""
    found = {
        os.path.realpath(w) for w in glob.glob(os.path.join(tempfile.gettempdir(), PREFIX + "*"))
    }
    for tree in _worktrees(top):
        if os.path.basename(os.path.dirname(tree)).startswith(PREFIX):
            found.add(os.path.dirname(tree))
    removed, repositories = [], {top} if top else set()
    for work in sorted(found):
        if not _gone(work):
            continue
        repositories.update(filter(None, [_repository_of(os.path.join(work, "tree"))]))
        shutil.rmtree(work, ignore_errors=True)
        removed.append(work)
    if removed:
        for repository in repositories:
            lifetime.run(["git", "worktree", "prune"], cwd=repository, capture_output=True)
    return removed


def _gone(work: str) -> bool:
    """Whether the run that made the directory ``work`` has ended: its lock can be taken. Without
    a lock (killed in the instant between making the directory and its lock), whether the process
    its name gives is gone."""
    try:
        lock = os.open(os.path.join(work, OWNER), os.O_RDONLY)
    except FileNotFoundError:
        owner = re.match(re.escape(PREFIX) + r"(\d+)-", os.path.basename(work))
        return owner is not None and not _alive(int(owner[1]))
    except OSError:  # not ours to read
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # held: the run goes on
        return False
    finally:
        os.close(lock)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _repository_of(tree: str) -> str | None:
    """The repository a worktree belongs to (its ``.git`` file names its entry there), if any."""
    try:
        with open(os.path.join(tree, ".git"), encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    entry = text.partition(":")[2].strip()  # REPO/.git/worktrees/NAME
    common = os.path.dirname(os.path.dirname(entry))
    return common if os.path.isdir(common) else None


def _toplevel() -> str | None:
    """The git checkout this command runs in, if any (not an error here: releases need none)."""
    try:
        return _git("rev-parse", "--show-toplevel", what="") or None
    except BisectError:
        return None


def _worktrees(top: str | None) -> list[str]:
    """The worktrees registered in the checkout ``top``, as real paths."""
    if not top:
        return []
    done = lifetime.run(
        ["git", "worktree", "list", "--porcelain"], cwd=top, capture_output=True, text=True
    )
    return [
        os.path.realpath(line.partition(" ")[2])
        for line in done.stdout.splitlines()
        if line.startswith("worktree ")
    ]


def _write_json(path: str | None, task: Search, found: list[Finding], error: str) -> None:
    if not path:
        return
    from .store import atomic

    doc = {
        "points": [p.name for p in task.points],
        "steps": [
            {
                "point": task.points[i].name,
                "status": st.status,
                "regressed": st.regressed,
                "changes": st.changes,
                "why": st.why,
                "seconds": round(st.seconds, 1),
            }
            for i, st in task.steps.items()  # in the order they ran
        ],
        "runs": sum(1 for st in task.steps.values() if st.status != "skipped"),
        "found": [
            {
                "benchmark": f.benchmark,
                "first_bad": task.points[f.first_bad].name,
                "last_good": task.points[f.last_good].name,
                "line": f.line,
            }
            for f in found
        ],
        "error": error,
    }
    atomic.write_text(path, json.dumps(doc, indent=1) + "\n")


def _git(*args: str, what: str) -> str:
    try:
        done = lifetime.run(["git", *args], capture_output=True, text=True)
    except OSError as exc:
        raise BisectError(f"git is needed to bisect commits: {exc}") from None
    if done.returncode:
        raise BisectError(
            f"not {what}: git {' '.join(shlex.quote(a) for a in args[:2])}: {done.stderr.strip()[-200:]}"
        )
    return done.stdout.strip()


def _with_path(paths: list[str]) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _tail(text: str) -> str:
    return child_sessions.tail(text, _TAIL, " | ")[-600:]
