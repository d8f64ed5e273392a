"""The comparison tables as plain text for a terminal or an 80-column CI log.

Rows never wrap: when the table is wider than ``width``, headers are abbreviated first,
then the least important columns are dropped, then the backend name is shortened.
"""

import textwrap
from collections.abc import Iterable

from ..gate import verdicts as V
from ..measure.records import Record
from . import escape, tables

_RESET = "\x1b[0m"
_STYLE = {
    "bold": "\x1b[1m",
    V.REGRESSED: "\x1b[1;31m",
    V.IMPROVED: "\x1b[32m",
    V.INCONCLUSIVE: "\x1b[33m",
    V.NEW: "\x1b[36m",
    V.MISSING: "\x1b[35m",
}
_GAP = 2
_MIN_BACKEND = 8


def _paint(text: str, style: str | None, color: bool) -> str:
    return f"{_STYLE[style]}{text}{_RESET}" if color and style in _STYLE else text


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "~"


#: Shorter backend names for narrow terminals, tried before any column is dropped.
_ABBREV = (("multiprocessing", "mp"),)


def _text(row: tables.Row, col: tables.Column, abbrev: bool) -> str:
    text = escape.terminal(row.cells.get(col.id, ""))  # a name from a file may hold ESC
    if abbrev and col.id == "backend":
        for long, short in _ABBREV:
            text = text.replace(long, short)
    return text


def _layout(tab: tables.Table, width: int, short: bool = False):
    """(columns, headers, widths, abbreviate, short headers) that fit ``width``, dropping
    columns as needed; ``short`` starts with the short headers (one vocabulary for a run)."""
    cols = list(tab.columns)
    abbrev = False

    def measure():
        heads = [c.short if short else c.header for c in cols]
        widths = [
            max([len(h)] + [len(_text(r, c, abbrev)) for r in tab.rows])
            for c, h in zip(cols, heads)
        ]
        return heads, widths, sum(widths) + _GAP * (len(widths) - 1)

    heads, widths, total = measure()
    while total > width:
        if not short:
            short = True
        elif not abbrev:
            abbrev = True
        else:
            droppable = [c for c in cols if c.priority > 0 and c.id != "median"]
            if not droppable:
                break
            cols.remove(max(droppable, key=lambda c: c.priority))
        heads, widths, total = measure()
    if total > width:  # only backend, median and the verdict are left: shorten the backend names
        widths[0] = max(widths[0] - (total - width), _MIN_BACKEND)
    return cols, heads, widths, abbrev, short


def _line(texts, cols, widths, width) -> str:
    cells = [
        _clip(t, w).rjust(w) if c.numeric else _clip(t, w).ljust(w)
        for t, c, w in zip(texts, cols, widths)
    ]
    return _clip((" " * _GAP).join(cells).rstrip(), width)


def render_table(
    tab: tables.Table, *, width: int = 80, color: bool = False, short: bool = False
) -> list[str]:
    cols, heads, widths, abbrev, _ = _layout(tab, width, short)
    lines = [_paint(_clip(escape.terminal(tab.title), width), "bold", color)]
    lines.append(_paint(_line(heads, cols, widths, width), "bold", color))
    for row in tab.rows:
        text = _line([_text(row, c, abbrev) for c in cols], cols, widths, width)
        status = row.verdict.status if row.verdict is not None else None
        lines.append(_paint(text, status, color) if status in (V.REGRESSED, V.MISSING) else text)
    return lines


def render_summary(
    gate: V.GateResult, *, width: int = 80, color: bool = False, every: bool = False
) -> list[str]:
    status = V.REGRESSED if gate.failed else None
    lines = _undecided(gate.undecided, width, color)  # said first: never a silent green
    lines.append(
        _paint(_clip(escape.terminal(f"Gate: {tables.headline(gate)}"), width), status, color)
    )
    for title, items in tables.summary(gate, every):
        lines.extend(textwrap.wrap(escape.terminal(f"{title}:"), width, subsequent_indent="  "))
        lines.extend(_items(items, width))
    return lines


def _undecided(said: list[str], width: int, color: bool) -> list[str]:
    """What neither time nor counts decided (gate/undecided.py): its headline, then each one."""
    if not said:
        return []
    head = textwrap.wrap(escape.terminal(said[0]), width, subsequent_indent="  ")
    return [_paint(line, V.INCONCLUSIVE, color) for line in head] + _items(said[1:], width)


