"""The run log's runs in the order of a branch's commits, and each benchmark's series over them.

Runs are files copied into a folder, so the order they arrived in says nothing: with a git
repository at hand they are put in the order of the branch's commits (``git rev-list
--first-parent BRANCH``, oldest first; runs of one commit by date), and runs of commits not on
the branch are left out (a pull request's runs, another branch's). Without one, they are in the
order of their dates, and the site says so.
"""

import functools
import math
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..gate import verdicts as V
from ..measure import instrument
from ..measure.records import params_id
from . import tables

#: A benchmark's verdicts that mark its chart: the ones that fail a build.
MARKED = (V.REGRESSED, V.LEAKED)


@dataclass(frozen=True)
class Ordered:
    runs: list[dict]  # oldest first
    how: str  # one sentence: the order, and what was left out
    branch: str | None


def branch_commits(repo, branch: str) -> list[str] | None:
    """The branch's first-parent commits, oldest first; None when git cannot tell."""
    try:
        done = subprocess.run(
            ["git", "rev-list", "--first-parent", "--reverse", branch, "--"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.split() if done.returncode == 0 else None


def order(runs: Iterable[dict], repo=None, branch: str | None = None) -> Ordered:
    """``runs`` in the branch's order (see above); ``branch`` defaults to the one most runs name."""
    runs = list(runs)
    named = Counter(r.get("branch") for r in runs if r.get("branch"))
    branch = branch or (named.most_common(1)[0][0] if named else None)
    commits = branch_commits(repo, branch or "HEAD") if repo is not None else None
    missed = commits is not None and not {r.get("commit") for r in runs} & set(commits)
    if commits is not None and not missed:
        return _in_commit_order(runs, commits, branch)
    if branch is not None:
        runs = [r for r in runs if r.get("branch") in (branch, None)]
    runs.sort(key=lambda r: (r["date"], r.get("commit") or ""))
    why = _why_not_commit_order(repo, branch, missed)
    return Ordered(runs, f"in the order of their dates, not of a branch's commits: {why}", branch)


def _in_commit_order(runs: list[dict], commits: list[str], branch: str | None) -> Ordered:
    """The runs of the branch's commits, in their order (runs of one commit by date)."""
    place = {c: i for i, c in enumerate(commits)}
    kept = [r for r in runs if r.get("commit") in place]
    kept.sort(key=lambda r: (place[r["commit"]], r["date"]))
    gone = len(runs) - len(kept)
    how = f"in the order of {branch or 'HEAD'}'s commits (git rev-list --first-parent)"
    if gone:
        how += f"; {gone} run(s) of commits not on it left out"
    return Ordered(kept, how, branch)


def _why_not_commit_order(repo, branch: str | None, missed: bool) -> str:
    if repo is None:
        return "no git repository given"
    if missed:
        return f"none of the runs' commits is on {branch or 'HEAD'} in the repository at {repo}"
    return f"no branch {branch or 'HEAD'} in a git repository at {repo}"


@dataclass
class Point:
    run: int  # the run's place in the order
    median: float | None
    low: float | None
    high: float | None
    verdict: dict | None = None  # the run's verdict on this benchmark's figure, if any


@dataclass
class Series:
    """One benchmark measured one way (time or counts) over the runs."""

    id: str
    measure: str
    workload: str
    case: str  # workload[params]: the models of one case share a chart
    backend: str
    name: str
    unit: str
    points: list[Point] = field(default_factory=list)
    marks: list[Point] = field(default_factory=list)  # the runs whose verdict failed it

    @property
    def latest(self) -> Point:
        return self.points[-1]


def case_of(b: Mapping) -> str:
    pid = params_id(b.get("params") or {})
    return f"{b['workload']}[{pid}]" if pid else str(b["workload"])


def series(runs: list[dict]) -> dict[tuple[str, str], Series]:
    """Each (measure, benchmark id)'s series over ``runs`` (in order): every run holding it is
    one point; a run's verdict failing it (regressed, leaked) marks that point."""
    out: dict[tuple[str, str], Series] = {}
    for i, run in enumerate(runs):
        measure = str(run.get("measure") or "time")
        failing: dict[str, dict] = {}
        for v in run["verdicts"]:
            if v["status"] in MARKED:
                failing.setdefault(v["id"], v)
        for b in run["benchmarks"]:
            key = (measure, b["id"])
            s = out.get(key)
            if s is None:
                s = out[key] = Series(
                    b["id"],
                    measure,
                    str(b.get("workload") or b["id"]),
                    case_of(b) if b.get("workload") else b["id"],
                    str(b.get("backend") or ""),
                    str(b.get("test") or b.get("name") or b["id"]),
                    str(b.get("unit") or "call"),
                )
            point = Point(i, b.get("median"), b.get("low"), b.get("high"), failing.get(b["id"]))
            s.points.append(point)
            if point.verdict is not None:
                s.marks.append(point)
    return out


def latest_verdict(runs: list[dict], s: Series) -> dict | None:
    """The gate's verdict on ``s`` in the latest run that holds it (its own measure's first)."""
    found = [v for v in runs[s.latest.run]["verdicts"] if v["id"] == s.id]
    own = [v for v in found if v.get("figure") == s.measure]
    failing = [v for v in found if v["status"] in MARKED]
    return (failing or own or found or [None])[0]


def amount(value: float | None, measure: str) -> str:
    """A per-op figure in its measure's unit: ``1.23 µs``, ``4.56k instr``."""
    unit = _unit(measure)
    if unit == "s":
        return tables.fmt_time(value)
    if value is None or not math.isfinite(value):
        return tables.NA
    return f"{tables.fmt_count(value)} {unit}"


@functools.cache
def _unit(measure: str) -> str:
    """The unit of a measure's samples (``s``, ``instr``): looked up once a measure, as a
    site formats a few hundred thousand figures."""
    return instrument(measure).unit


def downsampled(values: list[float], most: int) -> list[float]:
    """At most ``most`` values: the median of each of ``most`` runs of neighbours (a sparkline's)."""
    if len(values) <= most:
        return list(values)
    out = []
    for k in range(most):
        chunk = sorted(values[k * len(values) // most : (k + 1) * len(values) // most])
        out.append(chunk[len(chunk) // 2])
    return out
