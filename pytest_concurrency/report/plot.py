"""Charts: per workload a bar chart of the models, its kernel figures, and scaling curves where a size sweeps.

Needs matplotlib (the ``plot`` extra). A size sweeps when one numeric parameter takes
several values while the workload's other parameters stay fixed (ring ``n``, io ``tasks``,
chain ``workers``, spawn ``count``); its curve shows per-op cost against that size on a log
axis, one line per backend, as seed 001 drew it for threads and goroutines. The kernel chart
shows, per model, the syscalls, context switches and system CPU time each op cost, where the run
recorded them (time mode; counted workload cases, from untimed rounds outside valgrind).
"""

import functools
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable

from ..measure.records import Record, params_id
from ..store import atomic
from . import tables

INSTALL_HINT = "pip install pytest-concurrency-bench[plot]"


class PlotError(RuntimeError):
    """Charts cannot be drawn or written; the message says why and what to do."""


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotError(f"charts need matplotlib, which is not installed: {INSTALL_HINT}") from exc
    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "benchmark"


def _is_size(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


# -- what to draw ----------------------------------------------------------------------------


def figure_of(records: list[Record]) -> tuple[list[float], str, bool]:
    """(values, axis label, higher is better) in one unit shared by all ``records``."""
    if all(tables.is_rate(r) for r in records):
        unit = records[0].unit
        values = [tables.rate(r) for r in records]
        scale, prefix = next(
            (
                (s, p)
                for s, p in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
                if max(values) >= s
            ),
            (1.0, ""),
        )
        return [v / scale for v in values], f"{prefix}{unit}s per second (higher is better)", True
    values = [tables.cost_per_op(r) for r in records]
    scale, tunit = tables.time_unit(_typical(values))
    units = sorted({r.unit for r in records})
    what = (
        "overhead above ideal"
        if any(tables.io_overhead(r) is not None for r in records)
        else "time"
    )
    return (
        [v / scale for v in values],
        f"{what}, {tunit} per {'/'.join(units)} (lower is better)",
        False,
    )


def _typical(values: list[float]) -> float:
    finite = sorted(v for v in values if math.isfinite(v) and v > 0)
    return finite[len(finite) // 2] if finite else 1.0


def split_params(records: list[Record]) -> tuple[list[str], dict]:
    """(names that vary across the workload's cases, the fixed ones with their value)."""
    names = sorted({k for r in records for k in r.params})
    varying, fixed = [], {}
    for name in names:
        values = {repr(r.params.get(name)) for r in records}
        if len(values) > 1:
            varying.append(name)
        else:
            fixed[name] = records[0].params.get(name)
    return varying, fixed


def sweeps(records: list[Record]) -> list[tuple[str, dict, list[Record]]]:
    """(size parameter, the other parameters held fixed, records) for each sweep in a workload."""
    out = []
    varying, _ = split_params(records)
    for size in varying:
        groups: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            if _is_size(r.params.get(size)):
                rest = {k: v for k, v in r.params.items() if k != size}
                groups[params_id(rest)].append(r)
        for group in groups.values():
            if len({r.params[size] for r in group}) >= 2:
                rest = {k: v for k, v in group[0].params.items() if k != size}
                out.append((size, rest, group))
    return out


# -- drawing ---------------------------------------------------------------------------------


def _colors(records: Iterable[Record]) -> dict[str, object]:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10")
    backends = sorted({r.backend for r in records})
    return {b: cmap(i % 10) for i, b in enumerate(backends)}


def _plain(axis) -> None:
    """Tick labels as plain numbers ("40", not "4x10^1") so values read straight off the axis."""
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(fmt)
    # label the 2s and 5s too: a log axis spanning one decade would otherwise show one number
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def _log_if_wide(ax, values) -> None:
    finite = [v for v in values if math.isfinite(v) and v > 0]
    if finite and max(finite) / min(finite) > 30:
        ax.set_yscale("log")
        _plain(ax.yaxis)


def _legend(ax, n: int) -> None:
    # beside the plot: inside it would cover bars or line ends
    ax.legend(
        title="backend",
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        ncol=1 if n <= 12 else 2,
    )


def _saved(plt, fig, ax, title: str, fixed: dict, n: int, path: str) -> str:
    """The chart titled (a line below for ``fixed``: the parameters all its records share), the
    legend of its ``n`` models beside it, written to ``path`` and closed."""
    if fixed:
        title += "\n" + ", ".join(f"{k}={v}" for k, v in fixed.items())
    ax.set_title(title)
    _legend(ax, n)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cases(records: list[Record]) -> list[str]:
    cases: list[str] = []
    for r in records:
        pid = params_id(r.params)
        if pid not in cases:
            cases.append(pid)
    return cases


def _bars(
    ax, records: list[Record], values: list[float], backends: list[str], colors: dict
) -> dict:
    """Grouped bars on ``ax``: one group per case, one bar per backend, labelled by the cases' varying
    params; returns each record's bar position."""
    varying, _ = split_params(records)
    cases = _cases(records)
    value_of = {(params_id(r.params), r.backend): v for r, v in zip(records, values)}
    width = 0.8 / max(len(backends), 1)
    where = {}
    for i, backend in enumerate(backends):
        xs = [c + (i - (len(backends) - 1) / 2) * width for c in range(len(cases))]
        ys = [value_of.get((case, backend), float("nan")) for case in cases]
        ax.bar(xs, ys, width * 0.95, label=backend, color=colors[backend])
        where.update({(case, backend): x for case, x in zip(cases, xs)})
    ax.set_xticks(range(len(cases)))
    by_pid = {params_id(r.params): r.params for r in records}
    ax.set_xticklabels([", ".join(f"{k}={by_pid[c].get(k)}" for k in varying) for c in cases])
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.set_axisbelow(True)
    return {id(r): where[(params_id(r.params), r.backend)] for r in records}


def _by_cost(records: list[Record]) -> list[str]:
    """Backends, cheapest first (the order of every chart's bars and legend)."""
    return sorted(
        {r.backend for r in records},
        key=lambda b: min(tables.round_median(r) / r.ops for r in records if r.backend == b),
    )


def _width(records: list[Record]) -> float:
    return max(
        6.4, 1.3 * len(_cases(records)) * max(len({r.backend for r in records}), 2) * 0.45 + 2
    )


def bar_chart(path: str, workload: str, records: list[Record], colors: dict) -> str:
    plt = _pyplot()
    _, fixed = split_params(records)
    backends = _by_cost(records)
    values, label, higher = figure_of(records)
    fig, ax = plt.subplots(figsize=(_width(records), 4.8))
    _bars(ax, records, values, backends, colors)
    ax.set_ylabel(label)
    _log_if_wide(ax, values)
    title = f"{workload}: {'throughput' if higher else 'cost per ' + records[0].unit} by concurrency model"
    return _saved(plt, fig, ax, title, fixed, len(backends), path)


#: The kernel figures charted, one panel each: what each model asks of the kernel per op.
KERNEL_PANELS = (
    ("syscalls_per_op", "syscalls", 1.0),
    ("csw_per_op", "context switches", 1.0),
    ("sys_s_per_op", "system CPU, us", 1e6),
)


def _kernel_value(rec: Record, key: str) -> float:
    value = rec.extra.get(key)
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else math.nan
    )


def kernel_chart(path: str, workload: str, records: list[Record], colors: dict) -> str:
    """Syscalls, context switches and system CPU per op, a panel each, models side by side.

    A figure a record did not measure reads "not measured" where its bar would be, never 0.
    """
    plt = _pyplot()
    _, fixed = split_params(records)
    backends = _by_cost(records)
    fig, axes = plt.subplots(
        len(KERNEL_PANELS), 1, figsize=(_width(records), 3.0 * len(KERNEL_PANELS)), sharex=True
    )
    for ax, (key, what, scale) in zip(axes, KERNEL_PANELS):
        values = [_kernel_value(r, key) * scale for r in records]
        at = _bars(ax, records, values, backends, colors)
        for r, v in zip(records, values):  # no bar can show these two: say which it is
            if not v > 0:
                ax.annotate(
                    "0" if v == 0 else "not\nmeasured",
                    (at[id(r)], 0),
                    xycoords=("data", "axes fraction"),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize="x-small",
                )
        ax.set_ylabel(f"{what} per {records[0].unit}")
        _log_if_wide(ax, values)
    title = (
        f"{workload}: what each model asks of the kernel per {records[0].unit} (lower is better)"
    )
    return _saved(plt, fig, axes[0], title, fixed, len(backends), path)


def scaling_chart(
    path: str, workload: str, size: str, rest: dict, records: list[Record], colors: dict
) -> str:
    plt = _pyplot()
    values, label, higher = figure_of(records)
    fig, ax = plt.subplots(figsize=(8.4, 4.8))
    lines: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r, v in zip(records, values):
        lines[r.backend].append((float(r.params[size]), v))
    order = sorted(lines, key=lambda b: min(v for _, v in lines[b]) * (-1 if higher else 1))
    for backend in order:
        pts = sorted(lines[backend])
        ax.plot(
            [x for x, _ in pts],
            [y for _, y in pts],
            marker="o",
            label=backend,
            color=colors[backend],
        )
    ax.set_xscale("log")
    sizes = sorted({float(r.params[size]) for r in records})
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{x:g}" for x in sizes])
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())  # ticks at the measured sizes only
    _log_if_wide(ax, values)
    ax.set_xlabel(f"{size} (log scale)")
    ax.set_ylabel(label)
    ax.grid(which="both", alpha=0.3)
    title = (
        f"{workload}: {'throughput' if higher else 'cost per ' + records[0].unit} as {size} grows"
    )
    return _saved(plt, fig, ax, title, dict(sorted(rest.items())), len(order), path)


