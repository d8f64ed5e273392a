"""How a round is measured: the instruments, one module each, chosen once per session.

``wallclock`` (``time``): seconds per round, pytest-benchmark's clock. ``callgrind``
(``instructions``): CPU instructions per round, counted under valgrind. Each record says
which instrument measured it (``extra_info["measure"]``); the gate and the reports ask the
record's instrument what its figures mean (unit, threshold, whether they are exact or move
with the machine), never which instrument ran.

``driver`` runs and records rounds with whichever instrument the session uses.
"""

#: Where the profile of a test's last round (where its instructions went, for an instrument that
#: knows) is read: here; by another process at full speed (``received``), this one being slow at it
#: (a worker under valgrind, or a session run whole there); or nowhere (a pass that writes rounds).
PROFILE_HERE, PROFILE_HANDED_OVER, PROFILE_NONE = "here", "handed over", "none"


class Instrument:
    """What the rest of the plugin may ask of an instrument."""

    kind = ""  # the name users pass to --concurrency-measure
    unit = ""  # of a sample: "s" or "instr"
    default_threshold = 0.0  # the gate's practical threshold (fraction) unless one is given
    exact = False  # samples repeat to the unit: judged on size alone, without statistics
    machine_bound = True  # figures move with the machine's speed and load (calibration, load guard)
    needs_launch = False  # a test measured in the session's own process needs it inside the instrument's command
    with_memory = (
        True  # RSS figures mean something under it (the memory pass itself runs in every measure)
    )
    fresh_process = False  # each workload case runs in a new worker process (isolate.py)
    memory_apart = (
        False  # the memory pass and kernel figures run in a plain worker, not where the rounds were
    )
    default_timeout = 120.0  # longest a round may take, seconds, unless --concurrency-timeout
    #: the largest sample a round can have: a baseline holding more is refused as damaged (such a
    #: sample would make every later run read "improved -100%", the gate switched off)
    most_per_round = float("inf")

    def unavailable_reason(self) -> str | None:
        return None

    def inside(self) -> bool:
        """Whether this process can measure (for ``needs_launch``: runs inside the command)."""
        return True

    def prepare_session(self) -> None:
        """Called once in a session that measures only in worker processes (``worker_command``)."""

    def worker_command(self, argv: list[str], env: dict) -> tuple[list[str], dict]:
        """How a worker that measures (``fresh_process``) is started from this session."""
        return argv, env

    def benchmark_timer(self):
        """The timer pytest-benchmark must use, or ``None`` for its own (``--benchmark-timer``)."""
        return None

    def unsupported(self, backend) -> str | None:
        """Why this instrument cannot measure ``backend``, or ``None``."""
        return None

    def rounds(self, rounds: int, warmup: int) -> tuple[int, int]:
        """(rounds, warm-up rounds) from the workload's choice for timing."""
        return rounds, warmup

    def warmed(self, warmup_samples: list) -> bool:
        """Whether the warm-up rounds so far are enough (they ran ``rounds()``'s warm-up at least)."""
        return True

    def before_round(self) -> None:
        """Called before each round, outside what is measured."""

    def counter(self):
        """A callable read before and after a round: the difference is the round's sample."""
        raise NotImplementedError

    def round_timer(self):
        """A timer for one round, read twice (at its start and its end): the difference is the
        round's sample. The counter itself, unless its readings cost less knowing which is which."""
        return self.counter()

    def per_op(self, median: float, ops: int) -> dict:
        """The figures per operation from a median round (``extra_info`` keys)."""
        raise NotImplementedError

    #: Whether what a process does between its measured stretches stays measurable (callgrind:
    #: instrumented), as the session asks while another measured test follows (``pause``).
    stays_on = False

    def pause(self) -> None:
        """Stop what measuring costs until the next stretch (callgrind's instrumentation)."""

    def after_rounds(self, profile: str = PROFILE_HERE) -> dict:
        """Extra figures right after the last round (``extra_info`` keys); ``profile``: where
        the last round's profile is read (``PROFILE_HERE`` ...)."""
        return {}

    def received_apart(self, extras: list[dict]) -> None:
        """``received`` for each of ``extras`` (in place), where this process is slow at it."""
        for extra in extras:
            self.received(extra)

    def received(self, extra: dict) -> dict:
        """A worker's figures (``after_rounds(PROFILE_HANDED_OVER)``) finished in the session's
        process."""
        return extra

    def default_threshold_for(self, layouts: int) -> float:
        """The threshold unless one is given, for a benchmark counted in ``layouts`` layouts (the
        fewer of its two sides; see layouts.py)."""
        return self.default_threshold

    def threshold_floor(self, rec) -> tuple[float, str] | None:
        """The smallest change this measure can judge for ``rec`` (a record), and why, when
        that is above the gate's threshold; ``None`` when the threshold stands."""
        return None

    def explain(self, base, current) -> str | None:
        """Where a regression of ``current`` against ``base`` (two records) came from, if known."""
        return None

    def leaves_out(self, task_kind: str) -> str | None:
        """What this measure cannot see for a model of ``task_kind`` (shown in reports)."""
        return None

    def session_meta(self) -> dict:
        """What a baseline records about how this instrument measured."""
        return {}


#: The package's folders whose code runs inside a measured process: a change there moves a
#: count although the user's code did not change (two plugin versions: ~9% on some cases).
MEASURED_CODE = ("backends", "workloads", "measure", "runner")


def measuring_side() -> dict:
    """What did the measuring, apart from the user's code: this plugin's version, a hash of
    the code in ``MEASURED_CODE``, and the interpreter's exact build. A counted baseline keeps
    it; when it differs, the baseline must be recorded again (see gate/compare.py)."""
    import hashlib
    import platform
    from importlib import metadata
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in MEASURED_CODE:
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(
                path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0"
            )
    try:
        version = metadata.version("pytest-concurrency-bench")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    return {
        "plugin": version,
        "code": digest.hexdigest()[:16],
        "python_build": f"{platform.python_version()} {' '.join(platform.python_build())} {platform.python_compiler()}",
    }


def names() -> list[str]:
    return list(_MODULES)


def instrument(kind: str | None) -> Instrument:
    """The instrument by its ``kind`` (``None``: time, as records made before instruments)."""
    import importlib

    kind = kind or "time"
    try:
        module, attr = _MODULES[kind]
    except KeyError:
        raise KeyError(f"unknown measure {kind!r}; valid: {', '.join(_MODULES)}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


_MODULES = {"time": ("wallclock", "WALLCLOCK"), "instructions": ("callgrind", "CALLGRIND")}
