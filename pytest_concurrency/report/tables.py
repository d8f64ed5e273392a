"""What the terminal and markdown reports share: tables, row order, per-op figures, formatting.

A ``Table`` per (workload, params) with one ``Row`` per backend, fastest first by median
round time; rows the baseline has but this run lacks come last with no current figures.
Cells are plain text; renderers only lay them out (and colour the verdict).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from .. import backends, measure
from ..gate import verdicts as V
from ..measure.records import Record, key_label, params_id
from . import kernel as kernel_report

#: Verdict text as the tables show it.
VERDICT_TEXT = {
    V.REGRESSED: "REGRESSED",
    V.IMPROVED: "improved",
    V.UNCHANGED: "unchanged",
    V.INCONCLUSIVE: "inconclusive",
    V.NEW: "new",
    V.MISSING: "missing",
    V.REFERENCE: "reference",
}

NATIVE_LABEL = "native reference"

#: Status of a changes-only comparison (no gate decided anything): the change is shown, no verdict.
COMPARED = "compared"

NA = "-"


@dataclass(frozen=True)
class Column:
    id: str
    header: str
    short: str  # header when the terminal is narrow
    priority: int  # lower survives longer when columns must be dropped
    numeric: bool = True


COLUMNS = (
    Column("backend", "backend", "backend", 0, numeric=False),
    Column("median", "median", "median", 1),
    Column("per_op", "per op", "per op", 2),
    Column("ideal", "ideal / over", "ideal/over", 4),
    Column("relative", "x fastest", "rel", 3),
    Column("change", "change", "chg", 1),
    Column("verdict", "verdict", "verdict", 0, numeric=False),
    Column("cpu", "CPU u+s", "CPU", 6),
    Column("ctx", "ctx vol/inv", "ctx", 7),
    Column("kernel", "kernel/op", "kern", 6),
    Column("memory", "memory", "mem", 5),
)


@dataclass
class Row:
    backend: str
    cells: dict  # column id -> text
    record: Record | None = None
    verdict: V.Verdict | None = None


@dataclass
class Table:
    workload: str
    params_id: str
    rows: list = field(default_factory=list)
    columns: tuple = ()

    @property
    def title(self) -> str:
        return f"{self.workload} [{self.params_id}]" if self.params_id else self.workload


# -- numbers ---------------------------------------------------------------------------------


def round_median(rec: Record) -> float:
    """Median round in its measure's unit; from the per-op figure when the file kept no samples."""
    if rec.samples:
        return rec.median
    ns, count = rec.metric("ns_per_op"), rec.metric("instructions_per_op")
    if counted(rec):
        return float(count) * rec.ops if count is not None else float("nan")
    return float(ns) * rec.ops / 1e9 if ns is not None else float("nan")


def counted(rec: Record) -> bool:
    """Whether the record's samples are counts (instructions), not seconds."""
    return measure.instrument(rec.measure).unit != "s"


def fmt_amount(value: float | None, kind: str) -> str:
    """A sample-sized figure in the unit of the measure ``kind``: ``12.3 ms``, ``1.23M instr``."""
    unit = measure.instrument(kind).unit
    if unit == "s":
        return fmt_time(value)
    return NA if value is None or not math.isfinite(value) else f"{fmt_count(value)} {unit}"


def time_per_op(rec: Record) -> float:
    return round_median(rec) / rec.ops


def rate(rec: Record) -> float:
    return rec.ops / round_median(rec)


def io_overhead(rec: Record) -> float | None:
    """The median's excess over the ideal wall time, in seconds (None outside the IO workload)."""
    ideal = rec.metric("ideal_s")
    if ideal is not None and not counted(rec):  # a count has no idle time to subtract
        return round_median(rec) - float(ideal)
    over = rec.metric("overhead_s")
    return float(over) if over is not None else None


def is_rate(rec: Record) -> bool:
    """Throughput units read better as ops/s (seed 002 reported events/s); counts never do."""
    return rec.unit == "event" and not counted(rec)


def cost_per_op(rec: Record) -> float:
    """Seconds one op costs, the figure a scaling curve plots (IO: overhead per task)."""
    over = io_overhead(rec)
    return over / rec.ops if over is not None else time_per_op(rec)


