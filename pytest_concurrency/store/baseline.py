"""Baseline files: what a run is compared against.

A baseline is a pytest-benchmark JSON document (``machine_info``, ``commit_info``,
``benchmarks`` with raw samples in ``stats.data``, ``datetime``, ``version``), so every
pytest-benchmark tool reads it, plus a top-level ``pytest_concurrency`` section with what
comparison needs::

    {"schema_version": 1,
     "python": {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"},
     "backends": {"gevent": "25.1.0", ...},      # spec -> version of the library behind it
     "libraries": {"greenlet": "3.1.1", ...},    # installed concurrency libraries
     "code": {"commit": "1a2b3c...", "dirty": false},  # pytest-benchmark's commit hook ({} if none)
     "cpu_count": 2, "cpu_model": "AMD EPYC ...",  # the machine, for normalizing by calibration
     "measure": "time",                          # the instrument ("instructions": and "valgrind")
     "calibration": {...},                       # calibrate.measure(), when timing
     "history": [...]}                           # earlier sessions (see history.py)

Files are written atomically (temp file in the same directory, fsync, ``os.replace``), so
an interrupted or failed save leaves the previous baseline as it was.
"""

import contextlib
import errno
import json
import math
import os
import platform
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from typing import Any

from .. import benchmark_adapter
from ..backends.base import ConcurrencyError
from . import atomic, history, shape

SECTION = history.SECTION
SCHEMA_VERSION = 2  # 2 added ``history``
READABLE_SCHEMAS = (1, 2)
LIBRARIES = (
    "greenlet",
    "gevent",
    "eventlet",
    "uvloop",
    "trio",
    "anyio",
)  # versions recorded when installed

_SAVE_HOW = "pytest --benchmark-only --concurrency-save-baseline={path}"


class BaselineError(ConcurrencyError):
    """A baseline file cannot be read or written; the message names the problem and the fix."""


def python_info() -> dict:
    version = platform.python_version()
    return {
        "version": version,
        "implementation": platform.python_implementation(),
        "minor": ".".join(version.split(".")[:2]),
    }


def library_versions(names: Iterable[str] = LIBRARIES) -> dict:
    """Installed versions, read from package metadata (nothing is imported)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


#: Distributions that are the test harness, not the code under test.
HARNESS = {
    "pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "py-cpuinfo",
    "numpy",
    "scipy",
    "psutil",
    "pip",
    "setuptools",
    "exceptiongroup",
    "tomli",
    "colorama",
    "pygments",
    "pytest-concurrency-bench",
}


def under_test_versions() -> dict:
    """The versions of the installed distributions this process imported, besides the harness
    (pytest, its plugins, this plugin and what it needs): the code the session measured, its
    dependencies included, read from package metadata when the session ends."""
    import sys

    owners = metadata.packages_distributions()
    out = {}
    for name in {m.partition(".")[0] for m in list(sys.modules)}:
        for dist in owners.get(name, ()):
            if dist.lower() in HARNESS or dist.lower().startswith("pytest"):
                continue
            version = _imported_version(dist, sys.modules.get(name))
            if version is not None:
                out[dist] = version
    return dict(sorted(out.items()))


def _imported_version(dist: str, module) -> str | None:
    """The version of the copy of ``dist`` the session imported ``module`` from: a project's
    ``*.egg-info`` in the run's directory is found by name before the installed copy, so with
    several of one name, the one whose path entry holds the module wins."""
    found = list(metadata.distributions(name=dist))
    file = getattr(module, "__file__", None)
    if len(found) > 1 and file:
        where = os.path.realpath(os.path.dirname(file))
        for d in found:
            root = os.path.realpath(str(d.locate_file("")))
            if where == root or os.path.dirname(where) == root:  # a module, or a package's
                return d.version
    return found[0].version if found else None


def code_identity(cwd=None, timeout: float = 5.0) -> dict:
    """The code this run measured: ``{"commit": ..., "dirty": bool}`` of the git repository
    around ``cwd`` (default: the current directory), ``{}`` without git or a repository.
    Untracked files do not count as dirty (a baseline file saved in the tree is one)."""
    import subprocess

    def git(*args) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def current_meta(
    backend_versions: Mapping[str, str],
    calibration: Mapping | None,
    instrument=None,
    code: Mapping | None = None,
) -> dict:
    """This run's ``pytest_concurrency`` section.

    ``backend_versions``: spec -> ``Backend.version`` for the backends that ran;
    ``calibration``: ``calibrate.measure()`` taken in this run (``None`` if skipped);
    ``instrument``: the session's (``measure.instrument``; ``None``: time). ``code``: this run's
    code (with ``libraries``, what tells the baseline's sessions' code apart), as
    pytest-benchmark's commit hook gave it (``benchmark_adapter.code_identity``); ``None``: read
    here (``code_identity``).
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "python": python_info(),
        "backends": dict(backend_versions),
        "libraries": library_versions(),
        "under_test": under_test_versions(),
        "code": code_identity() if code is None else dict(code),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "measure": instrument.kind if instrument else "time",
        **(instrument.session_meta() if instrument else {}),
        "calibration": dict(calibration) if calibration else None,
    }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def save(path, doc: Mapping) -> None:
    """Write ``doc`` to ``path`` atomically; on failure the old file is left untouched."""
    path = os.fspath(path)
    # serialized first (as pytest-benchmark writes its files): a bad document never touches the disk
    text = _one_line_lists(benchmark_adapter.json_text(_finite(_thinned(doc)), indent=2))
    try:
        atomic.write_text(path, text)
    except OSError as exc:
        raise _cannot_write(path, exc) from None


