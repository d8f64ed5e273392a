"""``python -m pytest_concurrency COMMAND``: tools that work on saved results, or run pytest.

``report A.json [B.json]``: re-render saved runs, or compare two. Reads pytest-benchmark JSON
files written by a pytest-concurrency run (``--benchmark-json``, ``--benchmark-save`` or
``--concurrency-save-baseline``) without running anything. Exit status: 0 rendered, 1 the
comparison found a regression (or was refused) or a file's benchmarks leak memory (judged
without a baseline too), 2 usage error or unreadable input.

``merge OUT.json SHARD.json...`` and ``merge --verdicts SHARD.json...``: a sharded run's files
joined (gate/merge.py). ``bisect``: the first commit or release where a benchmark crossed the
threshold (bisection.py).
"""

import argparse
import os
import re
import shutil
import sys

from . import outputs
from .backends.base import ConcurrencyError
from .exit_codes import Exit, gates_failed
from .gate import merge as merge_gate
from .gate import verdicts as V
from .gate.compare import DEFAULT_MACHINE_TOLERANCE
from .measure.records import Document, Record
from .report import tables
from .report.plot import PlotError
from .store.history import Baseline


class InputError(Exception):
    """An input file cannot be used; the message names the file and the problem."""


def outputs_checked(written: list, read: list[str], noun: str) -> None:
    """``InputError`` when an output of the command names one of the files it reads (``noun``)
    or another output, or an existing file not of its kind: the session's rule (outputs.py)."""
    try:
        outputs.check(
            [outputs.Named(noun, path, noun=noun) for path in read]
            + [outputs.Named(option, path, kind) for option, path, kind in written]
        )
    except outputs.OutputError as exc:
        raise InputError(str(exc)) from None


