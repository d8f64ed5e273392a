"""The comparison tables in GitHub markdown, for a CI job summary or a pull-request comment."""

from collections.abc import Iterable

from ..gate import verdicts as V
from ..measure.records import Record, key_label
from ..store import atomic
from . import escape, tables

#: The first line of each report this module writes: a file that starts with one is a report an
#: output may replace, whatever its name (outputs.py).
TITLE = "## Concurrency benchmarks"
PAIRED_TITLE = "## Against the base side (paired rounds)"
TITLES = (TITLE, PAIRED_TITLE)


def _cell(text: str) -> str:
    # every piece of text goes through here: names, versions and notes may come from a file
    return escape.markdown(text) if text else " "


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_table(tab: tables.Table) -> list[str]:
    cols = tab.columns
    lines = [f"### {_cell(tab.title)}", ""]
    lines.append("| " + " | ".join(_cell(c.header) for c in cols) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else ":---" for c in cols) + "|")
    for row in tab.rows:
        cells = [_cell(row.cells.get(c.id, "")) for c in cols]
        if row.verdict is not None and row.verdict.status == V.REGRESSED:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render(
    records: Iterable[Record],
    gate: V.GateResult | None = None,
    memory: V.MemoryResult | None = None,
) -> str:
    """Markdown: the gate's headline (regressions first), its details, the memory verdicts
    (leaks are judged without a baseline too), then one table per case."""
    records = list(records)
    out = [TITLE, ""]
    out += _undecided(gate.undecided if gate is not None else [])  # said first
    memory = memory if memory is not None else gate.memory if gate is not None else None
    if gate is not None:
        # a gate that compared nothing passed nothing either (its session exits 8)
        nothing = V.nothing_in_common(gate) is not None
        mark = ":x:" if gate.failed or nothing else ":white_check_mark:"
        out += [f"**{mark} {_cell(tables.headline(gate))}**", ""]
    sections = (
        tables.summary(gate, every=True) if gate is not None else []
    ) + tables.memory_summary(memory)
    for title, items in sections:
        out.append(f"**{_cell(title)}**")
        out.append("")
        out += [f"- {_cell(item)}" for item in items]
        out.append("")
    built = tables.build(records, gate)
    if not built:
        out.append("No pytest-concurrency benchmarks in this run.")
    else:
        workloads = {t.workload for t in built}
        out += [
            f"{_plural(len(records), 'benchmark')}, {_plural(len(workloads), 'workload')}; "
            "fastest first by median round time.",
            "",
        ]
    for tab in built:
        out += render_table(tab) + [""]
    out += [f"- {_cell(note)}" for note in tables.measure_notes(records)]
    return "\n".join(out).rstrip() + "\n"


def _undecided(said: list[str]) -> list[str]:
    """What neither time nor counts decided (gate/undecided.py): the report's first rows."""
    if not said:
        return []
    return [f"**:warning: {_cell(said[0])}**", "", *(f"- {_cell(line)}" for line in said[1:]), ""]


def render_matrix(records: Iterable[Record]) -> str:
    """One line per case, one column per backend: the per-op figure, fastest in bold."""
    built = tables.build(records)
    backends = sorted({row.backend for tab in built for row in tab.rows})
    lines = [
        "| case | " + " | ".join(_cell(tables.backend_label(b)) for b in backends) + " |",
        "|:---|" + "---:|" * len(backends),
    ]
    for tab in built:
        by_backend = {row.backend: row for row in tab.rows if row.record is not None}
        fastest = tab.rows[0].backend if tab.rows else None
        cells = []
        for backend in backends:
            row = by_backend.get(backend)
            text = tables.per_op_text(row.record) if row else tables.NA
            cells.append(f"**{_cell(text)}**" if backend == fastest else _cell(text))
        lines.append(f"| {_cell(tab.title)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_paired(result) -> str:
    """The verdicts against the base side (``--concurrency-against``): every one, kernel figures
    included (the terminal shows only the kernel figures that moved), so a CI job can read them."""
    from ..gate import paired

    mark = ":x:" if result.failed else ":white_check_mark:"
    out = [
        PAIRED_TITLE,
        "",
        *_undecided(result.undecided),  # said first
        f"**{mark} {_cell(paired.summary(result))}**",
        "",
        f"Sides: {_cell(result.sides)}",
        "",
        "| benchmark | figure | change | 99% interval | quads | pairs of sessions | threshold | verdict | why |",
        "|:---|:---|---:|---:|---:|---:|---:|:---|:---|",
    ]
    for v in result.verdicts:
        figure = _cell("time" if v.figure == "time" else paired.figure_name(v.figure))
        change = paired.pct(v.change) if v.change is not None else " "
        interval = f"{paired.pct(v.ci[0])} to {paired.pct(v.ci[1])}" if v.ci else " "
        status = f"**{_cell(v.status)}**" if v.status == V.REGRESSED else _cell(v.status)
        out.append(
            f"| {_cell(key_label(v.key))} | {figure} | {change} | {interval} | {v.pairs} | {v.sessions} | "
            f"{V.share(v.threshold)} | {status} | {_cell(v.note)} |"
        )
    return "\n".join(out) + "\n"


def write(path, text: str) -> str:
    """Write ``text`` to ``path`` atomically (a reader never sees half a report)."""
    return atomic.write_text(path, text)