_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def time_unit(seconds: float) -> tuple[float, str]:
    """(scale, unit) that shows ``seconds`` as 1..999 of that unit."""
    mag = abs(seconds)
    for scale, unit in _TIME_UNITS:
        if mag >= scale * 0.9995:
            return scale, unit
    return _TIME_UNITS[-1]


def _sig3(x: float) -> str:
    if not math.isfinite(x):
        return NA
    a = abs(x)
    return f"{x:.0f}" if a >= 99.95 else f"{x:.1f}" if a >= 9.995 else f"{x:.2f}"


def fmt_time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return NA
    scale, unit = time_unit(seconds)
    return f"{_sig3(seconds / scale)} {unit}"


def fmt_rate(per_s: float, unit: str) -> str:
    if not math.isfinite(per_s):
        return NA
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_s >= scale * 0.9995:
            return f"{_sig3(per_s / scale)} {prefix}{unit}s/s"
    return f"{_sig3(per_s)} {unit}s/s"


def fmt_count(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return NA
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale * 0.9995:
            return f"{_sig3(x / scale)}{suffix}"
    return f"{x:.0f}" if x == int(x) or abs(x) >= 10 else f"{x:.1f}"


def fmt_kib(kib: float) -> str:
    if kib >= 1024 * 0.9995:
        return f"{_sig3(kib / 1024)} MiB"
    return f"{_sig3(kib)} KiB"


def fmt_change(change: float | None) -> str:
    return NA if change is None or not math.isfinite(change) else f"{change * 100:+.1f}%"


def per_op_text(rec: Record) -> str:
    if counted(rec):
        return f"{fmt_amount(time_per_op(rec), rec.measure)}/{rec.unit}"
    if is_rate(rec):
        return fmt_rate(rate(rec), rec.unit)
    over = io_overhead(rec)
    if over is not None:
        return f"{fmt_time(over / rec.ops)}/{rec.unit}"
    return f"{fmt_time(time_per_op(rec))}/{rec.unit}"


def _num(rec: Record, key: str) -> float | None:
    value = rec.metric(key)
    return float(value) if isinstance(value, (int, float)) else None


def cpu_text(rec: Record) -> str:
    user, sys_ = _num(rec, "cpu_user_s"), _num(rec, "cpu_sys_s")
    if user is None and sys_ is None:
        return NA
    user, sys_ = user or 0.0, sys_ or 0.0
    # one unit for both halves so "u+s" reads as a sum
    scale, unit = time_unit(max(user, sys_))
    return f"{_sig3(user / scale)}+{_sig3(sys_ / scale)} {unit}"


def ctx_text(rec: Record) -> str:
    vol, invol = _num(rec, "ctx_voluntary"), _num(rec, "ctx_involuntary")
    if vol is None and invol is None:
        return NA
    return f"{fmt_count(vol)}/{fmt_count(invol)}"


def memory_text(rec: Record) -> str:
    per_task = _num(rec, "kib_per_task")
    if per_task is not None:
        return f"{fmt_kib(per_task)}/task"
    rss = _num(rec, "peak_rss_kib")
    if rss is not None:
        return f"{fmt_kib(rss)} rss"
    heap = _num(rec, "peak_traced_kib")  # counted runs: valgrind's own memory is in any RSS
    return f"{fmt_kib(heap)} heap" if heap is not None else NA


def ideal_text(rec: Record) -> str:
    ideal, over = _num(rec, "ideal_s"), io_overhead(rec)
    if ideal is None or counted(rec):
        return NA
    return f"{fmt_time(ideal)} / +{fmt_time(over)}"


# -- tables ----------------------------------------------------------------------------------


def _verdict_cells(verdict: V.Verdict | None) -> dict:
    if verdict is None:
        return {"change": NA, "verdict": NA}
    status = VERDICT_TEXT.get(verdict.status, "" if verdict.status == COMPARED else verdict.status)
    return {"change": fmt_change(verdict.change), "verdict": status or NA}


def build(records: Iterable[Record], gate: V.GateResult | None = None) -> list[Table]:
    """Tables in order of first appearance of each workload, then of each params case."""
    records = list(records)
    verdicts = {tuple(v.key): v for v in gate.verdicts} if gate is not None else {}
    tables: dict[tuple[str, str], Table] = {}
    order: list[str] = []  # workloads, first appearance

    def table(workload: str, pid: str) -> Table:
        if workload not in order:
            order.append(workload)
        return tables.setdefault((workload, pid), Table(workload, pid))

    for rec in records:
        table(rec.workload, params_id(rec.params)).rows.append(
            Row(rec.backend, {}, record=rec, verdict=verdicts.get(rec.key))
        )
    present = {rec.key for rec in records}
    missing = {key: v for key, v in verdicts.items() if key not in present}
    for key, verdict in missing.items():  # in the baseline only: a row with no current figures
        # beyond MISSING_LISTED, only beside a case this run measured: the rest is one line of
        # the summary, so that a run of one test against a large baseline stays short
        if len(missing) <= MISSING_LISTED or (key[0], key[1]) in tables:
            table(key[0], key[1]).rows.append(Row(key[2], {}, verdict=verdict))

    out = []
    for workload in order:
        for (w, _), tab in tables.items():
            if w == workload:
                _fill(tab, with_gate=gate is not None)
                out.append(tab)
    return out


#: Benchmarks of the baseline this run did not measure that are listed (as rows and summary lines);
#: the others are counted in one line.
MISSING_LISTED = 10

NO_MODEL = "-"  # the backend cell of a test that names no model


def backend_label(backend: str) -> str:
    """The backend as a table shows it: native programs are marked, so nobody takes them for Python."""
    if not backend:  # a suite's own test whose parametrization names no model
        return NO_MODEL
    return f"{backend} ({NATIVE_LABEL})" if backends.is_native(backend) else backend


def _sort_key(row: Row):
    med = round_median(row.record) if row.record is not None else math.inf
    return (math.isnan(med), med, row.backend)


def _fill(tab: Table, *, with_gate: bool) -> None:
    tab.rows.sort(key=_sort_key)
    measured = [r.record for r in tab.rows if r.record is not None]
    # a zero median (a test that counts nothing, a clock too coarse for it) is nobody's fastest
    meds = [m for m in map(round_median, measured) if math.isfinite(m) and m > 0]
    fastest = min(meds) if meds else math.nan
    has_ideal = any(r.metric("ideal_s") is not None and not counted(r) for r in measured)
    for row in tab.rows:
        cells = {"backend": backend_label(row.backend)}
        rec = row.record
        cells.update(_measured_cells(rec, fastest) if rec is not None else _missing_cells(row))
        if with_gate:
            cells.update(_verdict_cells(row.verdict))
        row.cells = cells
    tab.columns = tuple(c for c in COLUMNS if _shown(c.id, tab, with_gate, has_ideal))


def _missing_cells(row: Row) -> dict:
    """A row the baseline has and this run measured not: its baseline's median in brackets."""
    cells = {c.id: NA for c in COLUMNS if c.id != "backend"}
    if row.verdict is not None and row.verdict.baseline_median is not None:
        cells["median"] = f"({fmt_amount(row.verdict.baseline_median, row.verdict.measure)})"
    return cells


def _measured_cells(rec: Record, fastest: float) -> dict:
    med = round_median(rec)
    return dict(
        median=fmt_amount(med, rec.measure),
        per_op=per_op_text(rec),
        ideal=ideal_text(rec),
        relative=f"{_sig3(med / fastest)}x" if math.isfinite(med / fastest) else NA,
        cpu=cpu_text(rec),
        ctx=ctx_text(rec),
        memory=memory_text(rec),
        kernel=kernel_report.cell(rec),
    )


def _shown(column: str, tab: Table, with_gate: bool, has_ideal: bool) -> bool:
    """Whether a column is in the table: the gate's with a gate, the ideal where a row has one,
    an optional one where a row has a figure."""
    if not with_gate and column in ("change", "verdict"):
        return False
    if not has_ideal and column == "ideal":
        return False
    return column not in _OPTIONAL or any(row.cells.get(column, NA) != NA for row in tab.rows)


_OPTIONAL = (
    "cpu",
    "ctx",
    "memory",
    "kernel",
)  # left out of a table where no row has them (plain tests, counts)


def measure_notes(records: Iterable[Record]) -> list[str]:
    """What each measure in ``records`` cannot see, one line per kind of model, naming them:
    ``instructions on gevent, uvloop leave out kernel work (syscalls, IO), waits ...``."""
    by_line: dict[tuple[str, str], list[str]] = {}
    for rec in records:
        text = measure.instrument(rec.measure).leaves_out(str(rec.metric("task_kind") or "light"))
        names = by_line.setdefault((rec.measure, text), []) if text else []
        name = rec.backend or "tests that name no model"
        if text and name not in names:
            names.append(name)
    return [
        f"{kind} on {', '.join(sorted(names))} leave out {text}"
        for (kind, text), names in by_line.items()
    ]


# -- gate summary ----------------------------------------------------------------------------


def verdict_line(v: V.Verdict) -> str:
    """One sentence per verdict for the summary block below the tables."""
    parts = []
    if v.baseline_median is not None and v.current_median is not None:
        parts.append(
            f"{fmt_amount(v.baseline_median, v.measure)} -> {fmt_amount(v.current_median, v.measure)}"
        )
    elif v.baseline_median is not None:
        parts.append(f"baseline {fmt_amount(v.baseline_median, v.measure)}")
    elif v.current_median is not None:
        parts.append(f"now {fmt_amount(v.current_median, v.measure)}")
    if v.change is not None:
        parts.append(fmt_change(v.change))
    if v.p_value is not None:
        parts.append(f"p={v.p_value:.2g}")
    if v.threshold is not None:
        parts.append(
            f"threshold {V.share(v.threshold)}"
            + (
                f" (widened from {V.share(v.base_threshold)})"
                if v.widened_by and v.base_threshold is not None
                else ""
            )
        )
    if v.ci:
        parts.append(f"interval {fmt_change(v.ci[0])} to {fmt_change(v.ci[1])}")
    if v.decided_by == "control" and v.raw_change is not None and v.machine_speed is not None:
        parts.append(
            f"raw {fmt_change(v.raw_change)}, decided over its controls (the machine ran "
            f"{v.machine_speed:.2f}x the baseline's time)"
        )
    elif v.raw_change is not None and v.normalized_change is not None:
        parts.append(
            f"raw {fmt_change(v.raw_change)}, normalized {fmt_change(v.normalized_change)}, "
            f"decided by {v.decided_by}"
        )
    line = key_label(v.key)
    if parts:
        line += ": " + ", ".join(parts)
    if v.versions_changed:
        changed = ", ".join(
            f"{lib} {old} -> {new}" for lib, (old, new) in sorted(v.versions_changed.items())
        )
        line += f"; versions changed: {changed}"
    if v.note:
        line += f" ({v.note})"
    return line


#: Summary sections, most important first, with what each means for the reader.
SECTIONS = (
    (V.REGRESSED, "Regressions (fail the build)"),
    (V.IMPROVED, "Faster than the baseline (baseline is stale; refresh it)"),
    (
        V.INCONCLUSIVE,
        "Inconclusive (beyond the threshold, but not significant, the machine's load moved, "
        "or the baseline is too noisy)",
    ),
    (V.NEW, "New since the baseline"),
    (V.MISSING, "Missing from this run"),
    (
        V.REFERENCE,
        "Native reference rows (compared, not gated; --concurrency-gate-native gates them)",
    ),
)


#: The sections whose titles speak of a baseline the user saved, as they read against the base
#: side: there is nothing to refresh, the base is installed for the run.
AGAINST_THE_BASE = {
    V.IMPROVED: "Faster than the base side",
    V.NEW: "Not run by the base side",
    V.MISSING: "Run by the base side, missing from this run",
}


def headline(gate: V.GateResult) -> str:
    if gate.refused:
        return f"Comparison refused: {gate.refused}"
    if gate.rerecord:
        return f"Re-record the baseline: {gate.rerecord}"
    n = len(gate.by_status(V.REGRESSED))
    counts = [f"{n} regression{'s' if n != 1 else ''}"]
    for status in (V.IMPROVED, V.INCONCLUSIVE, V.NEW, V.MISSING, V.UNCHANGED, V.REFERENCE):
        k = len(gate.by_status(status))
        if k:
            counts.append(f"{k} {NATIVE_LABEL if status == V.REFERENCE else VERDICT_TEXT[status]}")
    compared = len(gate.by_status(COMPARED))
    if compared:
        counts.append(f"{compared} compared without verdict")
    return ", ".join(counts)


#: Memory sections (memory_gate.py), most important first.
MEMORY_SECTIONS = (
    (V.LEAKED, "Memory leaks (fail the build): rounds keep what their tasks held"),
    (V.REGRESSED, "Memory regressions (fail the build)"),
    (V.IMPROVED, "Less memory than the baseline"),
    (V.NEW, "Memory figures new since the baseline"),
)


def memory_summary(memory: V.MemoryResult | None) -> list[tuple[str, list[str]]]:
    """(section title, lines) of the memory block, ending with its summary line."""
    from ..gate.memory import line, summary

    if memory is None:
        return []
    out = [
        (title, [line(v) for v in memory.by_status(status)]) for status, title in MEMORY_SECTIONS
    ]
    out = [(title, lines) for title, lines in out if lines]
    out.append(("Memory", [*memory.notes, summary(memory)]))
    return out


def summary(gate: V.GateResult, every: bool = False) -> list[tuple[str, list[str]]]:
    """(section title, lines) of the gate block; empty sections are left out. ``every``: the
    unchanged benchmarks too, each with its change and interval (how close it came)."""
    out = []
    if gate.refused:
        out.append(("Comparison refused", [gate.refused]))
    if gate.rerecord:
        out.append(("Re-record the baseline", [gate.rerecord]))
    for status, title in SECTIONS:
        title = AGAINST_THE_BASE.get(status, title) if gate.against else title
        found = gate.by_status(status)
        lines = [verdict_line(v) for v in found]
        if status == V.MISSING and len(found) > MISSING_LISTED:
            lines[MISSING_LISTED:] = [
                f"and {len(found) - MISSING_LISTED} more benchmarks of the baseline that this run "
                "did not measure (left out by -k, a marker or a narrower run: they pass)"
            ]
        if lines:
            out.append((title, lines))
    widened = [verdict_line(v) for v in gate.by_status(V.UNCHANGED) if v.widened_by]
    if widened:  # "unchanged" on a threshold other than the one asked for: say which
        out.append(("Unchanged on a widened threshold (the baseline's sessions drift)", widened))
    if every:
        steady = [verdict_line(v) for v in gate.by_status(V.UNCHANGED) if not v.widened_by]
        if steady:
            out.append(("Unchanged (within the threshold; how close each came)", steady))
    notes = control_notes(gate)
    if gate.calibration_ratio is not None and not notes:
        notes.append(f"machine speed vs baseline: {gate.calibration_ratio:.3f} (>1 = slower now)")
    notes.extend(gate.notes)
    if gate.summary:
        notes.append(gate.summary)
    out += kernel_report.sections(gate.kernel)
    if notes:
        out.append(("Notes", notes))
    return out


def control_notes(gate: V.GateResult) -> list[str]:
    """How many time verdicts were judged over the controls beside their rounds, the machine's
    speed they read, and why the others were judged raw."""
    speeds = sorted(
        v.machine_speed for v in gate.verdicts if v.decided_by == "control" and v.machine_speed
    )
    raw = [v for v in gate.verdicts if v.not_divided]
    if not speeds:
        return [f"time judged raw, not over controls: {raw[0].not_divided}"] if raw else []
    out = [
        f"machine speed vs baseline, from the controls beside the rounds: "
        f"{speeds[len(speeds) // 2]:.3f} (>1 = slower now; {len(speeds)} benchmark(s) judged over "
        "their controls)"
    ]
    out += [f"judged on raw time: {key_label(v.key)}: {v.not_divided}" for v in raw[:3]]
    if len(raw) > 3:
        out.append(f"and {len(raw) - 3} more judged on raw time")
    return out
