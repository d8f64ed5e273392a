"""The reports' content, from fixed pytest-benchmark JSON files in tests/data.

Expected figures are computed here from the inputs' raw samples and extra_info, and read
back out of the rendered cells, so a wrong computation or a wrong unit both fail.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest

from pytest_concurrency.gate import verdicts as V
from pytest_concurrency.measure.records import Document, key_label, params_id
from pytest_concurrency.report import markdown, tables, terminal

# version-independent (the reports from fixed JSON files): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

DATA = Path(__file__).parent / "data"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

_PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
_TIME = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def parse_time(text: str) -> float:
    """'1.50 µs' -> 1.5e-6."""
    number, unit = text.split()
    return float(number) * _TIME[unit]


def close(rendered: float, expected: float) -> bool:
    return math.isclose(rendered, expected, rel_tol=0.006)  # cells keep 3 significant digits


@pytest.fixture(scope="module")
def current():
    return Document.of(json.loads((DATA / "run_b.json").read_text())).records


@pytest.fixture(scope="module")
def base():
    return Document.of(json.loads((DATA / "run_a.json").read_text())).records


def median(rec) -> float:
    return statistics.median(rec.samples)


def table_for(built, workload, **params):
    pid = params_id(params)
    (tab,) = [t for t in built if t.workload == workload and t.params_id == pid]
    return tab


def gate_from(base, current, regressed=(), improved=()) -> V.GateResult:
    """A gate result as the gate would give it, with chosen statuses (the gate is tested elsewhere)."""
    b = {r.key: r for r in base}
    c = {r.key: r for r in current}
    out = []
    for key, rec in c.items():
        if key not in b:
            out.append(V.Verdict(key, V.NEW, current_median=median(rec)))
            continue
        bm, cm = median(b[key]), median(rec)
        status = V.REGRESSED if key in regressed else V.IMPROVED if key in improved else V.UNCHANGED
        out.append(V.Verdict(key, status, bm, cm, cm / bm - 1, p_value=0.0004, threshold=0.10))
    out += [V.Verdict(k, V.MISSING, baseline_median=median(r)) for k, r in b.items() if k not in c]
    return V.GateResult(out, calibration_ratio=1.01)


GEVENT_RING = ("ring", "m=1000,n=100", "gevent")
ASYNCIO_RING = ("ring", "m=1000,n=100", "asyncio")


# -- rows and figures -------------------------------------------------------------------------


def test_one_table_per_workload_and_params_in_order_of_appearance(current):
    built = tables.build(current)
    expected = []
    for r in current:
        key = (r.workload, params_id(r.params))
        if key not in expected:
            expected.append(key)
    assert [(t.workload, t.params_id) for t in built] == expected
    assert sum(len(t.rows) for t in built) == len(current)


def test_rows_fastest_first_with_relative_to_fastest(current):
    for tab in tables.build(current):
        meds = [median(row.record) for row in tab.rows]
        assert meds == sorted(meds), tab.title
        for row, med in zip(tab.rows, meds):
            assert close(float(row.cells["relative"].rstrip("x")), med / meds[0])


def test_a_row_that_measured_zero_is_nobodys_fastest(current):
    """A count of 0 (a test that counts nothing) made every other row's "x fastest" a division
    by zero, and the whole report a traceback; it reads 0x, the others relative to the next."""
    tab = tables.build(current)[0]
    first = tab.rows[0].record
    zero = type(first)(**{**first.__dict__, "samples": [0.0] * len(first.samples)})
    rows = {
        id(r.record): r for r in tables.build([zero, *(r.record for r in tab.rows[1:])])[0].rows
    }
    others = [r.record for r in tab.rows[1:]]
    assert rows[id(zero)].cells["relative"] == "0.00x"
    fastest = min(median(r) for r in others)
    for rec in others:
        assert close(float(rows[id(rec)].cells["relative"].rstrip("x")), median(rec) / fastest)


def test_ring_switch_and_call_show_time_per_op(current):
    built = tables.build(current)
    for tab in built:
        for row in tab.rows:
            rec = row.record
            if rec.unit in ("hop", "switch", "call"):
                value, unit = row.cells["per_op"].split("/")
                assert unit == rec.unit
                assert close(parse_time(value), median(rec) / rec.ops), row.cells


def test_chain_shows_events_per_second(current):
    tab = table_for(
        tables.build(current), "chain", workers=100, events=2000, capacity=16, payload="str"
    )
    for row in tab.rows:
        m = re.fullmatch(r"([\d.]+) ([kMG]?)events/s", row.cells["per_op"])
        assert m, row.cells["per_op"]
        assert close(float(m[1]) * _PREFIX[m[2]], row.record.ops / median(row.record))
    assert any("Mevents/s" in row.cells["per_op"] for row in tab.rows)  # large rates scaled


def test_io_shows_overhead_above_ideal_per_task(current):
    tab = table_for(tables.build(current), "io", tasks=200, latency=0.1, mode="tcp")
    assert any(c.id == "ideal" for c in tab.columns)
    for row in tab.rows:
        rec = row.record
        over = median(rec) - rec.extra["ideal_s"]
        value, unit = row.cells["per_op"].split("/")
        assert unit == "task"
        assert close(parse_time(value), over / rec.ops)
        ideal, extra = row.cells["ideal"].split(" / +")
        assert close(parse_time(ideal), rec.extra["ideal_s"]) and close(parse_time(extra), over)
        assert close(parse_time(row.cells["median"]), median(rec))


def test_spawn_shows_time_and_memory_per_task(current):
    tab = table_for(tables.build(current), "spawn", count=10000)
    for row in tab.rows:
        rec = row.record
        assert close(parse_time(row.cells["per_op"].split("/")[0]), median(rec) / rec.ops)
        kib, suffix = row.cells["memory"].split(" KiB")
        assert suffix == "/task" and close(float(kib), rec.extra["kib_per_task"])


def test_cpu_ctx_and_rss_columns(current):
    tab = tables.build(current)[0]
    for row in tab.rows:
        x = row.record.extra
        m = re.fullmatch(r"([\d.]+)\+([\d.]+) (\S+)", row.cells["cpu"])
        assert m, row.cells["cpu"]
        assert close(float(m[1]) * _TIME[m[3]], x["cpu_user_s"])
        assert close(float(m[2]) * _TIME[m[3]], x["cpu_sys_s"])
        vol, invol = row.cells["ctx"].split("/")
        assert close(float(vol.rstrip("k")) * (1e3 if vol.endswith("k") else 1), x["ctx_voluntary"])
        assert float(invol) == x["ctx_involuntary"]
        rss = row.cells["memory"]
        assert rss.endswith(" MiB rss") and close(float(rss.split()[0]) * 1024, x["peak_rss_kib"])


def test_record_without_raw_samples_uses_ns_per_op(current):
    rec = current[0]
    bare = type(rec)(**{**rec.__dict__, "samples": []})
    assert close(tables.round_median(bare), median(rec))


# -- with a gate ------------------------------------------------------------------------------


def test_regressed_row_shows_change_and_verdict(base, current):
    gate = gate_from(base, current, regressed={GEVENT_RING}, improved={ASYNCIO_RING})
    tab = table_for(tables.build(current, gate), "ring", n=100, m=1000)
    rows = {row.backend: row for row in tab.rows}
    b = {r.key: r for r in base}[GEVENT_RING]
    c = rows["gevent"].record
    assert rows["gevent"].cells["verdict"] == "REGRESSED"
    assert float(rows["gevent"].cells["change"].rstrip("%")) == pytest.approx(
        (median(c) / median(b) - 1) * 100, abs=0.05
    )
    assert rows["gevent"].cells["change"].startswith("+")
    assert rows["asyncio"].cells["verdict"] == "improved"
    assert rows["asyncio"].cells["change"].startswith("-")
    assert rows["greenlet"].cells["verdict"] == "unchanged"


def test_missing_and_new_benchmarks_are_rows(base, current):
    gate = gate_from(base, current)
    built = tables.build(current, gate)
    missing = [(t, r) for t in built for r in t.rows if r.verdict and r.verdict.status == V.MISSING]
    new = [(t, r) for t in built for r in t.rows if r.verdict and r.verdict.status == V.NEW]
    assert [(t.workload, t.params_id, r.backend) for t, r in missing] == [
        ("ring", "m=1000,n=10", "eventlet")
    ]
    assert [(t.workload, r.backend) for t, r in new] == [("switch", "uvloop")]
    tab, row = missing[0]
    assert row is tab.rows[-1]  # no current figures: after every measured row
    assert (
        row.record is None
        and row.cells["per_op"] == tables.NA
        and row.cells["verdict"] == "missing"
    )
    assert new[0][1].cells["verdict"] == "new"


def test_terminal_gate_summary_lists_regressions_first(base, current):
    gate = gate_from(base, current, regressed={GEVENT_RING}, improved={ASYNCIO_RING})
    text = terminal.render(current, gate, width=80)
    summary = text[text.index("Gate: ") :]
    assert summary.startswith("Gate: 1 regression, 1 improved")
    order = [summary.index(s) for s in ("Regressions", "Faster than", "New since", "Missing from")]
    assert order == sorted(order)
    assert "ring[m=1000,n=100] on gevent" in summary.split("Faster than")[0]
    assert "switch[switches=100000] on uvloop" in summary
    assert "ring[m=1000,n=10] on eventlet" in summary


def test_the_unchanged_ones_and_their_intervals_with_every(base, current):
    """-v and the markdown report: how close each unchanged benchmark came, not only the failures."""
    gate = gate_from(base, current, regressed={GEVENT_RING})
    for v in gate.verdicts:
        if v.status == V.UNCHANGED:
            v.ci = (v.change - 0.01, v.change + 0.01)
    quiet = terminal.render(current, gate, width=100)
    loud = terminal.render(current, gate, width=100, every=True)
    assert "Unchanged (within the threshold" not in quiet
    section = loud[loud.index("Unchanged (within the threshold") :]
    unchanged = [v for v in gate.verdicts if v.status == V.UNCHANGED]
    assert unchanged and all(key_label(v.key) in section for v in unchanged)
    assert "interval " in section and "ring[m=1000,n=100] on gevent" not in section
    assert "Unchanged (within the threshold" in markdown.render(current, gate)


def test_refused_comparison_says_why(current):
    gate = V.GateResult(refused="baseline is from Python 3.12, this run is 3.11")
    text = terminal.render(current, gate, width=80)
    assert "Comparison refused: baseline is from Python 3.12" in text
    md = markdown.render(current, gate)
    assert "Comparison refused: baseline is from Python 3.12" in md.split("###")[0]


# -- layout -----------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 60, 40])
@pytest.mark.parametrize("with_gate", [False, True])
def test_every_line_fits_the_width(base, current, width, with_gate):
    gate = gate_from(base, current, regressed={GEVENT_RING}) if with_gate else None
    text = terminal.render(current, gate, width=width)
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long
    # the essentials survive narrowing
    for rec in current:
        assert rec.backend.replace("multiprocessing", "mp")[:8] in text
    if with_gate:
        assert "REGRESSED" in text


def test_wide_terminal_keeps_every_column(current):
    text = terminal.render(current, width=200)
    header = text.splitlines()[1]
    for col in ("median", "per op", "x fastest", "CPU u+s", "ctx vol/inv", "memory"):
        assert col in header


def test_colour_only_when_asked(base, current):
    gate = gate_from(base, current, regressed={GEVENT_RING})
    assert not ANSI.search(terminal.render(current, gate, width=80, color=False))
    coloured = terminal.render(current, gate, width=80, color=True)
    regressed = [line for line in coloured.splitlines() if "REGRESSED" in line and "gevent" in line]
    assert regressed and ANSI.search(regressed[0])
    assert all(len(ANSI.sub("", line)) <= 80 for line in coloured.splitlines())


def test_write_uses_the_terminal_reporter(current):
    class FakeTR:
        hasmarkup = False

        class _tw:
            fullwidth = 72

        def __init__(self):
            self.lines = []

        def write_sep(self, sep, title):
            self.lines.append(f"{sep * 3} {title}")

        def write_line(self, line):
            self.lines.append(line)

    tr = FakeTR()
    terminal.write(tr, current)
    assert tr.lines[0] == "--- concurrency benchmarks"
    assert "\n".join(tr.lines[1:]) == terminal.render(current, width=72)


# -- markdown ---------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    return re.split(r"(?<!\\)\|", line[1:-1])


def test_markdown_tables_are_valid_and_complete(base, current):
    gate = gate_from(base, current, regressed={GEVENT_RING}, improved={ASYNCIO_RING})
    md = markdown.render(current, gate)
    head = md.split("###")[0]
    assert head.index("1 regression") < head.index("Regressions")
    blocks = md.split("### ")[1:]
    assert len(blocks) == len(tables.build(current, gate))
    for block in blocks:
        lines = [line for line in block.splitlines()[1:] if line.strip()]
        header, sep, *rows = lines
        n = len(_cells(header))
        assert all(re.fullmatch(r":?-{3,}:?", c) for c in _cells(sep)) and len(_cells(sep)) == n
        assert rows and all(len(_cells(r)) == n for r in rows)
    gevent = [
        line for line in md.splitlines() if line.startswith("| **gevent**") and "REGRESSED" in line
    ]
    assert len(gevent) == 1


def test_markdown_write_is_atomic_and_replaces(tmp_path, current):
    target = tmp_path / "report.md"
    target.write_text("old")
    text = markdown.render(current)
    markdown.write(target, text)
    assert target.read_text(encoding="utf-8") == text
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


# -- charts -----------------------------------------------------------------------------------


def test_plots_one_chart_per_workload_and_scaling_where_a_size_sweeps(tmp_path, current):
    pytest.importorskip("matplotlib")
    from pytest_concurrency.report import plot

    paths = [Path(p) for p in plot.write(tmp_path / "charts", current)]
    names = sorted(p.name for p in paths)
    workloads = {r.workload for r in current}
    assert sorted(n for n in names if n.endswith("-models.png")) == sorted(
        f"{w}-models.png" for w in workloads
    )
    # ring sweeps n, chain sweeps workers; io, spawn, switch have one case each
    assert sorted(n for n in names if "-scaling-" in n) == [
        "chain-scaling-workers.png",
        "ring-scaling-n.png",
    ]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == names  # no temp files left


def test_sweep_needs_the_other_params_fixed(current):
    from pytest_concurrency.report import plot

    ring = [r for r in current if r.workload == "ring"]
    ((size, rest, group),) = plot.sweeps(ring)
    assert size == "n" and rest == {"m": 1000}
    assert {r.params["n"] for r in group} == {10, 100, 1000}
    # two params varying together are no sweep of either
    tangled = [
        type(r)(**{**r.__dict__, "params": {"n": r.params["n"], "m": r.params["n"] * 2}})
        for r in ring
    ]
    assert plot.sweeps(tangled) == []


def test_plot_without_matplotlib_names_the_extra(tmp_path, current, monkeypatch):
    import sys

    from pytest_concurrency.report import plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    with pytest.raises(
        plot.PlotError, match=re.escape("pip install pytest-concurrency-bench[plot]")
    ):
        plot.write(tmp_path, current)


def test_every_table_of_a_run_uses_the_same_headers():
    from pytest_concurrency.measure.records import Record

    def rec(workload, backend, extra):
        return Record(
            workload,
            {"n": 1},
            backend,
            [0.01, 0.011, 0.012],
            ops=10,
            unit="hop",
            extra={
                "cpu_user_s": 0.01,
                "cpu_sys_s": 0.001,
                "ctx_voluntary": 3.0,
                "ctx_involuntary": 1.0,
                "peak_rss_kib": 40000,
                **extra,
            },
        )

    narrow = [rec("ring", "gevent", {})]
    wide = [rec("io", "multiprocessing[forkserver]", {"ideal_s": 0.005})]
    text = terminal.render(narrow + wide, width=95)  # the narrow table would fit long headers alone
    headers = [line for line in text.splitlines() if line.startswith("backend")]
    assert len(headers) == 2
    long_words = [h for h in headers if "x fastest" in h]
    assert long_words == [] or len(long_words) == 2, headers  # never one of each


def test_section_titles_wrap_instead_of_being_cut():
    gate = V.GateResult(
        verdicts=[V.Verdict(("ring", "n=1", "gevent"), V.INCONCLUSIVE, 0.01, 0.012, change=0.2)]
    )
    lines = terminal.render_summary(gate, width=60)
    assert not any(line.endswith("~") for line in lines)
    assert any("load" in line for line in lines)


def test_kernel_chart_per_workload_with_kernel_figures_unmeasured_never_zero(
    tmp_path, current, monkeypatch
):
    pytest.importorskip("matplotlib")
    from pytest_concurrency.report import plot

    ring = [r for r in current if r.workload == "ring"]
    for i, r in enumerate(ring):  # one record did not measure syscalls (no perf): no bar, never 0
        r.extra.update(
            syscalls_per_op=None if i == 0 else 1.5 + i, csw_per_op=0.25, sys_s_per_op=2e-6
        )
    drawn = []
    real_bars = plot._bars

    def bars(ax, records, values, backends, colors):
        drawn.append(values)
        return real_bars(ax, records, values, backends, colors)

    names = sorted(Path(p).name for p in plot.write(tmp_path / "charts", current))
    assert [n for n in names if n.endswith("-kernel.png")] == [
        "ring-kernel.png"
    ]  # the others have none
    monkeypatch.setattr(plot, "_bars", bars)
    plot.kernel_chart(str(tmp_path / "k.png"), "ring", ring, plot._colors(ring))
    syscalls, switches, system_us = drawn
    assert math.isnan(syscalls[0]) and syscalls[1:] == [1.5 + i for i in range(1, len(ring))]
    assert switches == [0.25] * len(ring) and system_us == pytest.approx([2.0] * len(ring))
    assert (tmp_path / "charts" / "ring-kernel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("others", [3, 10, 500])
def test_the_baseline_entries_a_run_did_not_measure_are_summarised_beyond_ten(current, others):
    """~0 s: a run of one test against a baseline of 500 listed 500 missing rows, a table each,
    and 500 summary lines, in the terminal and the markdown report alike."""
    (first,) = current[:1]
    missing = [
        V.Verdict((f"w{i}", "n=1", "gevent"), V.MISSING, baseline_median=1.0) for i in range(others)
    ]
    missing.append(V.Verdict((first.key[0], first.key[1], "other"), V.MISSING, baseline_median=1.0))
    gate = V.GateResult([V.Verdict(first.key, V.UNCHANGED, 1.0, 1.0, 0.0), *missing])
    listed = others + 1 <= tables.MISSING_LISTED
    built = tables.build([first], gate)
    assert len(built) == (1 + others if listed else 1)  # beside the case run: its row stays
    assert [r.backend for r in built[0].rows] == [first.backend, "other"]
    (lines,) = [lines for title, lines in tables.summary(gate) if title == "Missing from this run"]
    assert len(lines) == min(others + 1, tables.MISSING_LISTED + 1)
    if not listed:
        more = others + 1 - tables.MISSING_LISTED
        assert lines[-1].startswith(f"and {more} more benchmarks of the baseline that this run")
    for text in (terminal.render([first], gate, width=100), markdown.render([first], gate)):
        assert ("w0 [n=1]" in text) == listed, text  # a table of a case not run
        if not listed:
            assert len(text.splitlines()) < 50, text
    assert "Gate: " + tables.headline(gate) in terminal.render([first], gate, width=100)
    assert f"{others + 1} missing" in tables.headline(gate)
