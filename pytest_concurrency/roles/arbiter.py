"""What time left undecided, counted on both sides in one run: the counts are the arbiter.

After a timed judgement (a stored time baseline, or ``--concurrency-against``), the tests of the
benchmarks time left undecided, and only those, are counted in one more pytest process: the
user's command line, less what only the user's session writes, counted against the base
(``--concurrency-measure=instructions --concurrency-against=BASE``, roles/counted_against.py:
the base side's counted run, then the head's, the head judged on the base), its tests narrowed
to theirs (``--concurrency-only``), its verdicts written to a file (``--concurrency-verdicts``)
and read back here; gate/undecided.py settles the time verdicts on them.

The base: against a base side, the run's own spec. Against a stored time baseline, the commit its
newest session recorded (``git:COMMIT``), installed apart as any base side is. Why not counts
saved with the time baseline: counts are comparable only from the same measuring side (valgrind,
Python, the plugin: gate/measuring.py), which a baseline saved on another runner, or before an
upgrade, does not share; counted in the same run, both sides always do, and the base branch's CI
pays nothing. The cost falls on the run that needs it, and only when time left something
undecided: a quiet run that time decided counts nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

from ..backends import scratch
from ..gate import undecided, verdict_file
from ..measure import callgrind
from ..store.history import Baseline
from . import child_sessions, stretched_timeouts
from .argv import apart, no_coverage, without

#: What the counted run must not inherit from the user's command line (the arbiter sets its own).
_REPLACED = {
    "--concurrency-against": True,
    "--concurrency-against-keep": True,
    "--concurrency-measure": True,
    "--concurrency-only": True,
    "--concurrency-undecided": True,
    "--concurrency-remeasure": True,
}

#: How many times a timed session's time a counted run of the same tests may take, for its bound
COUNTED_SLOWER = stretched_timeouts.SLOWER


class Arbiter:
    """In the timed run's process: the undecided benchmarks' tests counted on both sides."""

    def __init__(self, config, settings):
        self.config = config
        self.settings = settings

    def for_stored(self, keys: list, base: Baseline, node_ids: dict) -> undecided.Counts:
        """Against a stored time baseline: the base is the commit its newest session measured."""
        spec, why = base_of(base.meta)
        if spec is None:
            return undecided.Counts(why_not=_stay(len(keys), why))
        return self.count(keys, spec, [node_ids[k] for k in keys if k in node_ids])

    def count(self, keys: list, spec: str, tests: list[str]) -> undecided.Counts:
        """Count the tests ``tests`` (the benchmarks ``keys``) on both sides against ``spec``."""
        missing = callgrind.unavailable_reason()
        if missing is not None:  # said once, for every benchmark left undecided
            return undecided.Counts(why_not=_stay(len(keys), missing))
        if not tests:
            return undecided.Counts(why_not=_stay(len(keys), "their tests have no node ids"))
        tests = sorted(set(tests))
        them = f"{len(tests)} test{'s' * (len(tests) != 1)}"
        print(
            f"\npytest-concurrency: time left {len(keys)} benchmark{'s' * (len(keys) != 1)} "
            f"undecided: counting {them} on both sides (base: {spec}) under valgrind, "
            "where the machine's load cannot move a count",
            file=sys.stderr,
            flush=True,
        )
        with tempfile.TemporaryDirectory(
            prefix="arbiter-", dir=scratch.directory(), ignore_cleanup_errors=True
        ) as where:
            only, out, log = (os.path.join(where, n) for n in ("only.json", "verdicts.json", "log"))
            with open(only, "w", encoding="utf-8") as fh:
                json.dump(tests, fh)
            argv = counted_argv(self.config, where, spec, only, out)
            # each counted round has its own deadline; this bounds what has none (a hung build of
            # the base side): two counted runs, each 30-50x a timed session of those tests
            budget = (self.settings.timeout or 120.0) * (len(tests) + 2) * COUNTED_SLOWER
            try:
                # a run against the base, whose sides run counted sessions (depth)
                code = child_sessions.run_apart(
                    self.config, argv, where, "counted", log=log, timeout=budget, depth=2
                )
            except subprocess.TimeoutExpired:  # it has been stopped, with what it started
                why = f"the counted run did not end within {budget:.0f} s and was stopped"
                return undecided.Counts(base=spec, why_not=_stay(len(keys), why))
            try:
                read = verdict_file.read(out)
            except verdict_file.VerdictFileError:
                why = failed(code, log, spec)
                return undecided.Counts(base=spec, why_not=_stay(len(keys), why))
        wanted = set(keys)
        verdicts = read.gate.verdicts if read.gate is not None else []
        found = {v.key: (v.status, v.change) for v in verdicts if v.key in wanted}
        notes = {v.key: v.note for v in verdicts if v.key in wanted and v.note}
        return undecided.Counts(found, base=spec, notes=notes)


def counted_argv(config, where: str, spec: str, only: str, out: str) -> list[str]:
    """The counted run's command line: the user's, less what the arbiter sets itself, counting
    the tests listed in ``only`` against ``spec``, its verdicts written to ``out``. Without a
    suite's coverage (its addopts' pytest-cov), on both sides: no one reads what it records, it
    ran under valgrind in each counted side, and with multidict's ``--cov-context=test`` a layout
    forked from a counted side failed on its data file (``DataError: Couldn't use data file ...:
    no such table: context``): that layout's pass exited 1, its tests judged without it."""
    return [
        *without(apart(config, where, "counted"), _REPLACED),
        *no_coverage(config),
        "--concurrency-measure=instructions",
        f"--concurrency-against={spec}",
        f"--concurrency-only={only}",
        f"--concurrency-verdicts={out}",
    ]


