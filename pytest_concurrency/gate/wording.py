"""The gate's verdicts as plain lines: a headline, notes, one line per verdict worth reading.

The terminal and markdown reports lay verdicts out in tables (``report``); this is the plain
form, for logs and for reading a result in a test or a script.
"""

from __future__ import annotations

from .. import measure
from . import memory as memory_gate
from .compare import SAVE_FLAG
from .verdicts import IMPROVED, INCONCLUSIVE, MISSING, NEW, REGRESSED, UNCHANGED, GateResult, Verdict


def _label(key: tuple) -> str:
    """Headline form, backend first: ``REGRESSION uvloop ring[m=1000,n=50]``."""
    workload, params, backend = key
    return f"{backend} {workload}[{params}]" if params else f"{backend} {workload}"


def _amount(value: float | None, kind: str) -> str:
    """A median in its measure's unit: ``12.3 ms`` or ``1,234,567 instr``."""
    unit = measure.get(kind).unit
    if unit != "s":
        return "?" if value is None else f"{value:,.0f} {unit}"
    return _duration(value)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _change(v: Verdict) -> str:
    change = v.change if v.change is not None else v.raw_change
    if change is None:
        return ""
    word = "slower" if change >= 0 else "faster"
    figures = f"median {_amount(v.baseline_median, v.measure)} -> {_amount(v.current_median, v.measure)}"
    if v.p_value is not None:
        figures += f", p={v.p_value:.2g}"
    figures += f", {v.decided_by}"
    if v.decided_by == "normalized" and v.raw_change is not None:
        figures += f"; raw {v.raw_change:+.1%}"
    elif v.normalized_change is not None and abs(v.normalized_change - (v.raw_change or 0)) >= 0.005:
        figures += f"; normalized {v.normalized_change:+.1%}"
    return f"{abs(change):.1%} {word} ({figures})"


_HEAD = {REGRESSED: "REGRESSION", IMPROVED: "IMPROVED", INCONCLUSIVE: "INCONCLUSIVE",
         NEW: "NEW", MISSING: "MISSING", UNCHANGED: "unchanged"}


def format_lines(result: GateResult, verbose: bool = False) -> list[str]:
    """The gate's terminal text: a headline, notes, then one line per verdict worth reading."""
    if result.refused:
        return [f"concurrency gate: REFUSED: {result.refused}"]
    if result.rerecord:
        return [f"concurrency gate: RE-RECORD THE BASELINE: {result.rerecord}"]
    lines = [f"concurrency gate: {result.summary}"]
    lines += [f"  note: {n}" for n in result.notes]
    for v in result.verdicts:
        if v.status == UNCHANGED and not verbose and not v.widened_by:  # a widened threshold is always shown
            continue
        line = f"{_HEAD[v.status]} {_label(v.key)}"
        detail = _change(v) if v.status not in (NEW, MISSING) else ""
        if detail:
            line += f": {detail}"
        if v.versions_changed:
            line += "; " + ", ".join(f"{lib} {a} -> {b}" for lib, (a, b) in v.versions_changed.items())
        if v.status == IMPROVED:
            line += f" - baseline is stale; refresh it ({SAVE_FLAG})"
        if v.note:
            line += f" - {v.note}" if detail else f": {v.note}"
        lines.append(line)
    if result.memory is not None:
        lines += [f"MEMORY {v.status.upper()} {memory_gate.line(v)}" for v in result.memory.verdicts
                  if verbose or v.status != UNCHANGED]
    return lines
