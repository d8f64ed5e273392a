"""The plugin's options, declared once: one entry a setting, its flag and its ini key together.

``add`` registers every entry with pytest (``parser.addoption`` and ``parser.addini``, both made
from the same entry); ``settings.from_config`` parses every entry once, the command line winning
over the ini file, into a frozen ``Settings``. A new setting is one more ``Option`` in ``OPTIONS``
(and a field of ``Settings`` of the same name).
"""

import argparse
from dataclasses import dataclass

from . import backends, measure, workloads
from .exit_codes import Exit
from .gate import memory as memory_gate
from .gate import undecided
from .gate.compare import DEFAULT_MACHINE_TOLERANCE
from .measure import stopping
from .store.history import DEFAULT_KEEP
from .store.shape import MAX_SAMPLES

GROUP = ("concurrency", "concurrency models (pytest-concurrency-bench)")

# What an entry's value is: each kind has its parser in settings.py (settings.PARSERS).
TEXT = "text"  # a string, as given
CHOICE = "choice"  # one of ``choices``
MEASURE = "measure"  # one of ``choices`` whose instrument is available on this machine
BACKENDS = "backends"  # a comma-separated list of backend specs
COUNT = "count"  # a whole number within ``bounds``
SECONDS = "seconds"  # a finite number within ``bounds``
PERCENT = "percent"  # 10 or 10% -> 0.10, above 0 and below 1000 (settings.parse_percent)
PATH = "path"  # a path, read or written later
NEW_FILE = "new-file"  # a file the run writes: its directory must be writable now
SWITCH = "switch"  # a store_true flag; ini: true or false
THRESHOLD_LINES = "threshold-lines"  # ini lines KEY = PCT
SHARD = "shard"  # I/N: the I-th of N shards (gate/shards.py)
KINDS = (
    TEXT,
    CHOICE,
    MEASURE,
    BACKENDS,
    COUNT,
    SECONDS,
    PERCENT,
    PATH,
    NEW_FILE,
    SWITCH,
    THRESHOLD_LINES,
    SHARD,
)


@dataclass(frozen=True)
class Option:
    """One setting: where it is given (flag, ini key or both), what it is, and its default."""

    field: str | None  # the Settings attribute it fills (None: read elsewhere, e.g. roles.py)
    kind: str  # one of KINDS
    default: object
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    hidden: bool = False  # left out of --help (options the plugin passes to its own children)
    #: COUNT, SECONDS: the lowest and highest value allowed (each a bound on what a run costs, or
    #: on what the code it reaches takes: the watchdog's timer refuses 1e10 s)
    bounds: tuple[float, float] | None = None
    #: "--concurrency-scale" and "concurrency_scale", named after the field, unless given; None:
    #: not on the command line (``flag``), not an ini key (``ini``)
    flag: str | None = ""
    ini: str | None = ""

    def __post_init__(self) -> None:
        if self.flag == "":
            object.__setattr__(self, "flag", f"--concurrency-{self.field}".replace("_", "-"))
        if self.ini == "":
            object.__setattr__(self, "ini", f"concurrency_{self.field}")
        if self.kind not in KINDS:
            raise ValueError(f"{self.flag or self.ini}: unknown kind {self.kind!r}")
        if (self.kind in (COUNT, SECONDS)) != (self.bounds is not None):
            raise ValueError(
                f"{self.flag or self.ini}: a count or seconds, and only they, have bounds"
            )
        if self.flag is None and self.ini is None:
            raise ValueError(f"{self.field}: give a flag, an ini key or both")

    @property
    def dest(self) -> str | None:
        """The attribute of ``config.option`` the flag's value lands in (``config.getoption``)."""
        return self.flag[2:].replace("-", "_") if self.flag else None

    @property
    def ini_type(self) -> str:
        if self.kind == SWITCH:
            return "bool"
        return "linelist" if self.kind == THRESHOLD_LINES else "string"

    @property
    def ini_default(self) -> object:
        """What ``config.getini`` gives when the ini file does not set it: read as not given."""
        if self.kind == SWITCH:
            return False
        return [] if self.kind == THRESHOLD_LINES else ""