@contextlib.contextmanager
def locked(path, waiting: Callable[[], object]) -> Iterator[None]:
    """Saves to ``path`` one at a time (``atomic.locked``); ``waiting()`` when this one waits."""
    path = os.fspath(path)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(atomic.locked(path, waiting))
        except OSError as exc:
            raise _cannot_write(path, exc, atomic.LOCK_SUFFIX) from None
        yield


def _cannot_write(path: str, exc: OSError, suffix: str = "") -> BaselineError:
    """Why the baseline (or, ``suffix``, its lock file) could not be written, and the fix."""
    if isinstance(exc, atomic.UnsafeLink):
        return BaselineError(
            f"--concurrency-save-baseline: {exc}; any previous baseline there is unchanged"
        )
    return BaselineError(
        f"cannot write the baseline {path + suffix!r}: {atomic.why_not_written(exc, path)} "
        "(--concurrency-save-baseline=PATH); any previous baseline there is unchanged"
    )


#: Rounds kept per benchmark and session. pytest-benchmark runs a small function for up to a
#: second, 100,000-200,000 rounds: yarl's 91 URL benchmarks wrote 27 MB of samples a session,
#: and a third session no longer fitted ``MAX_BYTES``. Every k-th round is kept, in order; the
#: median of 1,000 rounds is within about 0.04 of their spread of the median of all of them, a
#: small part of any threshold (the session's own rounds are judged whole).
KEPT_ROUNDS = 1000


def _thinned(doc: Mapping) -> dict:
    """``doc`` with at most ``KEPT_ROUNDS`` samples per benchmark, in each session it holds (its
    statistics, computed on every round, are pytest-benchmark's and stay as they are)."""
    out = dict(doc)
    out["benchmarks"] = [
        {
            **b,
            "stats": {**b["stats"], "data": every_kth(b["stats"]["data"], KEPT_ROUNDS)},
            **_thinned_controls(b.get("extra_info"), "extra_info"),
        }
        if isinstance(b.get("stats"), Mapping) and isinstance(b["stats"].get("data"), list)
        else b
        for b in doc.get("benchmarks") or ()
    ]
    meta = doc.get(SECTION)
    if isinstance(meta, Mapping) and meta.get("history"):
        out[SECTION] = {
            **meta,
            "history": [
                {
                    **entry,
                    "benchmarks": [
                        {
                            **b,
                            "samples": every_kth(b.get("samples") or [], KEPT_ROUNDS),
                            **_thinned_controls(b, None),
                        }
                        for b in entry.get("benchmarks") or ()
                    ],
                }
                for entry in meta["history"]
            ],
        }
    return out


def _thinned_controls(holder, key: str | None) -> dict:
    """A benchmark's controls (one a round, measure/control.py) thinned as its rounds are: the
    keys to update it with (``key``: the part that holds them), or nothing."""
    if not isinstance(holder, Mapping):
        return {}
    thinned = {
        k: every_kth(holder[k], KEPT_ROUNDS)
        for k in ("control_factor",)
        if isinstance(holder.get(k), list)
    }
    if not thinned:
        return {}
    return {key: {**holder, **thinned}} if key else thinned


