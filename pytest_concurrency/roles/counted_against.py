"""``--concurrency-against=SPEC --concurrency-measure=instructions``: both sides counted in one job.

Instruction counts do not drift with the machine's load, so the two sides need no turns: each is
a whole counted run of the user's command line (its passes, its counted session: counting.py),
the base's first, importing its install first (``roles.BASE``), then the head's
(``roles.HEAD``: the same shapes, an empty stand-in for the install), their counted sessions
forked from one start-up under valgrind (shared_start.py),
each saving what it counted to a baseline file in the run's directory. The head's counts are then
judged against the base's by the stored-baseline gate (gate/compare.py: the median over layouts,
1% for users' own tests counted in three layouts, the workloads' own rule for theirs, where the
count went for a regression), the versions each side imported named in the verdicts. Nothing of
the user's is stored.
"""

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from .. import session_end
from ..backends import scratch
from ..exit_codes import Exit
from ..measure import callgrind
from ..report import terminal
from ..runner import sides
from ..store import atomic, baseline
from . import child_sessions, counting, shared_start
from .argv import HEAD_ONLY, no_coverage, traced_by_coverage, without
from .role import AGAINST_INTERRUPTED, BASE, HEAD, Role

#: What a side's command line must not carry: it judges nothing and writes nothing of the user's.
NOT_IN_A_SIDE = {**HEAD_ONLY, "--concurrency-against": True, "--concurrency-against-keep": True}


def run(config, settings, run: sides.Run, written: list[str]) -> int:
    """Count the base side, then the head; judge the head's counts against the base's; with
    ``--concurrency-save-baseline``, the head's counts saved there as any counted session's are."""
    # each side's own process only launches its counted session: coverage traced nothing in it
    args = [*without(config.invocation_params.args, NOT_IN_A_SIDE), *no_coverage(config)]
    files = {side: run.directory / f"{side}.json" for side in ("base", "head")}
    print(
        f"pytest-concurrency: counting this code (head) against {run.spec} (base): the base side's run "
        "first (its output in a log), then the head's",
        flush=True,
    )
    if traced_by_coverage(config):
        print(counting.COVERAGE_OFF, flush=True)
    # one probe for both sides: they collect the same test files (the head's stand-in first on
    # the path, as the head's session has it)
    here = bool(counting.tests_measured_here(config, str(sides.same_length(run.site))).here)
    started = time.monotonic()
    # each side writes its tests' outcomes in the run's directory (both command lines of one
    # shape); the head's become the user's --junitxml, as pytest alone would have written it
    users_junit = _junit(config)
    junit = {side: run.directory / f"{side}-junit.xml" for side in files} if users_junit else {}
    try:
        with contextlib.ExitStack() as stack:
            shared = _shared_start(stack, run) if here else None
            launches = _launches(args, files, run.site, junit, here, shared)
            handed = shared or {}
            base_code = _side(*launches["base"], run.root, run.directory, handed.get("base"))
            counted_base = time.monotonic() - started
            head_code = _side(*launches["head"], run.root, None, handed.get("head"))
        if users_junit and junit["head"].exists():
            atomic.write_text(users_junit, junit["head"].read_text(encoding="utf-8"))
    except KeyboardInterrupt:
        print(f"\npytest-concurrency: {AGAINST_INTERRUPTED}", file=sys.stderr, flush=True)
        return Exit.INTERRUPTED
    shared_line = ", their counted sessions forked from one start-up under valgrind" * bool(shared)
    print(
        f"pytest-concurrency: the base side counted in {counted_base:.0f} s, the head in "
        f"{time.monotonic() - started - counted_base:.0f} s{shared_line}",
        flush=True,
    )
    return _judge(settings, run, files, base_code, head_code, written)


def _junit(config) -> str | None:
    """Where the user asked for a JUnit XML file (``--junitxml``), as pytest resolves it."""
    given = getattr(config.option, "xmlpath", None)
    return os.path.normpath(os.path.abspath(os.path.expanduser(given))) if given else None


def _shared_start(stack: contextlib.ExitStack, run: sides.Run) -> dict[str, int] | None:
    """The sides' one start-up under valgrind (shared_start.py), running until ``stack`` closes:
    each side's end of its pair with it, or None when it serves no one (said why)."""
    directory = stack.enter_context(
        tempfile.TemporaryDirectory(
            prefix="callgrind-", dir=scratch.directory(), ignore_cleanup_errors=True
        )
    )
    children = stack.enter_context(child_sessions.Children())
    server = shared_start.server_argv(sides.top_level(run.site))
    return shared_start.begin(
        children,
        callgrind.command(server, directory),
        callgrind.counted_env(dict(os.environ), directory),
        run.root,
        run.directory / "shared-start.log",
        ("base", "head"),
    )