OPTIONS: tuple[Option, ...] = (
    Option(
        "backends",
        BACKENDS,
        default=tuple(backends.DEFAULT_SPECS),
        metavar="LIST",
        help="comma-separated models to run, e.g. gevent,asyncio,multiprocessing[fork] "
        f"(default: {', '.join(backends.DEFAULT_SPECS)})",
    ),
    Option(
        "scale",
        CHOICE,
        default="default",
        choices=tuple(workloads.SCALES),
        metavar="SCALE",
        help=f"workload sizes: {', '.join(workloads.SCALES)} (default: default)",
    ),
    Option(
        "measure",
        MEASURE,
        default="time",
        choices=tuple(measure.names()),
        metavar="MEASURE",
        help="what a round's sample is: time (wall-clock seconds, the default) or instructions "
        "(CPU instructions counted under valgrind: exact, and blind to the machine's speed and load)",
    ),
    Option(
        "rounds",
        COUNT,
        ini=None,
        default=None,
        bounds=(1, MAX_SAMPLES),  # a baseline holding more is refused when read
        metavar="N",
        help="measured rounds per benchmark (default: the workload's per scale when timing, 3 when "
        "counting)",
    ),
    Option(
        "median_width",
        PERCENT,
        default=stopping.DEFAULT_WIDTH,
        metavar="PCT",
        help="a timed workload case stops its rounds once its median's 95-percent interval is at most "
        f"PCT of it wide (default: {stopping.DEFAULT_WIDTH * 100:g}; at least "
        f"{stopping.MIN_ROUNDS} rounds, at most the workload's); a session that reads or saves "
        "a baseline, or runs against a base, and --concurrency-rounds run every round",
    ),
    Option(
        "timeout",
        SECONDS,
        default=None,  # the instrument's: settings.from_config
        bounds=(0.01, 86400.0),  # a day
        metavar="SECONDS",
        help="longest a round, or a concurrency_backend.run call in your own test, may take before "
        "it fails as stalled (default: 120; 1200 when counting); given (or in the ini file), it bounds "
        "your tests with benchmark alone too: one fails when no round of it ended for the timeout "
        "plus a grace, and the session goes on",
    ),
    Option(
        "jobs",
        COUNT,
        default=None,  # one a core when counting, else 1: settings._jobs
        bounds=(1, 1024),
        metavar="N",
        help="with --concurrency-measure=instructions: cases counted at once, each in a process "
        "of its own (default: one per core)",
    ),
    Option(
        "layouts",
        COUNT,
        default=3,
        bounds=(1, 25),  # each one more whole counted session under valgrind
        metavar="N",
        help="with --concurrency-measure=instructions: count your own benchmark tests in N layouts "
        "(the interpreter's objects landing elsewhere; N-1 counted passes beside the session) and "
        "judge the median (default: 3)",
    ),
    Option(
        "layouts_from",
        CHOICE,
        default="fork",
        choices=("fork", "start"),
        metavar="HOW",
        help="with --concurrency-measure=instructions: how the other layouts' passes begin: fork "
        "(forked from the counted session after its collection, each moving its heap its own way "
        "first: one start-up under valgrind for all; default) or start (each a pytest process of "
        "its own, started with its objects landing elsewhere: a start-up and a collection each)",
    ),
    Option(
        "kernel_pass",
        SWITCH,
        default=False,
        help="with --concurrency-measure=instructions: time your own benchmark tests at full speed "
        "first, outside valgrind, for their kernel figures (syscalls, context switches, page "
        "faults), which the kernel gate then judges (a timed session of its own; without it they "
        "read 'not measured')",
    ),
    Option(
        "isolate",
        SWITCH,
        default=False,
        help="run each model's workloads in a fresh worker process of its own, and the call of each of "
        "your own benchmark tests (benchmark, with or without concurrency_backend) in a child forked "
        "for it (a crash, a hang or a leaked thread fails that test alone); not when counting, nor on "
        "the sides of --concurrency-against",
    ),
    Option(
        "benchmark_table",
        SWITCH,
        default=False,
        help="also print pytest-benchmark's own table for the built-in workloads (left out by "
        "default: one wide row a case, where the comparison tables say it in 100 columns)",
    ),
    Option(
        "save_baseline",
        NEW_FILE,
        ini=None,
        default=None,
        metavar="PATH",
        help="after the run, write a baseline with raw samples (atomically)",
    ),
    Option(
        "baseline_sessions",
        COUNT,
        default=DEFAULT_KEEP,
        bounds=(1, 100),
        metavar="K",
        help="sessions a saved baseline keeps: saving to an existing baseline adds this run's "
        f"session and drops the oldest beyond K; 1 replaces it (default: {DEFAULT_KEEP})",
    ),
    Option(
        "baseline",
        PATH,
        ini=None,
        default=None,
        metavar="PATH",
        help="compare against this baseline; a regression fails the session",
    ),
    Option(
        "threshold",
        PERCENT,
        default=None,  # each record's instrument's
        metavar="PCT",
        help="practical threshold for a regression, percent (default: 7 for time, 2 for "
        "instructions, 1 for your own tests counted in 3 layouts or more, and counts of workloads "
        "that wait, such as IO, judged beyond 10; against the base: 3, 5 for threads and processes)",
    ),
    Option(
        "thresholds",
        THRESHOLD_LINES,
        flag=None,
        default={},
        help="threshold overrides, one per line: KEY = PCT with KEY a backend, a workload or "
        "workload:backend (e.g. gevent = 15, ring:uvloop = 20)",
    ),
    Option(
        "memory_threshold",
        PERCENT,
        default=None,  # memory_gate.DEFAULT_THRESHOLD
        metavar="PCT",
        help="how far a memory figure (per task, peak heap) may grow over the baseline's, percent "
        f"(default: {memory_gate.DEFAULT_THRESHOLD * 100:.0f}); a leak fails without a baseline too",
    ),
    Option(
        "memory_plain",
        SWITCH,
        flag="--concurrency-memory",
        ini="concurrency_memory",
        default=False,
        help="give users' own benchmark tests the memory pass too (the built-in workloads always "
        "have it): after its rounds, the test's function runs 6 more times and a leak in the Python "
        "heap, the C heap, threads or greenlets fails the session; one test: "
        "@pytest.mark.concurrency(memory=True)",
    ),
    Option(
        "machine_tolerance",
        PERCENT,
        default=DEFAULT_MACHINE_TOLERANCE,
        metavar="PCT",
        help="judge times normalized by the machine-speed calibration only when this machine's "
        "speed differs from the baseline's by more than PCT "
        f"(default: {DEFAULT_MACHINE_TOLERANCE * 100:.0f}; a large value never normalizes)",
    ),
    Option(
        "remeasure",
        CHOICE,
        default="suspects",
        choices=("suspects", "every"),
        metavar="WHICH",
        help="against a stored time baseline, which benchmarks get a second session: their tests "
        "run again in a fresh process, the faster session judged: suspects (a regression must "
        "reproduce in two processes before it fails the build; default) or every (steadier, "
        "twice the time)",
    ),
    Option(
        "undecided",
        CHOICE,
        default=undecided.PASS,
        choices=(undecided.PASS, undecided.EXIT),
        metavar="END",
        help="what a run ends with when neither time nor counting instructions decided a "
        "benchmark (time undecided on a loaded machine; its tests counted on both sides, with "
        "valgrind, and the counts not regressed), or a counted run's counts did not (its layouts "
        f"moved on both sides of the threshold): {undecided.PASS} (exit 0, said first; "
        f"default) or {undecided.EXIT} (exit {Exit.UNDECIDED}, for a workflow to mark neutral "
        "or fail)",
    ),
    Option(
        "allow_cross_python",
        SWITCH,
        ini=None,
        default=False,
        help="compare against a baseline recorded on another Python version (normally refused)",
    ),
    Option(
        "gate_native",
        SWITCH,
        default=False,
        help="judge the native reference rows (go, rust, kotlin) in the gate like the Python models "
        "(by default they are shown and compared, never failing the build)",
    ),
    Option(
        "against",
        TEXT,
        ini=None,
        default=None,
        metavar="SPEC",
        help="also run every benchmark on a base version of the code, round for round in turns "
        "with this one, and judge the change on the paired ratios: git:REF of this repository, a "
        "path that exists (project, wheel, sdist) or pip:REQUIREMENT (pip:mylib==1.4.2); "
        "installed apart with pip --target",
    ),
    Option(
        "against_keep",
        PATH,
        ini=None,
        default=None,
        metavar="DIR",
        help="with --concurrency-against: copy each pair of sessions' rounds and logs into DIR "
        "(1/side-A.json, 1/base-side.log, ...), to look into a verdict later",
    ),
    Option(
        "shard",
        SHARD,
        default=None,
        metavar="I/N",
        help="run only the I-th of N shards of the suite (each test's shard is a hash of its node "
        "id, stable as the suite grows): a baseline's benchmarks of other shards are neither "
        "missing nor new; join the shards' files with python -m pytest_concurrency merge",
    ),
    Option(
        "verdicts",
        NEW_FILE,
        ini=None,
        default=None,
        metavar="PATH",
        help="write the session's records, verdicts and exit status as JSON (atomically), for "
        "python -m pytest_concurrency merge --verdicts",
    ),
    Option(
        "history",
        PATH,
        default=None,
        metavar="DIR",
        help="keep this run in DIR: one new file a run (figures, verdicts, commit, versions), "
        "never rewritten; a failed or interrupted run adds none. Draw the folder with "
        "python -m pytest_concurrency history DIR --html SITE",
    ),
    Option(
        "report_md",
        NEW_FILE,
        ini=None,
        default=None,
        metavar="PATH",
        help="write the comparison tables as markdown (CI job summary)",
    ),
    Option(
        "plot_dir",
        PATH,
        flag="--concurrency-plot",
        ini=None,
        default=None,
        metavar="DIR",
        help="write charts per workload into DIR (needs matplotlib)",
    ),
    Option(
        "only",
        PATH,
        ini=None,
        default=None,
        metavar="FILE",
        hidden=True,
        help="only the tests whose node ids the JSON file lists (the plugin's own counted run of "
        "what time left undecided, roles/arbiter.py); not for users",
    ),
    Option(
        None,  # parsed by roles.given, before the settings are read
        TEXT,
        flag="--concurrency-role",
        ini=None,
        default=None,
        metavar="JSON",
        hidden=True,
        help="the role of a pytest process the plugin started itself (roles.py); not for users",
    ),
)


def add(parser) -> None:
    """Register every entry of ``OPTIONS``: its flag in the plugin's group, its ini key."""
    group = parser.getgroup(*GROUP)
    for o in OPTIONS:
        if o.flag:
            if o.kind == SWITCH:
                # None when absent: the ini key, if any, decides then
                group.addoption(o.flag, action="store_true", default=None, help=_help(o))
            else:
                group.addoption(o.flag, metavar=o.metavar, default=None, dest=o.dest, help=_help(o))
        if o.ini:
            parser.addini(o.ini, o.help, type=o.ini_type, default=o.ini_default)


def _help(o: Option) -> str:
    return argparse.SUPPRESS if o.hidden else o.help