def load_records(path: str) -> tuple[dict, list[Record], Baseline | None]:
    """The file's document, records and baseline (None: no ``pytest_concurrency`` section), read
    and checked as a session reads a baseline (the same reading and the same shape of
    ``benchmarks``), whatever wrote it."""
    from .store import baseline, shape

    fix = "pass a file written by --benchmark-json, --benchmark-save or --concurrency-save-baseline"
    try:
        doc = baseline.read(path, "file", fix)
    except baseline.BaselineError as exc:
        raise InputError(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise InputError(f"{path}: not pytest-benchmark JSON (no 'benchmarks' list); {fix}")
    base = None
    if baseline.SECTION in doc:  # a baseline: what the gate would refuse is refused here too
        try:
            base = baseline.parse(doc, path)
        except baseline.BaselineError as exc:
            raise InputError(str(exc)) from None
    wrong = shape.benchmarks(doc)
    if wrong:
        raise InputError(f"{path}: {wrong}; {fix}")
    recs = list((base or Document.of(doc)).records)
    if not recs:
        raise InputError(
            f"{path}: holds {len(doc['benchmarks'])} benchmarks but none from pytest-concurrency "
            "(their extra_info lacks 'backend' and 'workload'); was it written by a "
            "pytest-concurrency run?"
        )
    return doc, recs, base


def changes_only(baseline: list[Record], current: list[Record], why: str) -> V.GateResult:
    """Median change per matched benchmark, with no verdict: used when the gate cannot judge."""
    base = {r.key: r for r in baseline}
    now = {r.key: r for r in current}
    out = []
    for key, rec in now.items():
        if key in base:
            b, c = tables.round_median(base[key]), tables.round_median(rec)
            out.append(V.Verdict(key, tables.COMPARED, b, c, change=c / b - 1 if b else None))
        else:
            out.append(V.Verdict(key, V.NEW, current_median=tables.round_median(rec)))
    for key, rec in base.items():
        if key not in now:
            out.append(V.Verdict(key, V.MISSING, baseline_median=tables.round_median(rec)))
    return V.GateResult(out, summary=f"changes only, no verdicts: {why}")


def compare(a_path: str, a: tuple, b: tuple, args) -> V.GateResult:
    """The gate's verdicts when it can judge these files (each as ``load_records`` read it), else
    the changes with the reason."""
    from .gate import compare as gate
    from .store import baseline

    (a_doc, a_recs, base), (_, b_recs, b_base) = a, b
    try:  # a file without our section was not parsed: check says what it is
        base = base or baseline.parse(a_doc, a_path)
    except baseline.BaselineError as exc:
        return changes_only(
            a_recs, b_recs, f"the first file is not a baseline the gate can use ({exc})"
        )
    if b_base is None:  # (a file with our section was checked whole by load_records)
        return changes_only(
            a_recs,
            b_recs,
            "the second file has no pytest_concurrency section (Python, versions, "
            "calibration); save it with --concurrency-save-baseline to get verdicts",
        )
    settings = gate.GateSettings(
        threshold=args.threshold,
        overrides=dict(args.threshold_for),
        allow_cross_python=args.allow_cross_python,
        machine_tolerance=args.machine_tolerance,
        memory_threshold=args.memory_threshold,
    )
    from .backends import is_native

    return gate.compare(
        base, b_recs, b_base.meta, settings, None if args.gate_native else is_native
    )


def _percent(text: str) -> float:
    from .settings import SettingsError, parse_percent

    try:
        return parse_percent(text, "--threshold")
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(
            str(exc).partition(": ")[2]
        ) from None  # argparse names the option


def _threshold_for(text: str) -> tuple[str, float]:
    """``KEY=PCT``, as a line of the ``concurrency_thresholds`` ini option reads."""
    from .settings import SettingsError, parse_thresholds

    try:
        ((key, value),) = parse_thresholds([text], "--threshold-for").items()
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None
    return key, value


def _width(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of columns") from None
    if value < 40:
        raise argparse.ArgumentTypeError(f"{value} columns is too narrow; use 40 or more")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_concurrency",
        description="pytest-concurrency tools that work on saved results.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    r = sub.add_parser(
        "report",
        help="re-render saved benchmark JSON, or compare two runs",
        description="Render the comparison tables from saved pytest-benchmark JSON files written by "
        "a pytest-concurrency run, without re-running. With two files, B is compared against "
        "baseline A: change per benchmark, and the gate's verdict when A is a baseline "
        "(--concurrency-save-baseline); memory leaks are reported from one file too. Exit status: "
        f"{Exit.OK} rendered, {Exit.TESTS_FAILED} regression or memory leak found, or comparison "
        f"refused, {Exit.TOOL_USAGE} usage error or unreadable file.",
    )
    r.add_argument(
        "files", nargs="+", metavar="FILE.json", help="A.json, or A.json B.json (baseline, current)"
    )
    r.add_argument("--markdown", metavar="PATH", help="also write the tables as markdown to PATH")
    r.add_argument(
        "--plot", metavar="DIR", help="also write charts (PNG) of the last file into DIR"
    )
    r.add_argument(
        "--matrix",
        action="store_true",
        help="print one markdown table instead: a line per case, a column per model (per-op figure)",
    )
    r.add_argument(
        "--threshold",
        type=_percent,
        default=None,
        metavar="PCT",
        help="practical threshold for verdicts, e.g. 10 (default: the gate's)",
    )
    r.add_argument(
        "--threshold-for",
        type=_threshold_for,
        action="append",
        default=[],
        metavar="KEY=PCT",
        help="a threshold for a backend, a workload or workload:backend, e.g. gevent=15 (again "
        "for more): the session's concurrency_thresholds ini lines",
    )
    r.add_argument(
        "--machine-tolerance",
        type=_percent,
        default=DEFAULT_MACHINE_TOLERANCE,
        metavar="PCT",
        help="normalize times by the machine-speed calibration only beyond this difference, as "
        "--concurrency-machine-tolerance (default: "
        f"{DEFAULT_MACHINE_TOLERANCE * 100:.0f})",
    )
    r.add_argument(
        "--memory-threshold",
        type=_percent,
        default=None,
        metavar="PCT",
        help="how far a memory figure may grow over the baseline's, e.g. 10 (default: the gate's)",
    )
    r.add_argument(
        "--allow-cross-python",
        action="store_true",
        help="compare runs from different Python minor versions anyway",
    )
    r.add_argument(
        "--gate-native",
        action="store_true",
        help="gate the native reference rows (Go, Rust, Kotlin) too, as "
        "--concurrency-gate-native does in a session (default: shown, not gated)",
    )
    m = sub.add_parser(
        "merge",
        help="join the shards' baselines (OUT.json SHARD.json...) or verdict files (--verdicts)",
        description="Join the files of a suite run in shards (--concurrency-shard=I/N). "
        "merge OUT.json SHARD.json...: one baseline from the shards' baselines, written to OUT.json. "
        "merge --verdicts SHARD.json...: the shards' verdict files (--concurrency-verdicts) as one "
        "run's summary, markdown report and exit status. Refused, in one line: files of another "
        f"version, Python or architecture (for time, of another machine at all): exit "
        f"{Exit.MERGE_MISMATCH}; the same shard twice, shards of different splits, a shard "
        f"missing: exit {Exit.MERGE_COVERAGE}; an unreadable file: exit {Exit.TOOL_USAGE}.",
    )
    m.add_argument("files", nargs="+", metavar="FILE.json")
    m.add_argument(
        "--verdicts", action="store_true", help="the files are verdict files, not baselines"
    )
    m.add_argument("--markdown", metavar="PATH", help="with --verdicts: write the markdown report")
    m.add_argument(
        "--output", metavar="PATH", help="with --verdicts: also write the merged verdict file"
    )
    for rendering in (r, m):  # both render the tables
        rendering.add_argument(
            "--width", type=_width, default=None, help="terminal width (default: this terminal's)"
        )
        rendering.add_argument("--color", action="store_true", help="colour the verdicts (ANSI)")
    from . import bisection

    bisection.add_parser(sub)
    _history_parser(sub)
    return p


def _history_parser(sub) -> None:
    h = sub.add_parser(
        "history",
        help="draw the runs kept with --concurrency-history as a static site, or import files",
        description="history DIR --html SITE: the runs kept in DIR (--concurrency-history) as a "
        "static site, viewable offline: every benchmark's latest figure, verdict and trend, a page "
        "per case with a chart per measure, the regressions newest first. Runs are put in the order "
        "of the branch's commits when --repo is a git repository (default: the current "
        "directory), else of their dates. history DIR --pr-summary --site-url URL: markdown for a "
        "pull request's summary linking to the site's pages. history import DIR FILE...: "
        "baselines (--concurrency-save-baseline: each kept session a run) and verdict files "
        f"(--concurrency-verdicts, of the commit --commit names) added to DIR. Exit status: "
        f"{Exit.OK} done, {Exit.TOOL_USAGE} usage error or unreadable file.",
    )
    h.add_argument("paths", nargs="+", metavar="DIR", help="DIR, or: import DIR FILE...")
    h.add_argument("--html", metavar="SITE", help="write the site into the folder SITE")
    h.add_argument(
        "--repo",
        metavar="PATH",
        default=".",
        help="the git repository whose branch orders the runs (default: the current directory)",
    )
    h.add_argument(
        "--branch", help="the branch whose commits order the runs (default: the most runs')"
    )
    h.add_argument(
        "--repo-url",
        metavar="URL",
        help="link each commit to URL/commit/SHA, e.g. https://github.com/OWNER/REPO",
    )
    h.add_argument(
        "--pr-summary",
        action="store_true",
        help="print markdown for a pull request's summary (needs --site-url)",
    )
    h.add_argument("--site-url", metavar="URL", help="where the site is published")
    h.add_argument(
        "--commit",
        metavar="SHA",
        help="import: the commit the verdict files measured; --pr-summary: the commit whose "
        "runs to summarise (default: the newest run's)",
    )
    h.add_argument("--output", metavar="PATH", help="--pr-summary: write the markdown to PATH")


def _http_url(text: str | None, option: str) -> str | None:
    if text is not None and not re.match(r"https?://[^\s\"'<>]+$", text):
        raise InputError(f"{option}={text!r}: give an http:// or https:// address")
    return text


def history(args) -> int:
    """``history``: a folder of runs drawn, summarised, or added to."""
    from .report import runlog, site, trend

    try:
        if args.paths[0] == "import":
            if len(args.paths) < 3:
                raise InputError("history import DIR FILE...: give the folder and the files")
            return _import(args.paths[1], args.paths[2:], args.commit, args.branch)
        if len(args.paths) != 1:
            raise InputError("history DIR --html SITE: give one folder (or: history import ...)")
        if not args.html and not args.pr_summary:
            raise InputError("history DIR: say what to make: --html SITE, --pr-summary, or both")
        runs = runlog.read_folder(args.paths[0])
        if args.html:
            repo_url = _http_url(args.repo_url, "--repo-url")
            ordered = trend.order(runs, args.repo, args.branch)
            paths = site.Site(ordered, repo_url).write(args.html)
            print(
                f"{len(paths)} pages of {len(ordered.runs)} runs written to {args.html}, {ordered.how}"
            )
        if args.pr_summary:
            url = _http_url(args.site_url, "--site-url")
            if url is None:
                raise InputError("--pr-summary needs --site-url URL: where the site is published")
            text = site.pr_summary(runs, url, args.commit)
            if args.output:
                from .store import atomic

                atomic.write_text(args.output, text)
                print(f"pull request summary written to {args.output}")
            else:
                print(text, end="")
    except (runlog.RunLogError, site.SiteError) as exc:
        raise InputError(str(exc)) from None
    return Exit.OK


def _import(directory: str, files: list[str], commit: str | None, branch: str | None) -> int:
    from .gate import verdict_file
    from .report import runlog
    from .store import baseline

    docs = []
    for path in files:  # each read whole before any is written: a bad one adds nothing
        try:
            raw = baseline.read(path, "file", "pass baselines or verdict files")
        except baseline.BaselineError as exc:
            raise InputError(str(exc)) from None
        try:
            if isinstance(raw, dict) and raw.get("format") == verdict_file.FORMAT:
                if not commit:
                    raise InputError(
                        f"{path}: a verdict file names no commit; give it with --commit SHA"
                    )
                docs.append(runlog.from_verdict_file(path, runlog.Code(commit, None, branch)))
            else:
                docs.extend(runlog.from_baseline(path))
        except (baseline.BaselineError, verdict_file.VerdictFileError) as exc:
            raise InputError(str(exc)) from None
    for doc in docs:
        if branch and not doc.get("branch"):
            doc["branch"] = branch
        runlog.write(directory, doc)
    print(f"{len(docs)} run(s) from {len(files)} file(s) added to {directory}")
    return Exit.OK


def merge(args) -> int:
    """The shards' files joined; the exit status of the merged run, or of the refusal."""
    from .store import baseline

    try:
        if args.verdicts:
            return merge_verdicts(args)
        if args.markdown or args.output:
            raise InputError(
                "--markdown and --output go with --verdicts; merge OUT.json SHARD.json..."
            )
        if len(args.files) < 2:
            raise InputError(
                "merge OUT.json SHARD.json...: give the output and the shards' baselines"
            )
        out, inputs = args.files[0], args.files[1:]
        if os.path.abspath(out) in {os.path.abspath(p) for p in inputs}:
            raise InputError(
                f"{out} is also a shard's file: name a new file first, merge OUT.json SHARD.json..."
            )
        if os.path.exists(out) and _is_shard_baseline(out):
            raise InputError(
                f"{out} is a shard's baseline, and merge writes its first file: name a new file "
                "first, merge OUT.json SHARD.json..."
            )
        outputs_checked([("merge OUT", out, outputs.BASELINE)], inputs, "a shard's baseline")
        bases = []
        for path in inputs:
            try:
                bases.append((path, baseline.load(path)))
            except baseline.BaselineError as exc:
                raise InputError(str(exc)) from None
        doc = merge_gate.baselines(bases)
        baseline.check(doc, out)
        with baseline.locked(out, lambda: print(f"waiting for another save to {out} to end")):
            baseline.save(out, doc)  # under the lock every write of a baseline holds (atomic.py)
    except merge_gate.MergeError as exc:
        from .report import escape

        print(f"error: {escape.terminal(str(exc))}", file=sys.stderr)
        return exc.code
    print(
        f"baseline with {len(doc['benchmarks'])} benchmarks from {len(inputs)} shards written to {out}"
    )
    return Exit.OK


def _is_shard_baseline(path: str) -> bool:
    from .store import baseline

    try:
        doc = baseline.read(path)
    except baseline.BaselineError:
        return False
    return isinstance(doc, dict) and bool((doc.get(baseline.SECTION) or {}).get("shard"))


def merge_verdicts(args) -> int:
    from .gate import verdict_file
    from .report import terminal

    outputs_checked(
        [
            ("--markdown", args.markdown, outputs.MARKDOWN),
            ("--output", args.output, outputs.VERDICTS),
        ],
        args.files,
        "a shard's verdict file",
    )
    files = []
    for path in args.files:
        try:
            files.append((path, verdict_file.read(path)))
        except verdict_file.VerdictFileError as exc:
            raise InputError(str(exc)) from None
    merged = merge_gate.verdicts(files)
    width = args.width or shutil.get_terminal_size((80, 24)).columns
    print(
        terminal.render(
            merged.records, merged.gate, width=width, color=args.color, memory=merged.memory
        )
    )
    for line in merged.errors:
        print(f"ERROR: {line}")
    if merged.nothing_judged:
        print(f"NOTHING JUDGED (exit {Exit.NOTHING_JUDGED}): {merged.nothing_judged}")
    if args.markdown:
        from .report import markdown

        markdown.write(args.markdown, markdown.render(merged.records, merged.gate, merged.memory))
        print(f"markdown written to {args.markdown}")
    if args.output:
        verdict_file.write(args.output, merged)
        print(f"merged verdicts written to {args.output}")
    print(f"{len(files)} shard file(s) merged: exit status {merged.exit_status}")
    return merged.exit_status


def report(args) -> int:
    if len(args.files) > 2:
        raise InputError(f"report takes one or two files, got {len(args.files)}: A.json [B.json]")
    outputs_checked(
        [("--markdown", args.markdown, outputs.MARKDOWN), ("--plot", args.plot, outputs.DIRECTORY)],
        args.files,
        "a file it reads",
    )
    loaded = [load_records(path) for path in args.files]
    recs = loaded[-1][1]
    from .gate import memory as memory_gate

    gate = None
    if len(loaded) == 2:
        gate = compare(args.files[0], loaded[0], loaded[1], args)
    memory = gate.memory if gate is not None else None
    if memory is None and memory_gate.has_figures(recs):  # leaks need no baseline
        memory = memory_gate.judge(None, recs, args.memory_threshold)
    failed = gates_failed(gate, memory)
    from .report import terminal

    if args.matrix:
        from .report import markdown

        print(markdown.render_matrix(recs), end="")
        return Exit.TESTS_FAILED if failed else Exit.OK
    width = args.width or shutil.get_terminal_size((80, 24)).columns
    print(terminal.render(recs, gate, width=width, color=args.color, memory=memory))
    if args.markdown:
        from .report import markdown

        markdown.write(args.markdown, markdown.render(recs, gate, memory))
        print(f"markdown written to {args.markdown}")
    if args.plot:
        from .report import plot

        paths = plot.write(args.plot, recs)
        print(f"{len(paths)} charts written to {args.plot}")
    return Exit.TESTS_FAILED if failed else Exit.OK


def main(argv=None) -> int:
    args = parser().parse_args(argv)  # exits 2 on usage errors, 0 on --help
    try:
        if args.command == "merge":
            return merge(args)
        if args.command == "history":
            return history(args)
        if args.command == "bisect":
            from . import bisection

            outputs_checked([("--json", args.json, outputs.BISECTION)], [], "")
            return bisection.main(args)
        return report(args)
    except (InputError, PlotError, ConcurrencyError) as exc:  # each names its file and problem
        from .report import escape

        print(f"error: {escape.terminal(str(exc))}", file=sys.stderr)
        return Exit.TOOL_USAGE
    except BrokenPipeError:  # output piped into `head`: not an error of ours
        sys.stdout = open(os.devnull, "w")
        return Exit.OK
    except OSError as exc:  # an output path that cannot be written (UnsafeLink: a whole sentence)
        if not exc.strerror:
            print(f"error: {exc}", file=sys.stderr)
            return Exit.TOOL_USAGE
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.TOOL_USAGE


if __name__ == "__main__":
    sys.exit(main())
