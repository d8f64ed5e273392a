"""The regression gate: this run's records against a baseline, one verdict each.

Pure logic (no pytest): ``compare`` decides; ``report.tables`` says it. The statistics are
in ``stats``; this module matches benchmarks, picks thresholds (widened by a benchmark's
between-session drift when its baseline has enough sessions, see ``history``), corrects for
machine speed, refuses comparisons that would mislead, leaves undecided (and re-measures)
the changes that a busier machine explains, and names the library versions that moved.

Each record's instrument (``measure.instrument(record.measure)``) says how to judge it: samples
that move with the machine (time) by statistics, with calibration and the load guard;
exact ones (instruction counts) by their size alone, once the rounds agree, and a
regression is explained by the functions whose counts grew.
"""

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .. import measure
from ..measure import layouts
from ..measure.records import Record, key_label, params_id
from ..store import history
from . import calibrate, controlled, interference, measuring, stats
from . import (
    kernel as kernel_gate,
)
from . import (
    memory as memory_gate,
)
from . import (
    sessions as session_quality,
)
from .verdicts import (
    IMPROVED,
    INCONCLUSIVE,
    MISSING,
    NEW,
    REFERENCE,
    REGRESSED,
    UNCHANGED,
    GateResult,
    KernelResult,
    Verdict,
    share,
)

#: Calibration ratios within this of 1 are the same speed: decide on raw times. Normalizing
#: also needs another machine (``machine`` in the meta: CPU model and count): on the same
#: machine the loop read 213-392 ns per iteration minutes apart, and scaling by that turned
#: unchanged benchmarks into -40% "improvements".
DEFAULT_MACHINE_TOLERANCE = 0.10
ALLOW_CROSS_PYTHON_FLAG = "--concurrency-allow-cross-python"
SAVE_FLAG = "--concurrency-save-baseline"

# Libraries whose version changes a backend's numbers besides its own (all run on Python).
_RUNS_ON = {
    "gevent": ("greenlet",),
    "eventlet": ("greenlet",),
    "anyio[trio]": ("trio",),
    "anyio[uvloop]": ("uvloop",),
}
SPEED_CHANGED = (REGRESSED, IMPROVED)  # verdicts that say the code's speed moved
#: what widened a threshold when the suite's typical drift did, more than the benchmark's own
SUITE_DRIFT = "the drift of this suite's sessions"
_ORDER = {
    REGRESSED: 0,
    IMPROVED: 1,
    INCONCLUSIVE: 2,
    NEW: 3,
    MISSING: 4,
    UNCHANGED: 5,
    REFERENCE: 6,
}


@dataclass
class GateSettings:
    """How strict the gate is. Thresholds are fractions (0.10 = 10%).

    ``overrides`` keys: a backend (``gevent``, or a full spec ``multiprocessing[fork]``), a
    workload (``ring``), or ``workload:backend`` (``ring:uvloop``). A test's own threshold
    (``tests``, by ``Record.key``, or the record's ``extra_info["threshold"]`` from the
    ``concurrency`` marker) beats ``workload:backend``, which beats the rest. When both a
    workload and a backend override apply, the larger wins: each says "this is noisy",
    and the gate must honour the noisier one or it will cry wolf.
    """

    threshold: float | None = None  # None: each record's instrument's default
    alpha: float = stats.DEFAULT_ALPHA
    overrides: dict = field(default_factory=dict)
    tests: dict = field(default_factory=dict)  # Record.key -> threshold
    allow_cross_python: bool = False
    machine_tolerance: float = DEFAULT_MACHINE_TOLERANCE
    confidence: float = stats.DEFAULT_CONFIDENCE
    resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = stats.DEFAULT_SEED
    memory_threshold: float | None = None  # None: memory_gate.DEFAULT_THRESHOLD

    def __post_init__(self):
        given = [
            (name, value)
            for name, value in (
                ("threshold", self.threshold),
                ("memory threshold", self.memory_threshold),
            )
            if value is not None
        ]
        for name, value in [*given, *self.overrides.items(), *self.tests.items()]:
            if not isinstance(value, (int, float)) or not 0 <= value < 10:
                raise ValueError(
                    f"threshold {name}: {value!r} is not a fraction in [0, 10); write 0.10 for 10%"
                )
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha {self.alpha!r} must be between 0 and 1, e.g. 0.01")

    @property
    def rigor(self) -> stats.Rigor:
        return stats.Rigor(self.alpha, self.confidence, self.resamples, self.seed)

    def threshold_for(self, rec: Record, default: float | None = None) -> float:
        """The test's own, an override, the option's, else ``default`` or the measure's."""
        own = self.tests.get(rec.key, rec.extra.get("threshold"))
        if own is not None:
            return float(own)
        base = rec.backend.partition("[")[0]
        for key in (f"{rec.workload}:{rec.backend}", f"{rec.workload}:{base}"):
            if key in self.overrides:
                return self.overrides[key]
        found = [
            self.overrides[k] for k in (rec.backend, base, rec.workload) if k in self.overrides
        ]
        if found:
            return max(found)
        if self.threshold is not None:
            return self.threshold
        return default if default is not None else measure.instrument(rec.measure).default_threshold


