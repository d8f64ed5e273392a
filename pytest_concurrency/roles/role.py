"""A child's role: what the plugin tells each pytest process it starts, on its command line.

``--concurrency-role=JSON`` (``Role.argv``) carries the kind of process and the little it needs
(where to write what it found, the socket its turns are served on, ...); ``parse`` reads it back.
"""

import json
from dataclasses import asdict, dataclass, fields

import pytest

#: The kinds of process the plugin starts (the user's own has none).
PROBE = "probe"  # collects only: how many tests its session would measure in its own process
KERNEL_PASS = (
    "kernel-pass"  # before a counted session: those tests at full speed, for kernel figures
)
LAYOUT_PASS = "layout-pass"  # before a counted session: those tests counted in another layout
COUNTED = "counted"  # the user's session run again under valgrind
SIDE = "side"  # one side of --concurrency-against (A, the base, or B, the head)
BASE = "base"  # the user's session on the base side's code (counted against the base)
#: the user's session on the head's code, counted against the base: the base's twin, with the
#: base's install replaced by a stand-in of the same length (runner/sides.py: same_length)
HEAD = "head"
AGAIN = "again"  # against a stored time baseline: the suspects' tests again, in a fresh process
#: against a stored counted baseline, when a count moved: the session's tests counted again, in a
#: process started otherwise (roles/recount.py)
RECOUNT = "recount"
KINDS = (PROBE, KERNEL_PASS, LAYOUT_PASS, COUNTED, SIDE, BASE, HEAD, AGAIN, RECOUNT)

#: What a Ctrl-C says when it landed before a process's session started (its options read, its
#: probe, its plugins configured): nothing of the user's is written that early.
AT_START_UP = "interrupted at start-up: no baseline, report, verdict or rounds written"


@dataclass(frozen=True)
class Role:
    """A child's role, as its parent passes it on the child's command line."""

    kind: str
    out: str | None = None  # the file it writes what it found to (probe, passes, sides)
    launcher: int | None = None  # counted, layout pass, recount: the pid that started it
    kernel: str | None = None  # counted: the kernel pass's file, if it wrote one
    layouts: tuple[str, ...] = ()  # counted, recount: the layout passes' files
    forked: bool = False  # counted, recount: it forks the layout passes, after its collection
    layout: int = 0  # layout pass: which layout (measure/layouts.py)
    side: str | None = None  # side: "A" (base) or "B" (head)
    socket: str | None = None  # side: where the turns are served (runner/lockstep.py)
    base_dir: str | None = None  # a side, and what it starts: where the base's code is installed
    only: str | None = None  # a later pair's side, again, recount: a file of the node ids it runs
    running: str | None = None  # passes, counted: the file naming the test in progress (crash.py)
    #: base, head: whether the run's one probe found tests measured in the session's own process
    #: (both sides collect the same test files), so that neither probes again
    measured_here: bool = False
    #: base, head: the file descriptor of its end of a socket pair with the run's one start-up
    #: under valgrind, which forks the side's counted session (shared_start.py)
    shared_start: int | None = None

    def need(self, name: str) -> str:
        """A field this kind of process cannot run without; a usage error when it is missing."""
        value = getattr(self, name)
        if not value:
            raise pytest.UsageError(f"--concurrency-role: a {self.kind} needs {name!r}")
        return str(value)

    def argv(self) -> list[str]:
        given = {k: v for k, v in asdict(self).items() if v not in (None, (), 0) or k == "kind"}
        return [f"--concurrency-role={json.dumps(given, separators=(',', ':'))}"]


def parse(text: str) -> Role:
    """``--concurrency-role``'s value; a usage error when it is not one the plugin writes."""
    try:
        given = json.loads(text)
        known = {f.name for f in fields(Role)}
        if not isinstance(given, dict) or given.get("kind") not in KINDS or set(given) - known:
            raise ValueError
        if "layouts" in given:
            given["layouts"] = tuple(given["layouts"])
        return Role(**given)
    except (ValueError, TypeError):
        raise pytest.UsageError(
            f"--concurrency-role={text}: the plugin passes this option to the pytest processes it "
            "starts itself; do not give it (remove it from the command line and addopts)"
        ) from None


#: The line a run against the base (timed or counted) ends with on a Ctrl-C.
AGAINST_INTERRUPTED = "interrupted: no verdict against the base side, nothing written"
