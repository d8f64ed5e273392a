"""What the gate decided, per benchmark: produced by ``gate``, read by ``report``."""

from dataclasses import dataclass, field

REGRESSED = "regressed"  # slower beyond the threshold and significant: fails the session
IMPROVED = "improved"  # faster beyond the threshold and significant: baseline is stale
UNCHANGED = "unchanged"  # within the threshold, or not significant
INCONCLUSIVE = (
    "inconclusive"  # beyond the threshold but not significant, explained by the machine's load,
)
#                                or hidden only by a threshold a noisy baseline widened (``too_noisy``)
NEW = "new"  # in this run, not in the baseline
MISSING = "missing"  # in the baseline, not in this run
REFERENCE = "reference"  # a native reference row: compared and shown, never failing (unless gated, see gate.py)
LEAKED = "leak"  # memory: rounds keep what their tasks held (fails, with or without a baseline)
NOT_MEASURED = "not measured"  # kernel: a figure one side could not measure (never a pass)


@dataclass
class Verdict:
    key: tuple  # records.Record.key: (workload, params_id, backend)
    status: str
    baseline_median: float | None = None  # per round, in the measure's unit (seconds, instructions)
    current_median: float | None = None
    change: float | None = None  # current/baseline - 1 on the deciding scale (+0.14 = 14% slower)
    raw_change: float | None = None
    normalized_change: float | None = None  # after the machine-speed calibration
    decided_by: str = "raw"  # "raw", "normalized" (calibration) or "control" (measure/control.py)
    machine_speed: float | None = None  # decided by control: its controls now over the baseline's
    not_divided: str = ""  # why it was not judged over its controls (time only)
    p_value: float | None = None
    threshold: float | None = (
        None  # the practical threshold that applied (0.10 = 10%), drift included
    )
    versions_changed: dict = field(default_factory=dict)  # library -> (baseline, current)
    note: str = ""
    ci: tuple | None = None  # bootstrap interval of ``change`` (confidence per GateSettings)
    rounds: tuple | None = None  # (baseline samples, current samples)
    sessions: int | None = None  # baseline sessions behind this verdict (see history.py)
    drift: float | None = None  # between-session drift of the baseline's medians (0.03 ~ 3%)
    interference: str = (
        ""  # why the machine, not the code, may explain the change (then inconclusive)
    )
    measure: str = "time"  # the instrument behind both sides (measure.instrument(...))
    base_threshold: float | None = None  # the threshold before the baseline's drift widened it
    widened_by: str = ""  # the baseline sessions whose spread widened it ("session 2 (+50%)")
    too_noisy: bool = False  # inconclusive only because the widened threshold hid the change
    #: the status the baseline's own sessions made inconclusive (gate/sessions.within_their_span):
    #: saving a session still flags such a speed, or restarts the history on it
    within_sessions: str = ""


@dataclass
class MemoryVerdict:
    """One memory figure of one benchmark (see memory_gate.py): leak, regressed, improved,
    unchanged or new."""

    key: tuple  # records.Record.key
    metric: str  # the extra_info key judged (memory_gate.METRICS, memory_gate.LEAKS)
    status: str
    baseline: float | None = None  # in the metric's stored unit
    current: float | None = None
    change: float | None = None  # current/baseline - 1
    threshold: float | None = None
    note: str = ""


@dataclass
class MemoryResult:
    verdicts: list[MemoryVerdict] = field(default_factory=list)
    threshold: float | None = None  # the relative change a memory verdict needs (0.10 = 10%)
    notes: list = field(default_factory=list)
    not_measured: dict = field(
        default_factory=dict
    )  # (figure key, why) -> benchmarks it was missing in
    unmeasured: int = 0  # benchmarks with no memory pass at all (users' own tests that did not ask)

    @property
    def failed(self) -> bool:
        return any(v.status in (REGRESSED, LEAKED) for v in self.verdicts)

    def by_status(self, status: str) -> list[MemoryVerdict]:
        return [v for v in self.verdicts if v.status == status]