def compare(
    base: history.Baseline,
    current: Iterable[Record],
    current_meta: Mapping,
    settings: GateSettings | None = None,
    reference: Callable[[str], bool] | None = None,
    against: str = "",
) -> GateResult:
    """Judge ``current`` against a baseline (``baseline.load``); ``reference(backend)``: a row
    shown beside the others but not gated (``set_aside``); ``against``: what the baseline is when
    the user did not save it (``GateResult.against``): nothing then asks to save or refresh it."""
    settings = settings or GateSettings()
    current = list(current)
    mismatch = _python_mismatch(base.meta, current_meta)
    stopped = _not_compared(base.meta, current_meta, settings, mismatch)
    if stopped is not None:
        return stopped
    notes = (
        [f"compared across Python versions as asked ({ALLOW_CROSS_PYTHON_FLAG}): {mismatch}"]
        if mismatch
        else []
    )
    instrument = measure.instrument(current_meta.get("measure"))
    speed = _speed(base, current_meta, mismatch, settings, instrument, against, notes)
    notes += _baseline_notes(base, current_meta, against)
    # each timed benchmark's sessions and rounds divided by their controls, or why they cannot be
    divided = {
        rec.key: controlled.divide(base.sessions[rec.key], rec)
        if rec.key in base.sessions and instrument.machine_bound
        else None
        for rec in current
    }
    typical = _typical_drifts(base.sessions, current, divided)
    judging = _Judging(base.meta, current_meta, instrument, speed, settings, typical)
    result = GateResult(
        verdicts=_verdicts(base, current, divided, judging, against),
        calibration_ratio=speed.ratio,
        notes=notes,
        memory=memory_gate.judge(base, current, settings.memory_threshold),
        kernel=kernel_gate.judge(
            base, current, interference.busier(base.sessions, current, current_meta)
        ),
        against=against,
    )
    if reference is not None:
        set_aside(result, reference)
    result.summary = summary(result, settings, instrument)
    return result


def _not_compared(
    base_meta: Mapping, current_meta: Mapping, settings: GateSettings, mismatch: str | None
) -> GateResult | None:
    """A comparison refused (another measuring setup, another Python unless allowed), or a
    baseline to record again; None: compare."""
    refused = _measure_mismatch(base_meta, current_meta) or (
        mismatch if not settings.allow_cross_python else None
    )
    if refused:
        return GateResult(refused=refused, summary=f"comparison refused: {refused}")
    rerecord = measuring.rerecord_reason(base_meta, current_meta, SAVE_FLAG)
    if rerecord:
        return GateResult(rerecord=rerecord, summary=f"re-record the baseline: {rerecord}")
    return None


def _speed(
    base: history.Baseline,
    current_meta: Mapping,
    mismatch: str | None,
    settings: GateSettings,
    instrument: measure.Instrument,
    against: str,
    notes: list,
) -> "MachineSpeed":
    """Time: the machine's speed against the baseline's; counts: none, and ``notes`` say why."""
    if instrument.machine_bound:
        return _machine_speed(base, current_meta, mismatch, settings, notes)
    if not against:  # against the base, both sides are counted here, now
        notes.append(
            f"{instrument.kind} do not depend on the machine's speed or load: a baseline from "
            f"another machine of the same architecture, in the same directory, compares as well"
        )
    notes += [n for n in (measuring.layout_note(base.meta, current_meta),) if n]
    return MachineSpeed()


def _baseline_notes(base: history.Baseline, current_meta: Mapping, against: str) -> list[str]:
    """What the baseline's setup and sessions make worth saying beside the verdicts."""
    notes = []
    cpus = (base.meta.get("cpu_count"), current_meta.get("cpu_count"))
    if cpus[0] != cpus[1]:
        notes.append(
            f"CPU count differs ({cpus[0]} in the baseline, {cpus[1]} now): threaded models may scale differently"
        )
    notes += [f"baseline has {r.label} twice; the first one is used" for r in base.twice]
    held = base.count
    if held < stats.MIN_SESSIONS_FOR_DRIFT and not against:
        notes.append(
            f"the baseline holds {held} session(s): save {stats.MIN_SESSIONS_FOR_DRIFT - held} more "
            f"to the same file ({SAVE_FLAG}) and the gate also learns how far each benchmark "
            f"drifts between sessions"
        )
    notes += [n for n in (session_quality.different_code(base.identities, base.saved),) if n]
    return notes