def write(directory, records: Iterable[Record]) -> list[str]:
    """Write the charts as PNG files into ``directory``; return their paths."""
    _pyplot()  # fail with the install hint before creating anything
    records = [r for r in records if math.isfinite(tables.round_median(r))]
    directory = os.fspath(directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise PlotError(
            f"cannot create the chart directory {directory!r}: {exc.strerror or exc}; "
            "choose a writable path"
        ) from exc
    colors = _colors(records)
    by_workload: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_workload[r.workload].append(r)
    paths = []
    for workload, recs in by_workload.items():
        base = os.path.join(directory, _slug(workload))
        paths.append(
            atomic.replace_with(
                f"{base}-models.png",
                functools.partial(bar_chart, workload=workload, records=recs, colors=colors),
            )
        )
        if any(math.isfinite(_kernel_value(r, "syscalls_per_op")) for r in recs):
            paths.append(
                atomic.replace_with(
                    f"{base}-kernel.png",
                    functools.partial(kernel_chart, workload=workload, records=recs, colors=colors),
                )
            )
        found = sweeps(recs)
        for size, rest, group in found:
            suffix = f"-{_slug(params_id(rest))}" if rest and len(found) > 1 else ""
            target = f"{base}-scaling-{_slug(size)}{suffix}.png"
            paths.append(
                atomic.replace_with(
                    target,
                    functools.partial(
                        scaling_chart,
                        workload=workload,
                        size=size,
                        rest=rest,
                        records=group,
                        colors=colors,
                    ),
                )
            )
    return paths