def _items(items: list[str], width: int) -> list[str]:
    """A section's lines, each wrapped below its title."""
    wrap = textwrap.TextWrapper(
        width, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False
    )
    return [line for item in items for line in wrap.wrap(escape.terminal(item))]


def render_memory(memory: V.MemoryResult, *, width: int = 80, color: bool = False) -> list[str]:
    lines: list[str] = []
    for title, items in tables.memory_summary(memory):
        status = V.REGRESSED if memory.failed and title != "Memory" else None
        lines.extend(
            _paint(t, status, color)
            for t in textwrap.wrap(escape.terminal(f"{title}:"), width, subsequent_indent="  ")
        )
        lines.extend(_items(items, width))
    return lines


def render(
    records: Iterable[Record],
    gate: V.GateResult | None = None,
    *,
    width: int = 80,
    color: bool = False,
    memory: V.MemoryResult | None = None,
    every: bool = False,
) -> str:
    """All tables (and the gate block when a gate ran, and the memory block: leaks are judged
    without a baseline too), every line at most ``width`` columns."""
    width = max(int(width), 40)
    records = list(records)
    built = tables.build(records, gate)
    short = any(_layout(t, width)[4] for t in built)  # one table's short headers: every table's
    blocks = [render_table(t, width=width, color=color, short=short) for t in built]
    notes = tables.measure_notes(records)
    if notes:
        blocks.append(
            [
                line
                for note in notes
                for line in textwrap.wrap(escape.terminal(note), width, subsequent_indent="  ")
            ]
        )
    if gate is not None:
        blocks.append(render_summary(gate, width=width, color=color, every=every))
    memory = memory if memory is not None else gate.memory if gate is not None else None
    if memory is not None:
        blocks.append(render_memory(memory, width=width, color=color))
    if not blocks:
        return "no pytest-concurrency benchmarks to report"
    return "\n\n".join("\n".join(b) for b in blocks)


def write(
    terminalreporter,
    records: Iterable[Record],
    gate: V.GateResult | None = None,
    memory: V.MemoryResult | None = None,
    every: bool = False,
) -> None:
    """Write the report into pytest's terminal summary (call from ``pytest_terminal_summary``);
    ``every``: the unchanged verdicts too (``-v``)."""
    records = list(records)
    if not records and gate is None:
        return
    tr = terminalreporter
    width = getattr(getattr(tr, "_tw", None), "fullwidth", 80) or 80
    tr.write_sep("-", "concurrency benchmarks")
    text = render(
        records,
        gate,
        width=width,
        color=bool(getattr(tr, "hasmarkup", False)),
        memory=memory,
        every=every,
    )
    for line in text.splitlines():
        tr.write_line(line)


def header_lines(said: list, width: int) -> list[list[str]]:
    """pytest's header lines (``pytest_report_header``'s results, a line or a list of lines from
    each plugin, pytest's own among them) with every line longer than ``width`` wrapped, its rest
    indented: nothing left out, and a CI log of ``width`` columns shows it whole (pytest-benchmark's
    defaults line is 176 columns, the plugins line 107). A word longer than the width (a path)
    stays whole."""

    def wrapped(line: str) -> list[str]:
        if len(line) <= width:
            return [line]
        return textwrap.wrap(
            line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        ) or [line]

    return [
        [part for line in ([item] if isinstance(item, str) else item) for part in wrapped(line)]
        for item in said
    ]


def paired_lines(result, width: int = 80) -> list[str]:
    """The verdicts against the base side (``--concurrency-against``), printed after the head's session."""
    from ..gate import paired

    lines = [" against the base side (paired rounds) ".center(width, "-")]
    lines += _undecided(result.undecided, width, False)  # said first: never a silent green
    # paths stay whole (copyable), however long
    lines += textwrap.wrap(
        escape.terminal(f"Sides: {result.sides}"),
        width,
        subsequent_indent="  ",
        break_on_hyphens=False,
        break_long_words=False,
    )
    for v in result.verdicts:
        if v.figure != "time" and v.status not in (V.REGRESSED, V.IMPROVED):
            continue  # counted in the summary: four kernel figures per benchmark would bury the verdicts
        lines += textwrap.wrap(
            escape.terminal(paired.line(v)),
            width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
    lines.append(escape.terminal(paired.summary(result)))
    return lines
