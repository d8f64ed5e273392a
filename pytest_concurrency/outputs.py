"""The files a run writes, checked together before anything runs: one rule for the pytest session
(``settings.from_config``) and the tools (``python -m pytest_concurrency report`` and ``merge``).

No output names a file the run reads (the baseline, a shard's file) or another output of the same
run: each would be written over the other, or over what the run judged against. The one
exception is saving to the baseline the run judges against, which adds the run's session to it.

An output replaces an existing file only of its own kind (an empty file is every kind's: a file
``touch`` made, or the job summary file a CI runner creates):

* a baseline: a baseline this version reads (a save adds its session to it, a merge replaces it);
* a verdict file: a verdict file;
* a markdown report: a file named ``*.md`` or ``*.markdown``, or a report this plugin wrote;
* pytest-benchmark's ``--benchmark-json``: any file but the plugin's own (a baseline, a verdict
  file) and a Python source file; the rest is pytest-benchmark's to write, as without the plugin;
* a directory (charts, ``--concurrency-against-keep``): a directory;
* ``bisect --json``: the JSON of an earlier bisection.

Anything else is refused in one line naming the options, the path and the fix, and left as it is.
"""

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass


class OutputError(ValueError):
    """An output that would replace a file it must not; the message is the one line to show."""


@dataclass(frozen=True)
class Kind:
    noun: str  # what it may replace: "a verdict file"
    writes: str  # what is written: "the verdict file"
    example: str  # a path to suggest instead
    #: why the existing file (or directory) at a path is not of this kind, or None when it is
    why_not: Callable[[str], str | None]


@dataclass(frozen=True)
class Named:
    """A path the run reads or writes, as the user named it."""

    option: str  # "--concurrency-verdicts", "merge OUT"
    path: str | os.PathLike | None  # None: not given
    kind: Kind | None = None  # what it writes; None: a file the run reads
    noun: str = ""  # an input's: "the baseline"

    @property
    def file(self) -> str:
        assert self.path is not None
        return os.fspath(self.path)

    @property
    def shown(self) -> str:
        return f"{self.option}={self.file}" if self.option.startswith("-") else self.option


def _reason(exc: Exception) -> str:
    """What a reader's one line says is wrong, without its advice."""
    return str(exc).split("; ")[0]


def _json(path: str):
    """The file's JSON document (read as a baseline is, bounded); ``ValueError`` with the reason."""
    from .store import baseline

    try:
        return baseline.read(path, "file", "")
    except baseline.BaselineError as exc:
        raise ValueError(_reason(exc)) from None


def _what(doc) -> str:
    """What a JSON document is, in a few words."""
    from .gate import verdict_file
    from .store import baseline

    if isinstance(doc, dict):
        if baseline.SECTION in doc:
            return "a baseline"
        if doc.get("format") == verdict_file.FORMAT:
            return "a verdict file"
        if "benchmarks" in doc:
            return "pytest-benchmark JSON"
    return "JSON of another tool"


def _source(path: str) -> str | None:
    return "a Python source file" if path.endswith((".py", ".pyi", ".pyx")) else None


def _not_a_baseline(path: str) -> str | None:
    from .store import baseline

    try:
        baseline.load(path)
    except baseline.BaselineError as exc:
        return _source(path) or _reason(exc)
    return None


def _not_json_of(path: str, is_it: Callable[[dict], bool]) -> str | None:
    """Why the file is not a JSON document ``is_it`` accepts; None when it is."""
    if _source(path):
        return _source(path)
    try:
        doc = _json(path)
    except ValueError as exc:
        return str(exc)
    return None if isinstance(doc, dict) and is_it(doc) else f"it is {_what(doc)}"


def _not_verdicts(path: str) -> str | None:
    from .gate import verdict_file

    return _not_json_of(path, lambda doc: doc.get("format") == verdict_file.FORMAT)