def _verdicts(
    base: history.Baseline,
    current: list[Record],
    divided: Mapping,
    judging: "_Judging",
    against: str,
) -> list[Verdict]:
    """One verdict for each benchmark of this run and each of the baseline's it did not run, in
    the gate's order; ``divided``: each one's rounds over its controls (``compare``)."""
    base_sessions = base.sessions
    explained = base.latest  # what explains a change
    verdicts = []
    for rec in current:
        sessions = base_sessions.get(rec.key)
        if sessions is None:
            verdicts.append(_new(rec, against))
            continue
        verdict = _judge(sessions, rec, divided[rec.key], judging)
        if verdict.status == REGRESSED and rec.key in explained:
            why = judging.instrument.explain(explained[rec.key], rec)
            verdict.note = _join(verdict.note, why or "")
        verdicts.append(verdict)
    seen = {rec.key for rec in current}
    verdicts += [
        _missing(key, sessions, judging.instrument, against)
        for key, sessions in base_sessions.items()
        if key not in seen
    ]
    verdicts.sort(key=lambda v: (_ORDER[v.status], v.key))
    return verdicts


def _new(rec: Record, against: str) -> Verdict:
    return Verdict(
        rec.key,
        NEW,
        current_median=rec.median,
        measure=rec.measure,
        note=f"not run by {against}"
        if against
        else f"not in the baseline: refresh it ({SAVE_FLAG}) to gate it",
    )


def _missing(key: tuple, sessions: list, instrument: measure.Instrument, against: str) -> Verdict:
    return Verdict(
        key,
        MISSING,
        baseline_median=stats.median(sessions[0].samples),
        measure=instrument.kind,
        note=f"{'run by ' + against if against else 'in the baseline'} but not run "
        "now: deselected, skipped, failed or renamed?",
    )


def add_session(
    doc: dict,
    previous: history.Baseline | None,
    current: Iterable[Record],
    settings: GateSettings | None = None,
    keep: int = history.DEFAULT_KEEP,
) -> tuple[dict, list[str]]:
    """``doc`` (this session's baseline document, its records ``current``) saved in front of
    ``previous``'s sessions, and what the save did to them (messages).

    A benchmark whose speed moved against its (good) earlier sessions is either disturbed or
    changed speed; one session cannot tell. The first such session is kept but flagged
    ``disturbed`` (the gate leaves it out); when the next one confirms its speed, the code
    changed and the earlier sessions, which measured other code, are dropped. So a disturbed
    session can never make the good ones be dropped. Unless every session measured the same
    clean commit (``_same_code``): then the new speed is not the code's but one the benchmark
    settles into in some processes (yarl's ``test_url_joinpath_with_truediv``: 258, 136, 132 µs
    in three saves of one release), and the earlier sessions stay to say so."""
    if previous is None or keep <= 1:
        return history.merge(doc, previous, keep, []), []
    meta = doc[history.SECTION]
    same_code = _same_code(previous, meta)
    # counts are never disturbed
    exact = measure.instrument(meta.get("measure")).exact
    saved = session_quality.saved_at(str(doc.get("datetime") or "")) or "now"
    latest = previous.latest
    by_key = {r.key: r for r in current}
    messages, restart, flags = [], [], {}
    result = compare(previous, current, meta, settings)
    for v in result.verdicts:
        if v.status not in SPEED_CHANGED and not v.within_sessions:  # its speed did not move
            continue
        before = latest.get(v.key)
        if exact or (
            not same_code
            and before is not None
            and before.extra.get("disturbed")
            and abs(by_key[v.key].median / before.median - 1) <= (v.base_threshold or 0)
        ):
            restart.append(v.key)
            how = "" if exact else ", confirmed by a second session"
            messages.append(
                f"{key_label(v.key)} changed speed ({v.change:+.1%}){how}: its earlier baseline "
                f"sessions were dropped, they measured other code"
            )
            continue
        flags[v.key] = _disturbed(v, same_code)
        messages.append(
            f"{key_label(v.key)} measured {flags[v.key]}; this session (saved {saved}) is "
            f"flagged disturbed and left out by the gate, the earlier sessions are kept"
        )
    _flag_disturbed(doc, flags)
    moved = _kernel_moved(result.kernel)
    messages += [
        f"{key_label(key)}: {', '.join(sorted(figures))} moved beyond what the earlier sessions read: "
        "their kernel figures were dropped, they measured other code"
        for key, figures in moved.items()
    ]
    return history.merge(doc, previous, keep, restart, kernel_restart=moved), messages


def _kernel_moved(result: KernelResult | None) -> dict[tuple, set[str]]:
    """The benchmarks a kernel figure of which regressed or improved against the earlier sessions,
    and what moved: the span of sessions that describe other code would hide a change back (a
    syscall saved away, then put back, would read within it)."""
    moved: dict[tuple, set[str]] = {}
    for v in result.verdicts if result is not None else ():
        if v.status in SPEED_CHANGED:
            moved.setdefault(v.key, set()).add(kernel_gate.find(v.figure).what)
    return moved


def _disturbed(v: Verdict, same_code: bool) -> str:
    """Why a session whose speed moved against the earlier ones is flagged disturbed."""
    if same_code:
        return (
            f"{v.change:+.1%} against the earlier sessions of the same commit: a speed it "
            f"settles into in some processes, or disturbed"
        )
    return (
        f"{v.change:+.1%} against the earlier sessions: disturbed, or the code changed "
        f"speed (then the next session saved confirms it)"
    )


