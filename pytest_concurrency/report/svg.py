"""Charts as inline SVG, written here: nothing to load when the page is viewed, and one element a
point or a line, so that a long history stays fast to draw (a sparkline is one polyline)."""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

#: One colour a model of a chart, in turn (readable on white, apart for common colour blindness).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
WIDTH, HEIGHT = 920, 320
LEFT, RIGHT, TOP, BOTTOM = 80, 16, 16, 40


def _n(x: float) -> str:
    return f"{x:.1f}"


def sparkline(values: Sequence[float | None], width: int = 100, height: int = 20) -> str:
    """The ``points`` of a polyline through ``values`` in a ``width`` x ``height`` box."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    span = (hi - lo) or 1.0
    step = width / max(len(finite) - 1, 1)
    return " ".join(
        f"{_n(i * step)},{_n(height - 1 - (v - lo) / span * (height - 2))}"
        for i, v in enumerate(finite)
    )


@dataclass
class Line:
    """One model's series on a chart: x is each point's place among the chart's runs."""

    label: str
    points: list  # trend.Point
    tip: Callable  # Point -> the text of its tooltip
    link: Callable  # Point -> the URL of a marked point's commit, or None


def chart(lines: list[Line], runs: list[int], fmt: Callable[[float], str], title: str) -> str:
    """A trend chart: each line's median through its points, its interval as a band, a marker
    (linked to its commit) on each failing verdict; ``runs``: every run on the chart, in order."""
    values = [
        v
        for line in lines
        for p in line.points
        for v in (p.median, p.low, p.high)
        if v is not None and math.isfinite(v)
    ]
    if not values:
        return ""
    scale = _Scale.of(sorted(set(runs)), min(values), max(values))
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}">',
        *_axes(scale, fmt),
    ]
    for n, line in enumerate(lines):
        out += _series(line, PALETTE[n % len(PALETTE)], scale)
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class _Scale:
    """Where a run and a value land in the plot: runs evenly apart, values padded by 5%."""

    xs: dict  # run -> its place among the chart's runs
    lo: float
    hi: float

    @classmethod
    def of(cls, runs: list[int], lo: float, hi: float) -> "_Scale":
        pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
        low = max(lo - pad, 0.0) if lo >= 0 else lo - pad
        return cls({run: i for i, run in enumerate(runs)}, low, hi + pad)

    def x(self, run: int) -> float:
        last = max(len(self.xs) - 1, 1)
        return LEFT + self.xs[run] / last * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return TOP + (self.hi - v) / (self.hi - self.lo) * (HEIGHT - TOP - BOTTOM)


def _axes(scale: _Scale, fmt: Callable[[float], str]) -> list[str]:
    """The y axis (five values, each a grid line) and the x axis's two ends."""
    out = []
    for k in range(5):
        v = scale.lo + (scale.hi - scale.lo) * k / 4
        y = scale.y(v)
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_n(y)}" y2="{_n(y)}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{_n(y + 4)}" text-anchor="end">'
            f"{escape(fmt(v))}</text>"
        )
    out.append(
        f'<text class="tick" x="{LEFT}" y="{HEIGHT - 12}">oldest</text>'
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{HEIGHT - 12}" text-anchor="end">'
        f"latest ({len(scale.xs)} runs)</text>"
    )
    return out


def _series(line: Line, colour: str, scale: _Scale) -> list[str]:
    """One model's group: its band, its median's polyline, its points and its regressions."""
    x, y = scale.x, scale.y
    pts = [p for p in line.points if p.median is not None and math.isfinite(p.median)]
    band = [p for p in pts if p.low is not None and p.high is not None]
    out = [f'<g class="series" data-model="{escape(line.label)}" style="color:{colour}">']
    if len(band) > 1:
        upper = " ".join(f"{_n(x(p.run))},{_n(y(p.high))}" for p in band)
        lower = " ".join(f"{_n(x(p.run))},{_n(y(p.low))}" for p in reversed(band))
        out.append(f'<polygon class="band" points="{upper} {lower}"/>')
    out.append(
        '<polyline class="median" points="'
        + " ".join(f"{_n(x(p.run))},{_n(y(p.median))}" for p in pts)
        + '"/>'
    )
    for p in pts:
        out.append(
            f'<circle class="point" cx="{x(p.run):.1f}" cy="{y(p.median):.1f}" r="2.5">'
            f"<title>{escape(line.tip(p))}</title></circle>"
        )
    out += [_regression(line, p, x(p.run), y(p.median)) for p in pts if p.verdict is not None]
    out.append("</g>")
    return out


def _regression(line: Line, p, cx: float, cy: float) -> str:
    """A failing verdict's marker, linked to its commit when the line knows where."""
    mark = (
        f'<path class="regression" d="M{_n(cx)},{_n(cy - 14)} l-6,-10 h12 z">'
        f"<title>{escape(p.verdict.get('words') or p.verdict['status'])}</title></path>"
    )
    href = line.link(p)
    return f'<a class="regression-link" href="{escape(href)}">{mark}</a>' if href else mark