def _launches(
    args: list,
    files: dict,
    site: Path,
    junit: dict,
    measured_here: bool = False,
    shared: dict[str, int] | None = None,
) -> dict[str, tuple[list, dict]]:
    """Each side's command line and environment, of one shape: the base's install, or the head's
    empty stand-in as long (sides.same_length), in its role and first on ``PYTHONPATH`` (its
    children inherit both), and the environments padded to one size (sides.same_size). A count
    follows where objects land: with the head a plain user's session, its processes started with
    a shorter command line and environment than the base's, one more difference between them.
    ``measured_here``: what the run's probe found, in each side's role (neither probes again);
    ``shared``: each side's end of its pair with the start-up that forks its counted session."""
    shared = shared or {}
    roles = {
        "base": Role(
            BASE, base_dir=str(site), measured_here=measured_here, shared_start=shared.get("base")
        ),
        "head": Role(
            HEAD,
            base_dir=str(sides.same_length(site)),
            measured_here=measured_here,
            shared_start=shared.get("head"),
        ),
    }
    launches = {}
    for side, role in roles.items():
        argv = child_sessions.command([*args, f"--concurrency-save-baseline={files[side]}"])
        argv += [f"--junitxml={junit[side]}"] if junit else []
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [role.base_dir, env.get("PYTHONPATH")]))
        launches[side] = ([*argv, *role.argv()], env)
    sides.same_size(launches)
    return launches


def _side(argv: list, env: dict, root: Path, log_dir: Path | None, shared: int | None) -> int:
    """One side's counted run (it saves its counts itself); the base's output goes to a log, the
    head's is the run's (after a Ctrl-C, it says where). Its counted sessions get their grace;
    ``shared``: its end of its pair with the shared start-up, handed to it alone."""
    log = log_dir and log_dir / "base-side.log"
    fds = () if shared is None else (shared,)
    return child_sessions.run(argv, cwd=root, env=env, log=log, fds=fds, depth=1)


def _sides_line(base_meta: dict, head_meta: dict) -> str:
    """What each side imported that differs: the versions recorded with their counts."""
    base, head = base_meta.get("under_test") or {}, head_meta.get("under_test") or {}
    moved = [
        f"{dist} {base.get(dist, '(not installed)')} (base) against "
        f"{head.get(dist, '(not installed: the working tree)')} (head)"
        for dist in sorted(base.keys() | head.keys())
        if base.get(dist) != head.get(dist)
    ]
    return "; ".join(moved) or "the same versions on both sides (the base side's own code first)"


def _judge(
    settings, run: sides.Run, files: dict, base_code: int, head_code: int, written: list[str]
) -> int:
    """The head's counts through the session's end (session_end.finish: judged against the
    base's, saved, reported, as any session's), said here; the run's exit status."""
    if head_code in (Exit.INTERRUPTED, Exit.USAGE_ERROR):
        return head_code
    log = run.directory / "base-side.log"
    if not files["base"].exists():
        print(
            f"pytest-concurrency: NOTHING JUDGED (exit {Exit.NOTHING_JUDGED}): against the base: the "
            f"base side ({run.spec}) exited {base_code} and counted nothing: "
            f"{child_sessions.first_error(log, 15)}"
        )
        return Exit.NOTHING_JUDGED
    if not files["head"].exists():
        return head_code or Exit.NOTHING_JUDGED  # the head's session said why
    try:
        base, head = baseline.load(files["base"]), baseline.load(files["head"])
    except baseline.BaselineError as exc:
        print(f"pytest-concurrency: ERROR: {exc}")
        return Exit.TESTS_FAILED
    ended = session_end.Ended(
        records=list(head.records),
        node_ids={},
        document=dict(head.doc),  # saved only if every benchmark test passed (the head's end)
        nothing_judged="the head side recorded no benchmark",
        refused=None,
        written=written,
        meta=head.meta,
        against=f"the base side ({run.spec})",
    )
    outcome = session_end.finish(settings, base, None, ended)
    print(" counted against the base side ".center(80, "-"))
    print(f"Sides: {_sides_line(base.meta, head.meta)}")
    print(terminal.render(outcome.records, outcome.gate, memory=outcome.memory, every=True))
    for line, _ in session_end.said(outcome):
        print(line)
    code = outcome.status(head_code)
    if settings.verdicts:  # the head's counts judged on the base's (read by roles/arbiter.py)
        failed = code == Exit.TESTS_FAILED and not outcome.failed
        return session_end.write_verdicts(settings, outcome, written, code, failed)
    return code
