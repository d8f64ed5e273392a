"""What of the user's command line and environment a child pytest process gets: a side, a pass,
a counted side, a second session."""

import os

from ..backends import child_env

#: Options the base side must not act on: it writes no baseline, report or JSON of the user's.
#: (True: the option takes a value, given as ``--flag=value`` or ``--flag value``.)
HEAD_ONLY = {
    "--concurrency-baseline": True,
    "--concurrency-save-baseline": True,
    "--concurrency-baseline-sessions": True,
    "--concurrency-report-md": True,
    "--concurrency-verdicts": True,
    "--concurrency-history": True,
    "--concurrency-plot": True,
    "--benchmark-json": True,
    "--benchmark-save": True,
    "--benchmark-autosave": False,
    "--benchmark-compare": False,
    "--benchmark-compare-fail": True,
    "--benchmark-histogram": False,
    "--junitxml": True,
    "--junit-xml": True,
    "--benchmark-cprofile-dump": False,
}


def without(args, options: dict) -> list[str]:
    """``args`` less ``options`` (name -> whether it takes a value, as in ``HEAD_ONLY``)."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = options[name] and "=" not in arg
            continue
        out.append(arg)
    return out


def apart(config, where: str, name: str) -> list[str]:
    """The user's command line for a pytest process the plugin starts beside or after the user's
    session (a counted run's pass, a suspect's second process): less what only the user's session
    writes, and with its temporary directories and cache in ``where``: a --basetemp of the user's
    is emptied by every session that uses it (a pass beside the counted session would empty the
    counted session's), pytest's numbered ones would rotate the user's last three out, and the
    cache (--lf) is the user's session's to write."""
    argv = without(config.invocation_params.args, HEAD_ONLY)
    argv.append(f"--basetemp={os.path.join(where, name + '-tmp')}")
    if config.pluginmanager.has_plugin("cacheprovider"):
        argv += ["-o", f"cache_dir={os.path.join(where, name + '-cache')}"]
    return argv


def own_coverage_data(where: str, name: str) -> dict:
    """The environment of a process the plugin starts beside the user's session: a suite whose
    addopts turn coverage on (pytest-cov) traces it there too, so that its counts are the counted
    session's, but writes its data in the run's own directory. In the project's, coverage's
    parallel data files of processes running side by side were combined while one was writing
    its own: aiohttp's counted session ended in an INTERNALERROR (exit 3, its verdict unsaid)."""
    return {"COVERAGE_FILE": os.path.join(where, f"{name}.coverage")}


def no_coverage(config) -> list[str]:
    """``--no-cov`` where pytest-cov is loaded (a suite's addopts turn it on), last on the command
    line (a ``--cov`` after it makes pytest-cov warn), for a process whose coverage no one reads
    (a probe: 1-2 s of yarl's 3-3.5 s of CPU) and for every counted one: with multidict's
    ``--cov-context=test`` a layout forked from a counted session failed on coverage's data file
    (``DataError: ... no such table: context``: the child, seeing a new pid, erased and made again
    the file its parent was writing), and a count must not depend on whether a tracer ran
    (docs/gates/instructions.md)."""
    return ["--no-cov"] if config.pluginmanager.has_plugin("pytest_cov") else []


def traced_by_coverage(config) -> bool:
    """Whether the user's options turn pytest-cov's coverage on in this session."""
    option = config.option
    return bool(getattr(option, "cov_source", None)) and not getattr(option, "no_cov", False)


#: A counted session runs 30-50x slower than the project's own ``faulthandler_timeout`` expects
#: (aiohttp's: 30 s), and when it fires, faulthandler's thread dumps every thread's traceback: its
#: instructions are counted in whatever round is running, and under valgrind the dump read a frame
#: being torn down and took the process down with SIGSEGV (a layout pass of aiohttp's benchmarks).
QUIET_FAULTHANDLER = ["-o", "faulthandler_timeout=0"]


#: A pad's length: an odd one, so that no allocator size class moves by a whole number of blocks.
_PAD = 4093
#: Pads cycle through this many lengths: a string of the environment holds 128 KiB at most
#: (Linux's MAX_ARG_STRLEN), and a baseline may keep up to 100 sessions.
_LENGTHS = 16


def started_otherwise(times: int) -> dict:
    """What a counted process's environment adds so that it starts otherwise ``times`` over: the
    pad's strings sit before the interpreter's first objects on the stack and in ``os.environ``,
    so that what the start-up allocates lands elsewhere (a count follows the start-up:
    roles/recount.py). Nothing reads it."""
    pads = times % _LENGTHS
    return {child_env.START_PAD: "x" * (_PAD * pads)} if pads else {}