def _flag_disturbed(doc: dict, flags: Mapping[tuple, str]) -> None:
    """Each flagged benchmark of ``doc`` marked ``disturbed`` (why) in its extra_info."""
    for bench in doc.get("benchmarks") or ():
        extra = bench.get("extra_info") or {}
        key = (
            extra.get("workload"),
            params_id(extra.get("params") or {}),
            extra.get("backend"),
        )
        if key in flags:
            extra["disturbed"] = flags[key]


def _same_code(previous: history.Baseline, meta: Mapping) -> bool:
    """Whether this session and every earlier one measured the same clean commit (and libraries):
    a dirty tree's edits are not in its identity, and a tree outside git has none."""
    code = meta.get("code") or {}
    if not code.get("commit") or code.get("dirty"):
        return False
    now = session_quality.identity(code, meta.get("libraries"))
    return all(session_quality.identity(c, libs) == now for c, libs in previous.identities)


GATE_NATIVE_FLAG = "--concurrency-gate-native"


def set_aside(result: GateResult, is_reference: Callable[[str], bool]) -> None:
    """Reference rows (``is_reference(backend)``: the native programs) keep their comparison but
    not their verdict: they show how far Python is from the floor, they are not the code under
    test. Their status becomes ``REFERENCE``, so they neither fail the build nor get re-measured."""
    for v in result.verdicts:
        if is_reference(v.key[2]) and v.status != REFERENCE:
            v.note = _join(
                v.note, f"native reference, not gated: was {v.status} ({GATE_NATIVE_FLAG} gates it)"
            )
            v.status, v.interference = REFERENCE, ""
    if result.memory is not None:  # their memory is shown in the tables, not judged
        kept = [v for v in result.memory.verdicts if not is_reference(v.key[2])]
        if len(kept) < len(result.memory.verdicts):
            result.memory.verdicts = kept
            result.memory.notes.append(
                f"native reference rows' memory is shown, not judged ({GATE_NATIVE_FLAG} judges it)"
            )


def suspects(result: GateResult) -> list[tuple]:
    """Keys a second session must judge: the regressions (of time or of a kernel figure), which
    must reproduce before they fail the build, and the changes the machine's state left
    undecided. Of time only: a count's suspects are gate/recounted.py's."""
    kernel = result.kernel.by_status(REGRESSED) if result.kernel is not None else []
    regressed = {v.key for v in kernel}
    return [
        v.key
        for v in result.verdicts
        if (v.status == REGRESSED or v.interference or v.key in regressed)
        and not measure.instrument(v.measure).exact
    ]


def faster_sessions(current: Iterable[Record], reruns: Mapping[tuple, Record]) -> list[Record]:
    """Each re-measured benchmark, as the faster of its two sessions, with the lesser of their
    kernel figures (``kernel.lesser``).

    Interference on a shared machine only ever slows code down, and comes in bursts that
    can cover every round of one benchmark: the faster session is the one nearer the
    code's own speed, and a real slowdown shows in both.
    """
    out = []
    for r in current:
        again = reruns.get(r.key)
        if again is None:
            out.append(r)
            continue
        faster, other = (again, r) if again.median < r.median else (r, again)
        lesser = kernel_gate.lesser(faster.extra, other.extra)
        out.append(dataclasses.replace(faster, extra={**faster.extra, **lesser}))
    return out


def _within_process_spread(v: Verdict, first_median: float | None, again: Record) -> bool:
    """A regression against a baseline that learned no drift (fewer than 3 sessions) that is no
    larger than the gap between this run's own two processes of the same code is made
    inconclusive (and so counted where counts can be had, gate/undecided.py): a process keeps its
    speed for its whole life, so one baseline process can be as far off as the two current ones
    are apart. Unchanged FastAPI failed a quiet A/A so (+22.7%, then +10.2%, one baseline session)."""
    if (v.sessions or 1) >= 3 or not first_median or not again.median or v.change is None:
        return False
    gap = max(first_median, again.median) / min(first_median, again.median) - 1
    if v.change > gap:
        return False
    v.status = INCONCLUSIVE
    said = "one baseline session" if (v.sessions or 1) == 1 else f"{v.sessions} baseline sessions"
    v.note = _join(
        v.note,
        f"this run's two processes of the same code differ by {gap:.1%}, as much as this "
        f"change: {said} cannot tell it from a process's own speed "
        "(save 3 or more sessions to learn this benchmark's drift)",
    )
    return True


