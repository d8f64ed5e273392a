"""A stored time gate's suspects measured again: their tests run once more in a fresh pytest process.

A regression against a stored time baseline must reproduce before it fails the build
(``gate.compare.faster_sessions``). So, at the session's end, the tests of its suspects (a
regression, or a change the machine's state left undecided) run again in a pytest process of
their own (roles/again.py: ``Again``, told its role on its command line), through pytest's own
protocol: their fixtures (event loops, servers, temporary directories, monkeypatches) are set up
for them again and torn down after, and no benchmarked function is called outside its test.

Why a fresh process, not more rounds inside the test: two processes of the same code differ for
their whole life (hash seed, address layout, what was allocated where). Rounds taken again in the
same process repeat its offset: on real suites here, unchanged yarl and zeroconf read +8% to +18%
in one process and reproduced it in that process's second session (docs/evidence/real-suites.md).
A change of the code shows in two processes; a process's offset does not.

Counted (``counted``), the suspects are the counts that moved beyond the threshold, either way,
and their fresh process is the counted session again under valgrind, started otherwise
(roles/recount.py): a count follows where the start-up put the interpreter's own objects, which
no layout forked after it moves.
"""

import json
import os
import subprocess
import sys
import tempfile

from ..backends import scratch
from ..exit_codes import Exit
from ..measure import records
from ..measure.records import Record
from . import child_sessions, crash, stretched_timeouts
from .argv import QUIET_FAULTHANDLER, apart, no_coverage, started_otherwise
from .role import AGAIN, RECOUNT, Role

#: ``--concurrency-remeasure=every``: every benchmark's test runs again in the fresh process.
EVERY = "every"
#: The fresh process's exit statuses that still hand back rounds (a test that failed there has
#: none: its first verdict stands).
_MEASURED = (Exit.OK, Exit.TESTS_FAILED)


class SecondSessions:
    """In the session's process: the suspects' tests run again in a fresh one (``for_suspects``)."""

    def __init__(self, config, settings, counted: bool = False):
        self.config = config
        self.settings = settings
        self.counted = counted  # a counted session's suspects: counted again, started otherwise

    def for_suspects(
        self, suspects: list, recs: list[Record], node_ids: dict
    ) -> tuple[dict, list[str]]:
        """The records of the suspects' tests (every benchmark's, ``--concurrency-remeasure=every``;
        node ids by key: ``node_ids``) measured in a fresh process, and a line for each one it did
        not measure (its first verdict stands)."""
        every = self.settings.remeasure == EVERY and not self.counted
        keys = [r.key for r in recs] if every else suspects
        if not keys:
            return {}, []
        wanted = sorted({node_ids[k] for k in keys if k in node_ids})
        if self.counted and wanted:
            # the session's tests again, in its order: a count also follows what ran before it
            # (yarl's ipv6 benchmark 0.24% less after two others), and the first counts more
            wanted = sorted(set(node_ids.values()))
        found: dict = {}
        why = "its test has no node id" if not wanted else self._run(wanted, found)
        reason = why or "its test recorded no rounds there (failed, skipped or deselected)"
        said = [
            f"{records.key_label(key)} was not measured a second time ({reason}); "
            "its first verdict stands"
            for key in keys
            if key not in found
        ]
        return {key: found[key] for key in keys if key in found}, said

    def _run(self, node_ids: list, found: dict) -> str:
        """Run the tests ``node_ids`` in a fresh pytest process; their records into ``found``, by
        key. Why none came back, or ``""``."""
        config = self.config
        them = f"{len(node_ids)} test{'s' * (len(node_ids) != 1)}"
        print(
            f"\npytest-concurrency: {them} counted again in a session started otherwise: a count "
            "that moved must move in two start-ups (where the interpreter's own objects land "
            "follows how its process started)"
            if self.counted
            else f"\npytest-concurrency: {them} measured again in a fresh process: a regression "
            "must show in two processes (two processes of the same code differ for their whole "
            "life)",
            file=sys.stderr,
            flush=True,
        )
        with tempfile.TemporaryDirectory(
            prefix="again-", dir=scratch.directory(), ignore_cleanup_errors=True
        ) as where:
            only, out, log = (os.path.join(where, n) for n in ("only.json", "out.json", "log"))
            with open(only, "w", encoding="utf-8") as fh:
                json.dump(node_ids, fh)
            argv, added, slower = self._command(where, out, only, crash.path(where, "again"))
            # each round has its own deadline (--concurrency-timeout); this bounds what has none
            budget = (self.settings.timeout or 120.0) * (len(node_ids) + 1) * slower
            try:
                code = child_sessions.run_apart(
                    config, argv, where, "again", added, log=log, timeout=budget
                )
            except subprocess.TimeoutExpired:  # it has been stopped
                return f"the fresh process did not end within {budget:.0f} s and was stopped"
            ended = crash.crashed(crash.path(where, "again"))
            if ended is not None:
                return f"{ended} ended the fresh process ({crash.how(code)})"
            try:
                with open(out, encoding="utf-8") as fh:
                    doc = json.load(fh)
            except (OSError, ValueError):
                doc = None
            if code not in _MEASURED or not isinstance(doc, dict):
                return f"the fresh process exited {code}: {child_sessions.log_tail(log, 5, ' | ')}"
        found.update((rec.key, rec) for rec in records.Document.of(doc).records)
        return ""

    def _command(self, where: str, out: str, only: str, running: str) -> tuple[list, dict, int]:
        """The fresh process's command line, what its environment adds, and how much slower than
        a timed one it runs. Counted, it is the counted session again (under valgrind, as this
        one, which follows its children), its layouts forked after its collection as here."""
        argv = apart(self.config, where, "again")
        if not self.counted:
            return [*argv, *Role(AGAIN, out, only=only, running=running).argv()], {}, 1
        outs = tuple(
            os.path.join(where, f"layout{n}.json") for n in range(1, self.settings.layouts)
        )
        role = Role(
            RECOUNT, out, os.getpid(), layouts=outs, forked=bool(outs), only=only, running=running
        )
        argv += [*role.argv(), *no_coverage(self.config), *QUIET_FAULTHANDLER]
        return argv, started_otherwise(1), stretched_timeouts.SLOWER