def base_of(meta) -> tuple[str | None, str]:
    """The base side that counts what a stored time baseline measured (``git:COMMIT``), or None
    and why it cannot be counted."""
    code = meta.get("code") or {}
    commit = code.get("commit")
    if not commit:
        return None, (
            "the baseline records no git commit of the code it measured (saved outside a git "
            "repository), so its side cannot be counted"
        )
    if code.get("dirty"):
        return None, (
            f"the baseline's newest session measured commit {str(commit)[:10]} with modified "
            "files, which cannot be counted again: save the baseline from a clean checkout"
        )
    return f"git:{commit}", ""


def failed(code: int, log: str, spec: str) -> str:
    """Why the counted run wrote no verdicts, in one line. Its base side not installing apart is
    the likely cause against a stored baseline (a checkout that does not install from its tree):
    that is named with pip's own reason and the fix, not pip's output verbatim."""
    said = child_sessions.log_tail(log, 40).splitlines()
    at = next((i for i, line in enumerate(said) if f" could not install {spec}" in line), None)
    if at is None:
        return f"the counted run exited {code}: {child_sessions.log_tail(log, 5, ' | ')}"
    pips = [line.strip() for line in said[at + 1 :] if line.strip()]
    # pip's summary line (a failed build's "× ..."), else its last error, else its last line
    reason = next((line for line in pips if line.startswith("×")), "") or next(
        (line for line in reversed(pips) if line.lower().startswith("error:")),
        pips[-1] if pips else "no reason given",
    )
    reason = re.sub(r"^(error:|×)\s*", "", reason, flags=re.IGNORECASE).rstrip(".")
    kind, _, what = spec.partition(":")
    where = (
        f"in a checkout of {what[:10]}, pip install --no-deps --target DIR ."
        if kind == "git"
        else f"pip install --no-deps --target DIR {what}"
    )
    return (
        f"its base side ({spec}) could not be installed apart: {reason}; the project must "
        f"install from its tree, as the base side of a count does ({where} shows the whole error)"
    )


def _stay(n: int, why: str) -> str:
    them = f"the {n} benchmarks" if n != 1 else "the benchmark"
    return f"{them} time left undecided stay undecided: {why}"