def reproduce(first: GateResult, second: GateResult, reruns: Mapping[tuple, Record]) -> GateResult:
    """``second`` (judged on ``faster_sessions``), saying which suspects were reproduced (the
    others measured again, ``--concurrency-remeasure=every``, had nothing to reproduce)."""
    before = {v.key: v for v in first.verdicts}
    suspected = set(suspects(first)) & set(reruns)
    confirmed = 0
    for v in second.verdicts:
        if v.key not in suspected:
            continue
        old = before[v.key]
        if v.status == REGRESSED and _within_process_spread(v, old.current_median, reruns[v.key]):
            continue
        if v.status == REGRESSED:
            confirmed += 1
            v.note = _join(v.note, f"reproduced by a second session (first {old.change:+.1%})")
        elif v.interference:
            v.note = _join(v.note, "the second session was disturbed too")
        else:
            v.note = _join(
                v.note,
                f"not reproduced: the first session measured {old.change:+.1%} "
                f"(p={old.p_value:.2g}), a second one did not confirm it",
            )
            second.notes.append(f"{reruns[v.key].label}: {v.note}")
    others = len(reruns) - len(suspected)
    said = []
    if suspected:
        said.append(
            f"{len(suspected)} suspected regression(s) re-measured in a second session (their "
            f"tests run again in a fresh process), {confirmed} reproduced"
        )
    if others:  # --concurrency-remeasure=every
        said.append(
            f"{others} {'other ' if suspected else ''}benchmark(s) measured again "
            "(--concurrency-remeasure=every), each judged on the faster of its two sessions"
        )
    second.notes.insert(0, "; ".join(said))
    return second


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class MachineSpeed:
    """This machine's speed against the baseline's: the calibration ratio (None: none to compare,
    or not timed), and whether changes are judged normalized by it."""

    ratio: float | None = None
    normalize: bool = False


def _machine_speed(base: history.Baseline, current_meta, mismatch, settings, notes) -> MachineSpeed:
    """The machine's speed, with the notes that say why it is used so.

    Normalize only for another machine: on the same one the calibration loop is as noisy as
    what it calibrates, so a slow reading would scale good benchmarks into false verdicts.
    """
    cal = calibrate.ratio(current_meta.get("calibration"), calibrate.typical(base.calibrations))
    other_machine = _machine(base.meta) != _machine(current_meta)
    normalize = cal is not None and abs(cal - 1) > settings.machine_tolerance and other_machine
    if normalize and mismatch:
        # the loop's time then mixes machine and interpreter speed: normalizing would cancel
        # the very change a cross-Python comparison looks for
        normalize = False
        notes.append(
            f"calibration ratio {cal:.2f} not applied across Python versions: changes are raw"
        )
    elif normalize:
        notes.append(
            f"another machine ({_machine(current_meta)} now, {_machine(base.meta)} for the baseline) runs "
            f"the calibration loop {cal:.2f}x the baseline's time: changes are judged after scaling the "
            f"baseline by it (normalized)"
        )
    elif cal is not None and abs(cal - 1) > settings.machine_tolerance:
        notes.append(
            f"the calibration loop ran {cal:.2f}x the baseline's time on the same machine: its speed "
            f"swings, so changes are judged raw, and small ones on a machine this unsteady are unsure"
        )
    elif cal is None:
        notes.append("no comparable calibration on both sides: changes are raw")
    return MachineSpeed(cal, normalize)


def _machine(meta: Mapping):
    """What identifies a machine's speed: CPU model and count (``None`` parts when unrecorded)."""
    return (meta.get("cpu_model"), meta.get("cpu_count"))


def _measure_mismatch(base_meta: Mapping, current_meta: Mapping) -> str | None:
    b, c = base_meta.get("measure") or "time", current_meta.get("measure") or "time"
    if b == c:
        return None
    return (
        f"the baseline measured {b} and this run measures {c}: they do not compare; use "
        f"--concurrency-measure={b}, or save a baseline of {c} ({SAVE_FLAG})"
    )


def _python_mismatch(base_meta: Mapping, current_meta: Mapping) -> str | None:
    if history.same_python(base_meta, current_meta):
        return None
    b, c = base_meta.get("python") or {}, current_meta.get("python") or {}
    return (
        f"the baseline was recorded on {b.get('implementation')} {b.get('version')} and this run is "
        f"{c.get('implementation')} {c.get('version')}; timings differ between Python versions by "
        f"design, so keep one baseline per Python (e.g. per tox environment), or pass "
        f"{ALLOW_CROSS_PYTHON_FLAG} to compare anyway"
    )


@dataclass(frozen=True)
class _Judging:
    """What every benchmark of one comparison is judged with."""

    base_meta: Mapping
    cur_meta: Mapping
    instrument: measure.Instrument  # this run's, which the baseline's must be (else refused)
    speed: MachineSpeed
    settings: GateSettings
    #: the typical drift between sessions of the benchmarks judged over their controls (True)
    #: and of the other timed ones (False); ``None``: too few to say
    typical: Mapping[bool, float | None]


def _typical_drifts(base_sessions: Mapping, current: list, divided: Mapping) -> dict:
    """``_Judging.typical``: the drifts of this run's timed benchmarks, each as it is judged."""
    drifts: dict[bool, list] = {True: [], False: []}
    for rec in current:
        over = divided[rec.key]
        if over is None:
            continue
        judged = isinstance(over, controlled.Divided)
        sessions = over.sessions if judged else base_sessions[rec.key]
        drift = stats.session_drift([stats.median(s.samples) for s in sessions if s.samples])
        if drift is not None:
            drifts[judged].append(drift)
    return {judged: stats.typical_drift(found) for judged, found in drifts.items()}