def every_kth(samples: list, most: int) -> list:
    """At most ``most`` of ``samples``, evenly spaced, in their order."""
    n = len(samples)
    return list(samples) if n <= most else [samples[i * n // most] for i in range(most)]


#: A list of numbers as indent=2 writes it: one number a line (40 bytes a sample, most of them
#: spaces). The rest of the file stays a line per item, for a readable diff. (Line breaks: never
#: inside a JSON string, so no string is touched.)
_NUMBER = r"-?[0-9][0-9.eE+-]*"
_NUMBER_LIST = re.compile(rf"\[\n *({_NUMBER}(?:,\n *{_NUMBER})*)\n *\]")


def _one_line_lists(text: str) -> str:
    return _NUMBER_LIST.sub(lambda m: "[" + re.sub(r",\n *", ", ", m.group(1)) + "]", text)


def _finite(value):
    """``value`` with NaN and infinities as null: JSON has no such numbers, and load refuses them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


#: A file larger than this is refused unread: a baseline of a large suite with five sessions is
#: a few MB (``KEPT_ROUNDS``), and parsing is what a hostile file's size costs (about 1 s for
#: 64 MB here).
MAX_BYTES = 64 * 1024 * 1024
#: A file this many times larger than its data (saved with indent=2: about 3x) is refused as
#: padded: it is not what a save writes, and its size would be judged as if it were.
MAX_PADDING = 16
#: Digits of an integer: counts of instructions have 13; more is no measurement, and a very
#: long integer costs seconds to convert (Python refuses 4,300 digits and more).
MAX_DIGITS = 30


def load(path) -> history.Baseline:
    """Read, check and parse a baseline; ``BaselineError`` says what is wrong and how to fix it."""
    path = os.fspath(path)
    return parse(read(path), path)


def parse(doc: Any, path: str) -> history.Baseline:
    """``doc``, checked, as the gate reads it: the one place a document becomes a baseline."""
    check(doc, path)
    return history.Baseline.of(doc)


def read(path, what: str = "baseline", remake: str | None = None) -> Any:
    """The JSON document in the file ``path``, read without ever waiting on it or running out of
    stack: ``BaselineError`` (one line naming the file, the problem and ``remake``, the fix)
    for anything that is not a regular file of JSON a session could have written."""
    path = os.fspath(path)
    if remake is None:
        remake = f"re-create it with `{_SAVE_HOW.format(path=path)}`"
    name = f"{what} {path!r}"
    raw = _read_bytes(path, name, what)
    if not raw.strip():
        raise BaselineError(f"{name} is empty (an interrupted copy?); {remake}")
    try:
        text = raw.decode("utf-8")
        doc = json.loads(text, parse_constant=shape.NoNumber, parse_int=_bounded_int)
    except UnicodeDecodeError:
        raise BaselineError(f"{name} is not JSON (not even UTF-8 text); {remake}") from None
    except RecursionError:
        raise BaselineError(
            f"{name} is nested too deeply to be a baseline (more levels than the JSON "
            f"parser follows); {remake}"
        ) from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise BaselineError(
                f"{name} is truncated (the JSON stops at byte {exc.pos} of an "
                f"unfinished document: an interrupted copy or download?); {remake}"
            ) from None
        raise BaselineError(
            f"{name} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {remake}"
        ) from None
    except ValueError as exc:  # what else the parser refuses
        raise BaselineError(f"{name} is not valid JSON ({exc}); {remake}") from None
    wrong = shape.bounds(doc)  # before anything walks it: nesting, sizes, infinities
    if wrong:
        raise BaselineError(f"{name} is damaged: it {wrong}; {remake}")
    if len(raw) > 1024 * 1024:
        data = len(json.dumps(doc, separators=(",", ":")))
        if len(raw) > MAX_PADDING * data:
            raise BaselineError(
                f"{name} is {len(raw) / 2**20:.1f} MB, of which {data / 1024:.0f} kB is data: "
                f"padded, which a save never writes; {remake}"
            )
    return doc


def _read_bytes(path: str, name: str, what: str) -> bytes:
    """The file's bytes; a FIFO, a device or a directory is refused before anything is read
    from it (opened non-blocking: opening a FIFO with no writer would wait for ever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise BaselineError(
                f"{name} is a symbolic link to {os.readlink(path)}, which does not exist; "
                f"pass the {what}'s JSON file"
            ) from None
        create = (
            f", or create it on the code to compare against with `{_SAVE_HOW.format(path=path)}`"
            if what == "baseline"
            else ""
        )
        raise BaselineError(f"{name} does not exist; check the path{create}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BaselineError(
                f"{name} is a loop of symbolic links; pass the {what}'s JSON file"
            ) from None
        raise BaselineError(
            f"cannot read {name}: {exc.strerror or exc}; fix its permissions"
        ) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BaselineError(f"{name} is a directory; pass the {what}'s JSON file")
        if not stat.S_ISREG(st.st_mode):  # /dev/zero, a FIFO: would never end
            raise BaselineError(
                f"{name} is not a regular file (a device, a pipe, or a link to one); "
                f"pass the {what}'s JSON file"
            )
        if st.st_size > MAX_BYTES:
            raise BaselineError(
                f"{name} is {st.st_size / 2**20:.0f} MB, larger than any {what} a session "
                f"writes ({MAX_BYTES // 2**20} MB at most); pass the {what}'s JSON file"
            )
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BaselineError(f"cannot read {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# NaN, Infinity, -Infinity (Python's json reads them, JSON has none) and integers too long to be
# a count are read as shape.NoNumber, which shape.bounds refuses naming where each one is
def _bounded_int(text: str) -> int | shape.NoNumber:
    if len(text.lstrip("-")) > MAX_DIGITS:
        return shape.NoNumber(f"an integer of {len(text.lstrip('-')):,} digits")
    return int(text)


def load_previous(path) -> history.Baseline | None:
    """The baseline a save adds its session to: ``None`` when ``path`` is absent or empty.

    Anything else that is not a readable baseline is refused, never overwritten: it may be
    a file of value given by mistake.
    """
    path = os.fspath(path)
    if not os.path.exists(path) or (os.path.isfile(path) and os.path.getsize(path) == 0):
        return None
    try:
        return load(path)
    except BaselineError as exc:
        reason = str(exc).split("; ")[0]  # what is wrong, without load's advice to save here
        raise BaselineError(
            f"--concurrency-save-baseline: {path!r} exists and is not a baseline this version can add "
            f"a session to ({reason}), so it is left untouched. Save to another path, e.g. "
            f"--concurrency-save-baseline=baseline.json, or move that file away first if you no longer need it"
        ) from None


def check(doc: Any, path: str = "<baseline>") -> None:
    """Raise ``BaselineError`` unless ``doc`` is a baseline this version can compare against."""
    remake = f"re-create it with `{_SAVE_HOW.format(path=path)}`"
    if not isinstance(doc, dict):
        raise BaselineError(
            f"baseline {path!r} holds a JSON {type(doc).__name__}, not a baseline document; {remake}"
        )
    meta = doc.get(SECTION)
    if meta is None:
        if "benchmarks" in doc and "machine_info" in doc:
            raise BaselineError(
                f"{path!r} is a plain pytest-benchmark file (from --benchmark-json or "
                f"--benchmark-save), not a pytest-concurrency baseline: it lacks the Python, "
                f"library versions and calibration the comparison needs; {remake} "
                f"(a baseline is still valid pytest-benchmark JSON)"
            )
        raise BaselineError(
            f"{path!r} is JSON from another tool (no {SECTION!r} section, no benchmarks); "
            f"pass a baseline written by --concurrency-save-baseline, or {remake}"
        )
    version = meta.get("schema_version") if isinstance(meta, dict) else None
    if version not in READABLE_SCHEMAS:
        hint = (
            "it was written by a newer pytest-concurrency-bench: upgrade this one, or "
            if isinstance(version, int) and version > max(READABLE_SCHEMAS)
            else ""
        )
        raise BaselineError(
            f"baseline {path!r} has schema version {version!r}; this pytest-concurrency-bench "
            f"reads versions {', '.join(map(str, READABLE_SCHEMAS))}; {hint}{remake}"
        )
    python = meta.get("python")
    if not isinstance(python, dict) or not {"version", "implementation", "minor"} <= set(python):
        raise BaselineError(
            f"baseline {path!r} lacks the Python version it was recorded with "
            f"({SECTION}.python); {remake}"
        )
    benchmarks = doc.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise BaselineError(
            f"baseline {path!r} contains no benchmarks; {remake} from a run that measured some"
        )
    wrong = shape.document(doc)  # every value the gate reads, the type it reads it as
    if wrong:
        raise BaselineError(f"baseline {path!r} is damaged: {wrong}; {remake}")
    bare = [b.get("name", "?") for b in benchmarks if not ((b.get("stats") or {}).get("data"))]
    if bare:
        shown = ", ".join(bare[:3]) + (f" and {len(bare) - 3} more" if len(bare) > 3 else "")
        raise BaselineError(
            f"baseline {path!r} has benchmarks without raw samples ({shown}): the gate decides "
            f"on the samples, not on summary figures; {remake} (it always stores them)"
        )
