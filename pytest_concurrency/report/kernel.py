"""The kernel figures as the reports show them: a table cell per record, sections for the gate.

The cell is syscalls and context switches per op (``1.24 sc 0.02 cs``), the two that tell
what a model asks of the kernel for each unit of work; every figure is in the JSON
(``extra_info``) and in the gate's verdicts.
"""

from ..gate import kernel as kernel_gate
from ..gate import verdicts as V
from ..measure.records import Record

NA = "-"

SECTIONS = (
    (V.REGRESSED, "Kernel regressions (fail the build)"),
    (V.IMPROVED, "Kernel figures improved"),
    (V.INCONCLUSIVE, "Kernel figures inconclusive (moved, but so did the machine's load)"),
    (V.NOT_MEASURED, "Kernel figures not measured (neither passed nor failed)"),
)


def cell(rec: Record) -> str:
    syscalls, csw = rec.metric("syscalls_per_op"), rec.metric("csw_per_op")
    if syscalls is None and csw is None:
        return NA
    parts = [
        f"{syscalls:.3g} sc" if isinstance(syscalls, (int, float)) else "? sc",
        f"{csw:.3g} cs" if isinstance(csw, (int, float)) else "? cs",
    ]
    return " ".join(parts)


def sections(result: V.KernelResult | None) -> list[tuple[str, list[str]]]:
    """(title, lines) of the kernel part of the gate block, ending with its summary."""
    if result is None or not result.verdicts:
        return []
    out = []
    for status, title in SECTIONS:
        if status == V.NOT_MEASURED:
            lines = list(result.not_measured)  # once per reason, not once per benchmark
        else:
            lines = [kernel_gate.line(v) for v in result.by_status(status)]
        if lines:
            out.append((title, lines))
    out.append(
        ("Kernel", [kernel_gate.summary(result), *filter(None, [kernel_gate.loose_note(result)])])
    )
    return out