@dataclass
class _Case:
    """One benchmark as ``_judge`` reads it: the baseline's sessions and this run's record (over
    their controls when ``over`` is set), the raw ones, and what its first steps found."""

    sessions: list
    cur: Record
    raw_sessions: list
    raw_cur: Record
    over: controlled.Divided | None
    not_divided: str | None  # why a timed benchmark could not be divided by its controls
    speed: MachineSpeed
    threshold: float = 0.0
    widened: str = ""  # why the instrument's floor is above the threshold set
    bad: Mapping = field(default_factory=dict)  # the disturbed sessions, left out
    kept: dict = field(default_factory=dict)  # the others, by their index
    layouts: list = field(default_factory=list)  # the kept sessions' rounds, one list a layout
    baseline_median: float = 0.0
    raw_change: float = 0.0  # this run's raw median against the kept sessions'

    @property
    def raw(self) -> list:
        return self.layouts[0]

    @property
    def factor(self) -> float:
        """The baseline's rounds scaled to this machine, when changes are judged normalized."""
        return self.speed.ratio if self.speed.normalize and self.speed.ratio else 1.0


def _judge(
    sessions: list, cur: Record, divided: controlled.Divided | str | None, judging: _Judging
) -> Verdict:
    """``divided``: its rounds over its controls (``compare``). In steps: the benchmark's
    threshold and kept sessions, its changes, the threshold widened by drift, the decision, then
    what leaves it inconclusive (a baseline too noisy, a change within the sessions' own span,
    the machine)."""
    case = _case(sessions, cur, divided, judging)
    verdict = _first_verdict(case, judging)
    if not (case.baseline_median > 0 and case.cur.median > 0):  # no samples (nan), a 0-time clock
        verdict.status = INCONCLUSIVE
        verdict.note = "no usable raw samples on one side: nothing to compare"
        return verdict
    _changes(verdict, case)
    judged_at, widening, drifts = _widened_by_drift(verdict, case, judging)
    c = _decide(case, judged_at, judging)
    verdict.status, verdict.p_value, verdict.note = c.status, c.p_value, _join(verdict.note, c.note)
    verdict.change, verdict.ci = c.change, (c.ci[0] - 1, c.ci[1] - 1)
    verdict.decided_by = (
        "control" if case.over is not None else "normalized" if case.speed.normalize else "raw"
    )
    if verdict.widened_by and c.status == UNCHANGED and abs(c.change) > case.threshold:
        _too_noisy(verdict, c, widening, drifts)
    _within_their_span(verdict, case, judging)
    _the_machine(verdict, c, case, judging)
    return verdict


def _case(
    sessions: list, cur: Record, divided: controlled.Divided | str | None, judging: _Judging
) -> _Case:
    over = divided if isinstance(divided, controlled.Divided) else None
    not_divided = divided if isinstance(divided, str) else None
    case = _Case(sessions, cur, sessions, cur, over, not_divided, judging.speed)
    if over is not None:  # judged on rounds over their controls
        case.sessions, case.cur, case.speed = over.sessions, over.current, MachineSpeed()
    case.threshold, case.widened = _threshold(case.sessions, case.cur, judging)
    if judging.instrument.machine_bound:
        case.bad = session_quality.disturbed(case.sessions, case.threshold)
    case.kept = {i: s for i, s in enumerate(case.sessions) if i not in case.bad}
    raw = [x for s in case.kept.values() for x in s.samples]
    # counted in other layouts too
    case.layouts = [raw, *(rounds for s in case.kept.values() for rounds in s.layouts)]
    case.baseline_median = stats.center(case.layouts)
    return case


def _threshold(sessions: list, cur: Record, judging: _Judging) -> tuple[float, str]:
    """The threshold set (or the instrument's default for the layouts counted, the fewer side's),
    and why the instrument's floor above it is used instead ("" if not)."""
    instrument = judging.instrument
    # two layouts that agree stand for three (measure/layouts.py: the third is counted only
    # where the first two disagree)
    counted_in = min(
        layouts.counted_in(cur.layouts),
        *(layouts.counted_in([s.samples, *s.layouts]) for s in sessions),
    )
    threshold = judging.settings.threshold_for(cur, instrument.default_threshold_for(counted_in))
    floor = instrument.threshold_floor(cur)
    if floor is not None and floor[0] > threshold:
        return floor
    return threshold, ""


