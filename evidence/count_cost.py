#!/usr/bin/env python3
"""What a counted session costs beside the anchor's: pytest-codspeed's simulation mode (issue 64).

On a real suite from its sdist (``real_suites.prepare``: its own config, addopts and conftests;
the library from its wheel; this checkout's plugin installed editable in the suite's venv), in
pairs taking turns, each session a process of its own:

  anchor   ``CODSPEED_ENV=1 valgrind --tool=callgrind --instr-atstart=no python -m pytest SEL
           --codspeed --codspeed-mode=simulation``: one process, instrumentation switched on around
           one call a benchmark
  save     ``python -m pytest SEL --concurrency-measure=instructions --concurrency-save-baseline=B``
  judge    ``... --concurrency-measure=instructions --concurrency-baseline=B`` (B: this pair's save)
  against  ``... --concurrency-measure=instructions --concurrency-against=DIST==PREVIOUS``
  timed    ``python -m pytest SEL -p no:concurrency`` (plain pytest-benchmark, for scale)

Each session runs with ``--numprocesses=0`` (the anchor's valgrind does not trace xdist's workers;
the plugin sets them aside in a counted session anyway) and ``-p no:cacheprovider``. Its cost is
the CPU seconds (user + system) of its whole process tree, from ``os.wait4`` (a process's waited-for
descendants are in its own figure), and its wall seconds; ``/proc/loadavg`` before and after.
Each session is a line of ``count_cost/results.jsonl`` (``--out``); the medians over pairs and the
ratios to the anchor are printed at the end.

    python3 evidence/count_cost.py --smoke                   # yarl, one pair: anchor and save
    python3 evidence/count_cost.py --suites yarl --pairs 3   # the issue's main figure
    python3 evidence/count_cost.py --suites propcache --pairs 3 --kinds anchor,save,judge
    python3 evidence/count_cost.py --table evidence/count_cost/results.jsonl
    python3 evidence/count_cost.py --doc-table evidence/count_cost/results.jsonl   # the docs' table

Each row names the ``design`` measured (``--design``: what the plugin at that commit does; "-" for
the anchor and the timed session) and the plugin commits whose anchors it is judged beside
(``beside``: a commit, its own by default, or a list of commits whose anchors are pooled).
``--doc-table`` writes the table of every design, with its ratios to the anchors beside it, into
docs/gates/instructions.md between its ``cost-table`` markers.

It needs PyPI (the sdist, the suite's venv) and valgrind.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# beside this script (python puts its folder first on the import path)
import real_suites
from existing_suites import loadavg

OUT = real_suites.REPO / "evidence" / "count_cost" / "results.jsonl"
#: the issue's 11 yarl benchmarks; propcache's whole benchmark file (pytest-codspeed style);
#: multidict's insert (its pure-Python calls count 546-571 M instructions each); zeroconf's
#: address and send benchmarks (``benchmark.pedantic`` with a setup)
SELECTIONS = {
    "yarl": [
        "tests/test_url_benchmarks.py",
        "-k",
        "test_url_build_with_host or test_url_make_with_host or test_url_join or "
        "test_url_with_query or test_url_path",
    ],
    "propcache": ["tests/test_benchmarks.py"],
    "multidict": ["tests/test_multidict_benchmarks.py", "-k", "test_multidict_insert_str"],
    "zeroconf": real_suites.SUITES["zeroconf"].count_select,
}
KINDS = ("anchor", "save", "judge", "timed")
SMOKE = {"suites": "yarl", "pairs": 1, "kinds": "anchor,save"}
COMMON = ["--numprocesses=0", "-p", "no:cacheprovider", "-q"]
DOC = real_suites.REPO / "docs" / "gates" / "instructions.md"
MARKERS = ("<!-- cost-table -->\n", "<!-- /cost-table -->\n")
SESSIONS = {
    "anchor": "pytest-codspeed simulation",
    "timed": "plain pytest-benchmark",
    "save": "counted save",
    "judge": "counted judgement",
    "against": "counted against the base",
}
COUNT = ["--concurrency-measure=instructions"]


def prepared(dist: str, work: Path, plugin: Path = real_suites.REPO) -> tuple[Path, Path]:
    """The suite's venv and run directory, with the plugin at ``plugin`` (this checkout by default)
    installed editable."""
    suite = real_suites.SUITES[dist]
    with open(work / f"setup-{dist}.log", "a") as log:
        py, run = real_suites.prepare(suite, work, log)
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        real_suites.sh([uv, "pip", "install", "-q", "--python", py, "--no-deps", "-e", plugin], log)
    return py, run


def commit(checkout: Path = real_suites.REPO) -> str:
    """The commit of the plugin measured, "+" when its tree has changes."""
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(checkout), "diff", "--quiet", "HEAD", "--", "pytest_concurrency"]
    ).returncode
    return head + "+" * bool(dirty)


def command(kind: str, py: Path, dist: str, base: Path) -> tuple[list, dict]:
    sel = [*SELECTIONS[dist], *COMMON]
    pytest = [str(py), "-m", "pytest", *sel]
    if kind == "anchor":
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "-q"]
        return [*valgrind, *pytest, "--codspeed", "--codspeed-mode=simulation"], {
            "CODSPEED_ENV": "1"
        }
    if kind == "save":
        return [*pytest, *COUNT, f"--concurrency-save-baseline={base}"], {}
    if kind == "judge":
        return [*pytest, *COUNT, f"--concurrency-baseline={base}"], {}
    if kind == "against":
        previous = real_suites.SUITES[dist].previous
        return [*pytest, *COUNT, f"--concurrency-against={dist}=={previous}"], {}
    assert kind == "timed", kind
    return [*pytest, "-p", "no:concurrency"], {}


def measured(cmd: list, env: dict, cwd: Path, log: Path) -> dict:
    """Run ``cmd``; its exit, the CPU seconds of its process tree, its wall seconds."""
    before = loadavg()
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    text = log.read_text(errors="replace")
    summary = next((x for x in reversed(text.splitlines()) if " passed" in x), "")
    gate = [x for x in text.splitlines() if x.startswith("pytest-concurrency:")]
    return {
        "exit": proc.returncode,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "wall_s": round(wall, 1),
        "load_before": before,
        "load_after": loadavg(),
        "pytest_summary": summary.strip("= "),
        "gate_lines": gate[-6:],
    }


def run(args) -> list[dict]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    plugin = commit(Path(args.plugin))
    kinds = args.kinds.split(",")
    rows = []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as out:
        for dist in args.suites.split(","):
            py, rundir = prepared(dist, work, Path(args.plugin))
            for pair in range(args.pairs):
                base = work / f"{dist}-count-{pair}.json"
                base.unlink(missing_ok=True)
                # turns: the anchor first in even pairs, last in odd ones (a save before its judge)
                order = kinds if pair % 2 == 0 else [*kinds[1:], kinds[0]]
                for kind in order:
                    cmd, env = command(kind, py, dist, base)
                    name = f"{dist}-{pair}-{kind}"
                    row = {
                        "when": datetime.datetime.now(datetime.timezone.utc).strftime(
                            "%Y-%m-%d %H:%M:%S"
                        ),
                        "suite": dist,
                        "pair": pair,
                        "kind": kind,
                        "plugin": plugin,
                        "design": "-" if kind in ("anchor", "timed") else args.design,
                        **measured(cmd, env, rundir, logs / f"{name}.log"),
                        "command": " ".join(
                            [*(f"{k}={v}" for k, v in env.items()), *map(str, cmd)]
                        ).replace(str(py), "python"),
                    }
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    rows.append(row)
                    print(
                        f"{name}: exit {row['exit']}, {row['cpu_s']} s CPU, {row['wall_s']} s wall "
                        f"(load {row['load_before']}) {row['pytest_summary']}",
                        flush=True,
                    )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| suite | kind | pairs | CPU s (median, range) | wall s | CPU / anchor | wall / anchor |"
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for dist in dict.fromkeys(r["suite"] for r in rows):
        mine = [r for r in rows if r["suite"] == dist]
        anchor = [r for r in mine if r["kind"] == "anchor"]
        a_cpu = statistics.median(r["cpu_s"] for r in anchor) if anchor else None
        a_wall = statistics.median(r["wall_s"] for r in anchor) if anchor else None
        for kind in dict.fromkeys(r["kind"] for r in mine):
            these = [r for r in mine if r["kind"] == kind]
            cpu = [r["cpu_s"] for r in these]
            wall = [r["wall_s"] for r in these]
            c, w = statistics.median(cpu), statistics.median(wall)
            lines.append(
                f"| {dist} | {kind} | {len(these)} | {c:.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
                f"{w:.0f} ({min(wall):.0f}-{max(wall):.0f}) | "
                f"{f'{c / a_cpu:.2f}x' if a_cpu else '-'} | {f'{w / a_wall:.2f}x' if a_wall else '-'} |"
            )
    return "\n".join(lines)


def doc_table(rows: list[dict]) -> str:
    """The docs' table: for each set of anchors (``beside``) and suite, the anchors, then each
    kind and design beside them, in the order measured; the ratios are medians over sessions of
    one kind and design to the median over the anchors beside them."""
    lines = [
        "| suite | session | design | n | CPU s (each) | wall s (each) | CPU / anchor | wall / anchor |",
        "|---|---|---|---:|---|---|---:|---:|",
    ]

    def beside(row: dict) -> tuple[str, ...]:
        found = row.get("beside") or row["plugin"]  # a commit, or several pooled
        return tuple(found) if isinstance(found, list) else (found,)

    for batch in dict.fromkeys(map(beside, rows)):
        mine = [r for r in rows if beside(r) == batch]
        for dist in dict.fromkeys(r["suite"] for r in mine):
            anchors = [
                r
                for r in rows
                if r["suite"] == dist and r["kind"] == "anchor" and r["plugin"] in batch
            ]
            if not anchors:
                continue
            a_cpu = statistics.median(r["cpu_s"] for r in anchors)
            a_wall = statistics.median(r["wall_s"] for r in anchors)
            groups: dict[tuple, list[dict]] = {
                ("anchor", f"- (beside {', '.join(batch)})"): anchors
            }
            for r in mine:
                if r["suite"] == dist and r["kind"] != "anchor":
                    groups.setdefault((r["kind"], r.get("design", "-")), []).append(r)
            order = list(SESSIONS)
            for (kind, design), these in sorted(groups.items(), key=lambda g: order.index(g[0][0])):
                cpu = [r["cpu_s"] for r in these]
                wall = [r["wall_s"] for r in these]
                lines.append(
                    f"| {dist} | {SESSIONS[kind]} | {design} | {len(these)} | "
                    f"{', '.join(f'{x:.0f}' for x in cpu)} | {', '.join(f'{x:.0f}' for x in wall)} | "
                    f"{statistics.median(cpu) / a_cpu:.2f}x | {statistics.median(wall) / a_wall:.2f}x |"
                )
    return "\n".join(lines) + "\n"


def write_doc_table(rows: list[dict], doc: Path = DOC) -> None:
    """``doc_table`` between the markers of ``doc``, written whole to a file beside it, then moved."""
    text = doc.read_text()
    start, end = (text.index(m) for m in MARKERS)
    new = text[: start + len(MARKERS[0])] + doc_table(rows) + text[end:]
    part = doc.with_suffix(".md.part")
    part.write_text(new)
    os.replace(part, doc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="yarl")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument(
        "--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "count_cost")
    )
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument(
        "--plugin",
        default=str(real_suites.REPO),
        help="the checkout whose plugin is measured (default: this one; a worktree of a commit "
        "keeps a long run on one version while this one changes)",
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    parser.add_argument("--table", metavar="JSONL", help="print the table of a results file")
    parser.add_argument(
        "--doc-table",
        metavar="JSONL",
        help="write the docs' table of a results file into docs/gates/instructions.md",
    )
    parser.add_argument(
        "--design", default="?", help="what the plugin measured does (its rows' `design`)"
    )
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    if args.table or args.doc_table:
        path = Path(args.table or args.doc_table)
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        if args.doc_table:
            write_doc_table(rows)
        print(doc_table(rows) if args.doc_table else table(rows))
        return 0
    rows = run(args)
    print(table(rows))
    broken = [r for r in rows if r["exit"] not in (0, 1) or "passed" not in r["pytest_summary"]]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