@dataclass
class GateResult:
    verdicts: list[Verdict] = field(default_factory=list)
    refused: str | None = None  # why no comparison was made (e.g. another Python minor version)
    #: Why the baseline must be recorded again (the measuring side changed): no verdict either
    #: way, its own exit status (Exit.RERECORD_BASELINE)
    rerecord: str | None = None
    calibration_ratio: float | None = None  # current machine speed / baseline's (>1 = slower now)
    summary: str = ""
    notes: list = field(default_factory=list)  # cross-machine/cross-Python remarks for the report
    memory: MemoryResult | None = None  # memory judged against the same baseline (memory_gate)
    kernel: "KernelResult | None" = (
        None  # kernel figures judged against the same baseline (gate/kernel.py)
    )
    #: what the run is judged against when it is not a baseline the user saved: the base side of
    #: ``--concurrency-against`` (``"the base side (mylib==1.2)"``); "" for a stored baseline
    against: str = ""
    #: what neither time nor counts decided, said first (gate/undecided.py: its headline, then a
    #: line a benchmark); empty when everything was decided
    undecided: list = field(default_factory=list)

    def by_status(self, status: str) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == status]

    @property
    def too_noisy(self) -> list[Verdict]:
        """Inconclusive because the baseline is too noisy: re-record it (its own exit status)."""
        return [v for v in self.verdicts if v.status == INCONCLUSIVE and v.too_noisy]

    @property
    def failed(self) -> bool:
        return (
            self.refused is not None
            or bool(self.by_status(REGRESSED))
            or bool(self.memory is not None and self.memory.failed)
            or bool(self.kernel is not None and self.kernel.failed)
        )


def nothing_in_common(gate: GateResult, baseline: str = "the baseline") -> str | None:
    """Why a gate that ran compared nothing, in one line with the fix, or None: every benchmark
    of the run is new and every one of ``baseline`` missing (another suite's file, or every test
    renamed). A refused comparison fails, and a baseline to record again has its own status."""
    if gate.refused or gate.rerecord or not gate.verdicts:
        return None
    if any(v.status not in (NEW, MISSING) for v in gate.verdicts):
        return None
    new, missing = len(gate.by_status(NEW)), len(gate.by_status(MISSING))
    return (
        f"{baseline} has no benchmark in common with this run ({new} new, {missing} missing: "
        "another suite's baseline, or every benchmark renamed), so nothing was compared; judge "
        "against a baseline saved by this suite (--concurrency-save-baseline=PATH, run on the code "
        "to compare against)"
    )


@dataclass
class KernelVerdict:
    """One kernel figure per op of one benchmark (see gate/kernel.py)."""

    key: tuple  # records.Record.key
    figure: str  # measure.kernel's figure name: "syscalls", "csw", ...
    status: str  # regressed, improved, inconclusive (the load moved), unchanged or not measured
    baseline: float | None = None  # per op
    current: float | None = None
    change: float | None = None  # current/baseline - 1 (None from a baseline of 0)
    threshold: float | None = None  # the relative change that applied, the rounds' spread included
    note: str = ""


@dataclass
class KernelResult:
    verdicts: list[KernelVerdict] = field(default_factory=list)
    not_measured: list = field(default_factory=list)  # why figures were not measured, once each
    loose: int = (
        0  # benchmarks on threads judged at a stored baseline's wide thresholds (gate/kernel.py)
    )

    @property
    def failed(self) -> bool:
        return any(v.status == REGRESSED for v in self.verdicts)

    def by_status(self, status: str) -> list[KernelVerdict]:
        return [v for v in self.verdicts if v.status == status]


def share(threshold: float | None) -> str:
    """A threshold in whole percents (7%, a widened 30%), and under 1% to a tenth (0.5%): at
    ``.0%`` a threshold of 0.5% read "threshold 0%". "?" for none recorded."""
    if threshold is None:
        return "?"
    return f"{threshold:.1%}" if threshold < 0.0095 else f"{threshold:.0%}"