def _first_verdict(case: _Case, judging: _Judging) -> Verdict:
    """The verdict before the decision: unchanged, with what it is judged on."""
    verdict = Verdict(
        case.cur.key,
        UNCHANGED,
        baseline_median=case.baseline_median,
        current_median=case.cur.median,
        threshold=case.threshold,
        versions_changed=versions_changed(
            case.sessions[0].backend_version, case.cur, judging.base_meta, judging.cur_meta
        ),
        rounds=(len(case.raw), len(case.cur.samples)),
        sessions=len(case.kept),
        measure=case.cur.measure,
        base_threshold=case.threshold,
    )
    if case.widened:
        verdict.note = f"threshold {share(case.threshold)}: {case.widened}"
    if case.bad:
        verdict.note = _join(verdict.note, session_quality.left_out(case.bad, case.sessions))
    return verdict


def _changes(verdict: Verdict, case: _Case) -> None:
    """The changes shown beside the decision: raw, normalized, over the controls."""
    # raw: the kept sessions' raw rounds, whatever the judging was over
    raw_kept = [x for i, s in enumerate(case.raw_sessions) if i not in case.bad for x in s.samples]
    case.raw_change = case.raw_cur.median / stats.center([raw_kept]) - 1
    verdict.raw_change = case.raw_change
    if case.speed.ratio:
        verdict.normalized_change = case.cur.median / (case.baseline_median * case.speed.ratio) - 1
    if case.over is not None:
        verdict.normalized_change = case.cur.median / case.baseline_median - 1
        verdict.machine_speed = case.over.machine_speed
    elif case.not_divided is not None:
        verdict.not_divided = case.not_divided


def _widened_by_drift(verdict: Verdict, case: _Case, judging: _Judging) -> tuple[float, str, str]:
    """The threshold the comparison uses: the one set, or widened by how far the baseline's
    sessions drift; with the note that says so and the drift's own words ("" when not widened)."""
    threshold = case.threshold
    medians = {i: stats.median(s.samples) for i, s in case.kept.items()}
    # a suite's typical drift also speaks for a benchmark left with one or two sessions (the
    # others disturbed): yarl's test_url_build_access_raw_path, judged on one at 7%, failed an A/A
    typical = judging.typical.get(case.over is not None)
    drift = stats.session_drift(
        list(medians.values()), 1 if typical is not None else stats.MIN_SESSIONS_FOR_DRIFT
    )
    if drift is None:
        return threshold, "", ""
    verdict.drift = drift[0] if drift[1] > 1 else None  # one session: no drift of its own
    allowance, suite = stats.allowance(drift, typical)
    if allowance <= threshold:
        return threshold, "", ""
    verdict.threshold = allowance
    verdict.widened_by = (
        SUITE_DRIFT if suite else session_quality.widened_by(medians, case.sessions)
    )
    drifts = (
        f"this benchmark's median drifts {verdict.drift:.1%} between the baseline's {len(case.kept)} sessions"
        if len(case.kept) > 1
        else "one baseline session left"
    )
    if typical is not None:
        drifts += f", this suite's typical benchmark {typical:.1%}"
    widening = f"threshold widened from {share(threshold)} to {share(allowance)} by {verdict.widened_by}: {drifts}"
    verdict.note = _join(verdict.note, widening)
    return allowance, widening, drifts


def _decide(case: _Case, judged_at: float, judging: _Judging):
    if judging.instrument.exact:
        # one session counted in the same layouts as this one (against the base, a one-session
        # baseline): layout N pairs with layout N
        paired = len(case.kept) == 1
        return stats.decide_layouts(case.layouts, case.cur.layouts, judged_at, paired=paired)
    # normalized: the baseline's samples as they would have run on this machine
    reference = [x * case.factor for x in case.raw]
    return stats.decide(reference, case.cur.samples, judged_at, judging.settings.rigor)


def _too_noisy(verdict: Verdict, c, widening: str, drifts: str) -> None:
    """Never "unchanged" beyond the threshold set; and only a slowdown it may hide is worth a
    note of its own in the summary; neither fails the build (unchanged code often drifts so)."""
    verdict.status, verdict.too_noisy = INCONCLUSIVE, c.change > 0
    fix = (
        "time cannot tell a change this size on this machine; counting instructions can "
        "(--concurrency-measure=instructions)"
        if verdict.widened_by == SUITE_DRIFT
        else "re-record the baseline"
    )
    verdict.note = _join(
        f"baseline too noisy (threshold widened to +{share(verdict.threshold)} by "
        f"{verdict.widened_by}): {fix}",
        verdict.note.replace(widening, drifts),
    )


def _within_their_span(verdict: Verdict, case: _Case, judging: _Judging) -> None:
    """A change of time within what the baseline's own sessions spanned is not decided."""
    spanned = judging.instrument.machine_bound and session_quality.within_their_span(
        case.sessions,
        case.baseline_median,
        case.cur.median / case.factor,
        case.threshold,  # in the baseline's scale
    )
    if spanned and verdict.status in SPEED_CHANGED:
        verdict.status, verdict.within_sessions = INCONCLUSIVE, verdict.status
        verdict.note = _join(spanned, verdict.note)


