"""The run log drawn as a static site (``python -m pytest_concurrency history DIR --html SITE``)
and a pull request's summary that links to it (``--pr-summary``).

Every page is one HTML file with its CSS, data and charts inside it: nothing is fetched when it
is viewed (offline, from a file or GitHub Pages). The index is a table a small script fills from
a JSON block and filters; each case (a workload with its parameters) has a page with one chart
per measure, a line per model; ``regressions.html`` lists every failing verdict, newest first.
Every text from a run file is escaped where it lands (HTML, JSON inside a script, markdown).
"""

import functools
import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from html import escape

from ..gate import verdicts as V
from ..store import atomic
from . import escape as md_escape
from . import svg, trend

SPARK_POINTS = 60  # a sparkline's points at most (downsampled: trend.downsampled)
MEASURE_TITLES = {"time": "time per op", "instructions": "instructions per op"}

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}.num{text-align:right;font-variant-numeric:tabular-nums}
.regressed,.leak{color:#b00;font-weight:bold}.improved{color:#070}.inconclusive{color:#a60}
.filters{margin:1em 0}.filters label{margin-right:1em}.note{color:#555}
svg.chart{background:#fff;border:1px solid #ddd}.grid{stroke:#eee}.tick{font-size:11px;fill:#555}
.band{fill:currentColor;fill-opacity:.15;stroke:none}.median{fill:none;stroke:currentColor;stroke-width:1.5}
.point{fill:currentColor}.regression{fill:#d00;stroke:#600}
.spark polyline{fill:none;stroke:#1f77b4;stroke-width:1}.key{display:inline-block;width:1em;height:.7em}
"""

INDEX_JS = """
const data = JSON.parse(document.getElementById('data').textContent);
const esc = s => String(s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const body = document.getElementById('rows');
body.innerHTML = data.rows.map(r =>
  `<tr><td><a href="${esc(r.href)}">${esc(r.id)}</a></td><td>${esc(r.measure)}</td>` +
  `<td class="num">${esc(r.latest)}</td><td class="${esc(r.status)}" title="${esc(r.words)}">` +
  `${esc(r.status)} ${esc(r.change)}</td><td class="num">${r.runs}</td>` +
  `<td><svg class="spark" viewBox="0 0 100 20" width="100" height="20"><polyline points="${esc(r.spark)}"/></svg></td></tr>`
).join('');
const rows = Array.from(body.rows);
function fill(id, key) {
  const select = document.getElementById(id);
  [...new Set(data.rows.map(r => r[key]))].sort().forEach(v => select.add(new Option(v, v)));
  select.addEventListener('change', filter);
}
function filter() {
  const model = document.getElementById('model').value, workload = document.getElementById('workload').value;
  const measure = document.getElementById('measure').value, name = document.getElementById('name').value.toLowerCase();
  let shown = 0;
  data.rows.forEach((r, i) => {
    const keep = (!model || r.model === model) && (!workload || r.workload === workload) &&
      (!measure || r.measure === measure) && (!name || (r.id + ' ' + r.name).toLowerCase().includes(name));
    rows[i].hidden = !keep; shown += keep;
  });
  document.getElementById('count').textContent = `${shown} of ${data.rows.length} benchmarks`;
}
fill('model', 'model'); fill('workload', 'workload'); fill('measure', 'measure');
document.getElementById('name').addEventListener('input', filter);
filter();
window.renderedAt = performance.now();
"""


class SiteError(ValueError):
    """The site cannot be made; the message says why and what to do."""


def slug(case: str) -> str:
    """A case's page name: readable, safe on any file system, unique (a hash of the case)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", case).strip("-.")[:60] or "case"
    return f"{readable}-{hashlib.sha1(case.encode()).hexdigest()[:8]}"


def anchor(benchmark_id: str) -> str:
    return "m-" + hashlib.sha1(benchmark_id.encode()).hexdigest()[:10]


def commit_url(repo_url: str | None, commit: str | None) -> str | None:
    if not repo_url or not commit or not re.fullmatch(r"[0-9a-fA-F]{7,64}", commit):
        return None
    return f"{repo_url.rstrip('/')}/commit/{commit}"


def _json_script(value) -> str:
    # "<" escaped: a name holding "</script>" cannot end the block
    text = json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="data">{text}</script>'


def _page(title: str, body: str, up: str = "") -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>'
        f'<nav><a href="{up}index.html">all benchmarks</a> · <a href="{up}regressions.html">'
        f"regressions</a></nav><h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def _change(v: Mapping | None) -> str:
    from .tables import fmt_change

    return fmt_change(v.get("change")) if v and v.get("change") is not None else ""


def _run_label(run: Mapping) -> str:
    commit = (run.get("commit") or "no commit")[:10]
    return f"{commit} {run.get('date', '')} {run.get('branch') or ''}".strip()


class Site:
    """The runs in order, their series, and the pages made from them."""

    def __init__(self, ordered: trend.Ordered, repo_url: str | None = None):
        self.runs = ordered.runs
        self.how = ordered.how
        self.repo_url = repo_url
        self.series = trend.series(self.runs)
        self.labels = [_run_label(r) for r in self.runs]  # each point's tooltip names its run
        self.cases: dict[str, list[trend.Series]] = defaultdict(list)
        for s in self.series.values():
            self.cases[s.case].append(s)

    def link(self, p: trend.Point) -> str | None:
        return commit_url(self.repo_url, self.runs[p.run].get("commit"))

    def tip(self, s: trend.Series, p: trend.Point) -> str:
        interval = (
            f" (interval {trend.amount(p.low, s.measure)} to {trend.amount(p.high, s.measure)})"
            if p.low is not None and p.high is not None
            else ""
        )
        return f"{s.backend or s.id}, {self.labels[p.run]}: {trend.amount(p.median, s.measure)}/{s.unit}{interval}"

    def index_rows(self) -> list[dict]:
        rows = []
        for s in sorted(self.series.values(), key=lambda s: (s.case, s.backend, s.measure)):
            v = trend.latest_verdict(self.runs, s)
            medians = [p.median for p in s.points if p.median is not None]
            rows.append(
                {
                    "id": s.id,
                    "name": s.name,
                    "model": s.backend or "(none)",
                    "workload": s.workload,
                    "measure": s.measure,
                    "latest": f"{trend.amount(s.latest.median, s.measure)}/{s.unit}",
                    "status": v["status"] if v else "",
                    "change": _change(v),
                    "words": (v or {}).get("words", ""),
                    "runs": len(s.points),
                    "spark": svg.sparkline(trend.downsampled(medians, SPARK_POINTS)),
                    "href": f"c/{slug(s.case)}.html#{anchor(s.id)}",
                }
            )
        return rows

    def index(self) -> str:
        rows = self.index_rows()
        body = (
            f'<p class="note">{len(self.runs)} runs, {escape(self.how)}. Each figure is the median '
            "round's per op; the verdict is the gate's in the latest run that measured it.</p>"
            '<div class="filters"><label>model <select id="model"><option value="">all</option>'
            '</select></label><label>workload <select id="workload"><option value="">all</option>'
            '</select></label><label>measure <select id="measure"><option value="">all</option>'
            '</select></label><label>name <input id="name" type="search"></label>'
            '<span id="count"></span></div>'
            "<table><thead><tr><th>benchmark</th><th>measure</th><th>latest</th><th>verdict</th>"
            '<th>runs</th><th>trend</th></tr></thead><tbody id="rows"></tbody></table>'
            f"{_json_script({'rows': rows})}<script>{INDEX_JS}</script>"
        )
        return _page("Benchmarks over time", body)

    def case_page(self, case: str) -> str:
        parts = [f'<p class="note">{len(self.runs)} runs, {escape(self.how)}.</p>']
        group = self.cases[case]
        for measure in sorted({s.measure for s in group}, key=lambda m: (m != "time", m)):
            lines = sorted((s for s in group if s.measure == measure), key=lambda s: s.backend)
            parts.append(f"<h2>{escape(MEASURE_TITLES.get(measure, measure))}</h2>")
            drawn = [
                svg.Line(
                    s.backend or s.id,
                    s.points,
                    functools.partial(self.tip, s),
                    self.link,
                )
                for s in lines
            ]
            runs = [p.run for s in lines for p in s.points]
            parts.append(
                svg.chart(
                    drawn,
                    runs,
                    functools.partial(trend.amount, measure=measure),
                    f"{case}: {MEASURE_TITLES.get(measure, measure)}",
                )
            )
            parts.append(self._latest_table(lines))
        marks = sorted(
            ((p, s) for s in group for p in s.marks), key=lambda ps: ps[0].run, reverse=True
        )
        if marks:
            parts.append("<h2>Regressions</h2>" + self._regression_table(marks, up="../"))
        return _page(case, "".join(parts), up="../")

    def _latest_table(self, lines: list[trend.Series]) -> str:
        out = [
            "<table><tr><th>model</th><th>latest</th><th>interval</th><th>verdict</th>"
            "<th>runs</th><th>kernel per op, memory (latest)</th></tr>"
        ]
        for n, s in enumerate(lines):
            p, v = s.latest, trend.latest_verdict(self.runs, s)
            colour = svg.PALETTE[n % len(svg.PALETTE)]
            b = next(b for b in self.runs[p.run]["benchmarks"] if b["id"] == s.id)
            kernel = ", ".join(
                f"{k} {val:.3g}"
                for k, val in [*(b.get("kernel") or {}).items(), *(b.get("memory") or {}).items()]
            )
            interval = (
                f"{trend.amount(p.low, s.measure)} to {trend.amount(p.high, s.measure)}"
                if p.low is not None and p.high is not None
                else ""
            )
            status = v["status"] if v else ""
            out.append(
                f'<tr id="{anchor(s.id)}"><td><span class="key" style="background:{colour}">'
                f"</span> {escape(s.backend or s.id)}</td>"
                f'<td class="num">{escape(trend.amount(p.median, s.measure))}/{escape(s.unit)}</td>'
                f'<td class="num">{escape(interval)}</td><td class="{escape(status)}" '
                f'title="{escape((v or {}).get("words", ""))}">{escape(status)} {escape(_change(v))}'
                f'</td><td class="num">{len(s.points)}</td><td>{escape(kernel)}</td></tr>'
            )
        out.append("</table>")
        return "".join(out)

    def _regression_table(self, marks, up: str) -> str:
        out = [
            "<table><tr><th>date</th><th>commit</th><th>benchmark</th><th>the gate's words</th></tr>"
        ]
        for p, s in marks:
            run = self.runs[p.run]
            commit = (run.get("commit") or "")[:10]
            href = self.link(p)
            shown = f'<a href="{escape(href)}">{escape(commit)}</a>' if href else escape(commit)
            page = f"{up}c/{slug(s.case)}.html#{anchor(s.id)}"
            out.append(
                f"<tr><td>{escape(run.get('date', ''))}</td><td>{shown}</td>"
                f'<td><a href="{escape(page)}">{escape(s.id)}</a> ({escape(s.measure)})</td>'
                f"<td>{escape(p.verdict.get('words') or p.verdict['status'])}</td></tr>"
            )
        out.append("</table>")
        return "".join(out)

    def regressions(self) -> str:
        marks = sorted(
            ((p, s) for s in self.series.values() for p in s.marks),
            key=lambda ps: ps[0].run,
            reverse=True,
        )
        body = (
            f'<p class="note">{len(marks)} failing verdicts (regressed, leaked), newest first; '
            f"{len(self.runs)} runs, {escape(self.how)}.</p>"
            + (self._regression_table(marks, up="") if marks else "<p>None.</p>")
        )
        return _page("Regressions", body)

    def write(self, directory) -> list[str]:
        """Every page into ``directory`` (each written atomically); their paths."""
        directory = os.fspath(directory)
        pages = {"index.html": self.index(), "regressions.html": self.regressions()}
        for case in self.cases:
            pages[os.path.join("c", f"{slug(case)}.html")] = self.case_page(case)
        return [
            atomic.write_text(os.path.join(directory, name), text) for name, text in pages.items()
        ]


def pr_summary(
    runs: Iterable[dict], site_url: str, commit: str | None = None, most: int = 30
) -> str:
    """Markdown for a pull request's summary: the benchmarks of one commit's runs (``commit``,
    else the newest run's), the ones a verdict flagged first, each linked to its page."""
    chosen = _runs_of_one_commit(list(runs), commit)
    url = site_url.rstrip("/")
    rows = sorted(_summary_rows(chosen), key=lambda r: (r[0], r[1]))
    head = (chosen[0].get("commit") or "")[:10]
    out = [
        f"### Benchmarks of {md_escape.markdown(head) or 'this run'}: [their history]({url}/index.html)",
        "",
        "| benchmark | measure | now (per op) | verdict | history |",
        "|---|---|---|---|---|",
    ]
    out += [_summary_line(url, *row[1:]) for row in rows[:most]]
    if len(rows) > most:
        out.append(f"\n{len(rows) - most} more on [the site]({url}/index.html).")
    return "\n".join(out) + "\n"


def _runs_of_one_commit(runs: list[dict], commit: str | None) -> list[dict]:
    """The runs of ``commit`` (a prefix), else of the newest run's commit (or that run alone)."""
    if commit:
        chosen = [r for r in runs if (r.get("commit") or "").startswith(commit)]
        if not chosen:
            raise SiteError(f"no run of commit {commit} in the folder; name one it holds")
        return chosen
    if not runs:
        raise SiteError("the folder holds no run; add runs with --concurrency-history")
    newest = max(runs, key=lambda r: r["date"])
    if not newest.get("commit"):
        return [newest]
    return [r for r in runs if r.get("commit") == newest.get("commit")]


#: the summary's order: what failed first, then what is unsure, improved, the rest
_RANK = {V.REGRESSED: 0, V.LEAKED: 0, V.INCONCLUSIVE: 1, V.IMPROVED: 2}


def _summary_rows(chosen: list[dict]) -> Iterator[tuple]:
    """(rank, id, run, benchmark, status, change, case) of every benchmark of the runs."""
    for run in chosen:
        verdicts = {v["id"]: v for v in run["verdicts"] if v.get("figure") == run.get("measure")}
        verdicts.update({v["id"]: v for v in run["verdicts"] if v["status"] in trend.MARKED})
        for b in run["benchmarks"]:
            v = verdicts.get(b["id"])
            status = v["status"] if v else ""
            case = trend.case_of(b) if b.get("workload") else b["id"]
            yield (_RANK.get(status, 3), b["id"], run, b, status, _change(v), case)


def _summary_line(
    url: str, bid: str, run: dict, b: dict, status: str, change: str, case: str
) -> str:
    measure = str(run.get("measure") or "time")
    now = f"{trend.amount(b.get('median'), measure)}/{b.get('unit') or 'call'}"
    verdict = md_escape.markdown(f"{status} {change}".strip())
    verdict = f"**{verdict}**" if status in trend.MARKED else verdict
    return (
        f"| {md_escape.markdown(bid)} | {md_escape.markdown(measure)} | {md_escape.markdown(now)} | "
        f"{verdict} | [trend]({url}/c/{slug(case)}.html#{anchor(bid)}) |"
    )