def _not_markdown(path: str) -> str | None:
    from .report import markdown

    if path.lower().endswith((".md", ".markdown")):
        return None
    with open(path, "rb") as fh:
        head = fh.read(200)
    if any(head.startswith(title.encode()) for title in markdown.TITLES):
        return None  # a report this plugin wrote, under another name
    return _source(path) or "its name does not end in .md and it is no report this plugin wrote"


def _not_for_a_plain_report(path: str) -> str | None:
    if _source(path):
        return _source(path)
    if not path.lower().endswith(".json"):
        return None
    try:
        what = _what(_json(path))
    except ValueError:
        return None  # not the plugin's: pytest-benchmark's to replace, as without the plugin
    return f"it is {what}" if what in ("a baseline", "a verdict file") else None


def _not_a_bisection(path: str) -> str | None:
    return _not_json_of(path, lambda doc: {"points", "steps", "found"} <= doc.keys())


def _not_a_directory(path: str) -> str | None:
    return None if os.path.isdir(path) else "it is a file"


BASELINE = Kind("a baseline", "the baseline", "baseline.json", _not_a_baseline)
VERDICTS = Kind("a verdict file", "the verdict file", "verdicts.json", _not_verdicts)
MARKDOWN = Kind("a markdown report", "the markdown report", "report.md", _not_markdown)
BENCHMARK_JSON = Kind(
    "a file pytest-benchmark's JSON may replace",
    "pytest-benchmark's JSON",
    "benchmark.json",
    _not_for_a_plain_report,
)
DIRECTORY = Kind("a directory", "the directory", "charts", _not_a_directory)
BISECTION = Kind("a bisection's JSON", "the bisection's JSON", "bisect.json", _not_a_bisection)


def check(paths: Iterable[Named]) -> None:
    """``OutputError`` for the first output that names the file of another path of ``paths``, or
    an existing file not of its kind (the rule above)."""
    given = [p for p in paths if p.path is not None and str(p.path).strip()]
    ordered = [p for p in given if p.kind is None] + [p for p in given if p.kind is not None]
    for i, out in enumerate(ordered):
        if out.kind is None:
            continue
        for other in ordered[:i]:  # the inputs, then the outputs before this one
            if _same(out.file, other.file) and not _saved_to_judged(out, other):
                raise OutputError(_collision(out, other))
        wrong = _not_of_kind(out.file, out.kind)
        if wrong:
            raise OutputError(
                f"{out.shown}: {out.file!r} exists and is not {out.kind.noun} "
                f"({wrong}), so it is left untouched; write to another path, e.g. "
                f"{_instead(out)}, or move that file away first if you no longer need it"
            )


def _instead(out: Named) -> str:
    assert out.kind is not None
    return f"{out.option}={out.kind.example}" if out.option.startswith("-") else out.kind.example


def _saved_to_judged(out: Named, other: Named) -> bool:
    """A save to the baseline the run judges against: it adds its session there."""
    return out.kind is BASELINE and other.kind is None and other.option == "--concurrency-baseline"


def _collision(out: Named, other: Named) -> str:
    assert out.kind is not None
    what = (
        f"{out.kind.writes} would be written over {other.noun}"
        if other.kind is None
        else "each would be written over the other"
    )
    return (
        f"{other.shown} and {out.shown} name the same file, {out.file!r}: {what}; "
        f"give each a path of its own, e.g. {_instead(out)}"
    )


def _same(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links, or one path through a bind mount
    except OSError:
        return False


def _not_of_kind(path: str, kind: Kind) -> str | None:
    """Why the file at ``path`` must not be replaced by an output of ``kind``; None when there is
    none, it is empty, or it is of that kind. (A link the save refuses is atomic.link_problem's.)"""
    try:
        st = os.stat(path)
    except OSError:
        return None  # absent, or a link the writable-target check names
    if kind is DIRECTORY:
        return kind.why_not(path)
    if stat.S_ISDIR(st.st_mode):
        return "it is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file (a device or a pipe)"
    if st.st_size == 0:
        return None
    try:
        return kind.why_not(path)
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