def _the_machine(verdict: Verdict, c, case: _Case, judging: _Judging) -> None:
    """A verdict of time the machine's load or speed swing may have made is not decided."""
    machine_bound = judging.instrument.machine_bound
    cpus = judging.cur_meta.get("cpu_count") or 1
    machine = (
        interference.load_change(case.sessions, case.cur, c.status, cpus) if machine_bound else None
    )
    if case.over is not None:
        # the machine's speed, however it swung, divided out; a busy core beside it did not:
        # there, unchanged code read -30% to +20% over its controls, 8 A/As in 50 "regressed"
        # (docs/gates/time.md), so the load guard above stands for these verdicts too
        at = verdict.threshold or case.threshold
        speed = case.over.machine_speed
        said = controlled.the_machines(case.raw_change, c.change, speed, at)
        verdict.note = _join(verdict.note, said)
        if verdict.status in SPEED_CHANGED:
            machine = machine or controlled.disagree(case.raw_change, c.change, speed, at)
    elif machine_bound:
        machine = machine or interference.speed_swing(
            judging.cur_meta, c, judging.settings.machine_tolerance
        )
    if machine:
        verdict.status, verdict.interference = INCONCLUSIVE, machine
        verdict.note = _join(verdict.note, machine)


def versions_changed(base_version: str, cur: Record, base_meta: Mapping, cur_meta: Mapping) -> dict:
    """Library -> (baseline version, current version) for what this benchmark runs on."""
    out = {}
    b_py, c_py = (
        (base_meta.get("python") or {}).get("version"),
        (cur_meta.get("python") or {}).get("version"),
    )
    name = cur.backend.partition("[")[0]
    if base_version != cur.backend_version and base_version not in ("", b_py):
        out[name] = (base_version, cur.backend_version)
    b_libs, c_libs = base_meta.get("libraries") or {}, cur_meta.get("libraries") or {}
    for lib in _RUNS_ON.get(cur.backend, _RUNS_ON.get(name, ())):
        if lib in b_libs and lib in c_libs and b_libs[lib] != c_libs[lib]:
            out[lib] = (b_libs[lib], c_libs[lib])
    if b_py and c_py and b_py != c_py:
        out["python"] = (b_py, c_py)
    b_code, c_code = base_meta.get("under_test") or {}, cur_meta.get("under_test") or {}
    for dist in sorted(b_code.keys() & c_code.keys()):  # the code the tests measured
        if b_code[dist] != c_code[dist]:
            out.setdefault(dist, (b_code[dist], c_code[dist]))
    return out


def _judged_at(result: GateResult, settings: GateSettings, instrument) -> str:
    """The thresholds, and the alpha and scale of time (or the instrument, exact)."""
    used = sorted({v.base_threshold for v in result.verdicts if v.base_threshold is not None})
    thresholds = ([settings.threshold] if settings.threshold else used) or [
        instrument.default_threshold
    ]
    said = f"threshold{'s' * (len(thresholds) > 1)} {', '.join(map(share, thresholds))}, "
    if instrument.exact:
        return said + f"{instrument.kind}, exact"
    scale = _scale({v.decided_by for v in result.verdicts if v.decided_by})
    return said + f"alpha {settings.alpha:g}, {scale}"


def _about_the_baseline(result: GateResult) -> str:
    """What the verdicts say of the baseline: stale, or too noisy to tell (and the fix)."""
    text = ""
    if result.by_status(IMPROVED) and not result.against:
        text += f"; baseline is stale: refresh it ({SAVE_FLAG})"
    suite = [v for v in result.too_noisy if v.widened_by == SUITE_DRIFT]
    if len(suite) < len(result.too_noisy):
        noisy = len(result.too_noisy) - len(suite)
        text += f"; {noisy} inconclusive as the baseline is too noisy: re-record it"
    if suite:
        text += (
            f"; {len(suite)} inconclusive within what this suite's sessions drift: time cannot tell, "
            "instructions can"
        )
    return text


def _scale(decided_by: set) -> str:
    """How the verdicts' changes were read, said once for the summary."""
    if "normalized" in decided_by:
        return "normalized"
    if "control" in decided_by:
        return "over their controls" + (", some raw" if "raw" in decided_by else "")
    return "raw"


def summary(result: GateResult, settings: GateSettings, instrument) -> str:
    """The gate's one line: passed or FAILED, the count of each verdict, the thresholds and how
    the changes were read, then what the run should do about its baseline and other figures."""
    counts = [
        f"{len(result.by_status(s))} {s}"
        for s in (REGRESSED, IMPROVED, INCONCLUSIVE, NEW, MISSING, UNCHANGED)
    ]
    if result.by_status(REFERENCE):
        counts.append(f"{len(result.by_status(REFERENCE))} native reference (not gated)")
    text = (
        f"{'FAILED' if result.failed else 'passed'}: {', '.join(counts)} "
        f"({_judged_at(result, settings, instrument)})"
    )
    text += _about_the_baseline(result)
    if result.memory is not None:
        text += f"; {memory_gate.summary(result.memory)}"
    if result.kernel is not None and result.kernel.verdicts:
        text += f"; {kernel_gate.summary(result.kernel)}"
    return text
