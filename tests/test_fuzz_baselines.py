"""Hostile baselines, fuzzed: mutations of a real saved baseline (truncated at many offsets, every
JSON path's value swapped for each other JSON type, huge, infinite, negative and boolean numbers,
deep nesting, 50 MB files, a FIFO, a directory, mode 000, a loop of links, another plugin version,
another Python), each run through what a session does with a baseline (load, judge, render,
add a session to it) and through the report command.

The contract, for every one: it ends within 5 s of CPU time and never waits; it is judged, or refused with one line naming
the file and the problem (never another exception, never a traceback); the file is
byte-identical afterwards. The fast tier: about 25 s of CPU in all (two workers: ~15 s), most
of it the type swaps; the slow tier adds every type at every path (~60 s of CPU), the 50 MB
files (~40 s, most of it writing them) and four more real sessions (~3 s each).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _documents import document_from_records

from pytest_concurrency import __main__ as cli
from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.gate import compare as gate
from pytest_concurrency.measure.records import Document
from pytest_concurrency.report import markdown, terminal
from pytest_concurrency.store import baseline, history

# version-independent (what reading a baseline does with hostile files; its few real sessions only read one): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

DATA = Path(__file__).parent / "data"
DEADLINE_S = 5


#: A real saved baseline: two sessions of `pytest benchmarks/test_seeds.py --benchmark-only
#: --concurrency-scale=smoke --concurrency-backends=asyncio,threading -k "ring or spawn"
#: --concurrency-save-baseline=saved_baseline.json` (kernel figures, memory figures,
#: calibration, a history), 33 kB.
GOOD = (DATA / "saved_baseline.json").read_bytes()
GOOD_DOC = json.loads(GOOD)
#: This run: the baseline's Python and machine (so the gate judges rather than refuses), one
#: benchmark 50% slower, one as it was, the others missing (each judged costs a test's time).
META = {k: v for k, v in GOOD_DOC["pytest_concurrency"].items() if k != "history"}
CURRENT = Document.of(GOOD_DOC).records[1:3]
CURRENT[0].samples = [x * 1.5 for x in CURRENT[0].samples]
SETTINGS = gate.GateSettings()


def test_the_fixture_is_a_baseline_of_two_sessions_the_gate_judges():
    doc = baseline.load(DATA / "saved_baseline.json")
    assert doc.count == 2
    result = gate.compare(doc, CURRENT, META, SETTINGS)
    assert not result.refused
    changes = {v.key: round(v.change, 2) for v in result.verdicts if v.change is not None}
    assert changes == {CURRENT[0].key: 0.5, CURRENT[1].key: 0.0}, changes
    assert {"kernel_rounds", "kernel_source", "peak_traced_kib"} <= set(CURRENT[0].extra)


class _Hang(Exception):
    pass


#: A wait (a FIFO's open, a lock) has no business here at all: this wall-clock bound only turns
#: one into a failure instead of a hung suite, on a machine shared with other jobs.
WAIT_S = 30


@contextlib.contextmanager
def _deadline(seconds: float = DEADLINE_S):
    """Fail when the block uses more than ``seconds`` of CPU (what it costs, however busy the
    machine: here the load is often 4 on 2 cores, and wall time several times the CPU time), or
    is still running after ``WAIT_S`` of wall time (a wait: SIGALRM interrupts a blocking open()
    of a FIFO too)."""

    def ring(signum, frame):
        what = "CPU" if signum == signal.SIGPROF else "wall-clock"
        raise _Hang(f"still running after {seconds if what == 'CPU' else WAIT_S} s of {what} time")

    old = {sig: signal.signal(sig, ring) for sig in (signal.SIGALRM, signal.SIGPROF)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, WAIT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _fingerprint(path: Path):
    st = os.lstat(path)
    if stat.S_ISREG(st.st_mode):
        with contextlib.suppress(PermissionError):
            return st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest()
    return st.st_mode, st.st_size, st.st_mtime_ns


def _one_line(message: str, path: Path) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    assert path.name in message, message


def judge_with(path: Path) -> str:
    """What a session does with ``path`` as its baseline (``--concurrency-baseline``): "judged"
    or "refused". Any exception other than a one-line BaselineError fails the test."""
    try:
        doc = baseline.load(path)
    except baseline.BaselineError as exc:
        _one_line(str(exc), path)
        return "refused"
    result = gate.compare(doc, CURRENT, META, SETTINGS)
    terminal.render(CURRENT, result, width=100, every=True)
    markdown.render(CURRENT, result)
    return "judged"


def save_to(path: Path) -> str:
    """What a session saving to ``path`` does with it (``--concurrency-save-baseline``) up to
    the write: "judged" when it adds its session, "refused" (or None: empty, replaced)."""
    try:
        previous = baseline.load_previous(path)
    except baseline.BaselineError as exc:
        _one_line(str(exc), path)
        return "refused"
    if previous is None:
        return "refused"
    if history.incompatible(previous, META) is None:
        new = document_from_records(CURRENT, META)
        saved, _ = gate.add_session(new, previous, CURRENT, SETTINGS)
        json.dumps(saved)
    return "judged"


def report_command(path: Path, capsys) -> int:
    """``python -m pytest_concurrency report FILE``, and FILE compared with the good baseline,
    in-process: exit 0 or 1 with a rendering, or 2 with one line naming the file."""
    good = path.parent / "good.json"
    good.write_bytes(GOOD)
    codes = []
    for args in (["report", str(path)], ["report", str(path), str(good)]):
        with _deadline():
            code = cli.main([*args, "--width", "100"])
        out, err = capsys.readouterr()
        assert code in (0, 1, 2), (code, err)
        if code == 2:
            assert err.startswith("error: ") and err.count("\n") == 1, err
            assert path.name in err, err
        codes.append(code)
    return codes[0]


def check_contract(path: Path, capsys, *, refused: bool | None = None) -> str:
    before = _fingerprint(path)
    with _deadline():
        outcome = judge_with(path)
    with _deadline():
        assert save_to(path) == outcome, "a save reads it otherwise than the gate"
    report_command(path, capsys)  # each command within its own deadline
    assert _fingerprint(path) == before, "the file changed"
    if refused is not None:
        assert (outcome == "refused") == refused, outcome
    return outcome


def _write(tmp_path: Path, content: bytes | str) -> Path:
    path = tmp_path / "base.json"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def test_the_baseline_itself_is_judged(tmp_path, capsys):
    assert check_contract(_write(tmp_path, GOOD), capsys) == "judged"


# -- truncations -------------------------------------------------------------------------------

OFFSETS = sorted({*range(0, 64), *range(64, len(GOOD), len(GOOD) // 97), len(GOOD) - 1})


@pytest.mark.parametrize("chunk", range(8))
def test_truncated_at_many_offsets(tmp_path, capsys, chunk):
    for offset in OFFSETS[chunk::8]:
        check_contract(_write(tmp_path, GOOD[:offset]), capsys, refused=True)


# -- every JSON path's value swapped for every other JSON type -----------------------------------

SWAPS = ("text", 7, -2.5, [], [1], {"k": 1}, None, True)


def _paths(value, path=()):
    """Every path into ``value``; of a list, its first element only (the others have the same
    shape: benchmarks, sessions, samples)."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:1]):
            yield from _paths(item, (*path, i))


def _set(doc, path, value):
    doc = copy.deepcopy(doc)
    if not path:
        return value
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


PATHS = list(_paths(GOOD_DOC))


def _swap_each(tmp_path, capsys, cases) -> None:
    for path, swap in cases:
        mutated = _set(GOOD_DOC, path, swap)
        check_contract(_write(tmp_path, json.dumps(mutated)), capsys)


# every path, one type each, the next type for the next path: about 10 s on two workers
ROTATED = [(p, SWAPS[i % len(SWAPS)]) for i, p in enumerate(PATHS)]


@pytest.mark.parametrize("chunk", range(8))
def test_every_path_swapped_for_other_types(tmp_path, capsys, chunk):
    _swap_each(tmp_path, capsys, ROTATED[chunk::8])


@pytest.mark.slow  # every path for every type: about 50 s of CPU
@pytest.mark.parametrize("chunk", range(8))
def test_every_path_swapped_for_every_type(tmp_path, capsys, chunk):
    _swap_each(tmp_path, capsys, [(p, swap) for p in PATHS[chunk::8] for swap in SWAPS])


# -- numbers and shapes no measurement has ---------------------------------------------------------


def _sample(value: str) -> str:
    """The good baseline with its first sample replaced by the JSON text ``value``."""
    doc = copy.deepcopy(GOOD_DOC)
    doc["benchmarks"][0]["stats"]["data"][0] = "@@"
    return json.dumps(doc, indent=2).replace('"@@"', value)


def _history_sample(value: str) -> str:
    doc = copy.deepcopy(GOOD_DOC)
    doc["pytest_concurrency"]["history"][0]["benchmarks"][0]["samples"][0] = "@@"
    return json.dumps(doc).replace('"@@"', value)


HOSTILE_NUMBERS = {
    "a 5,000-digit sample": (_sample("9" * 5000), True),
    "a 5,000-digit cpu count": (
        GOOD.decode().replace('"cpu_count": ', '"cpu_count": ' + "9" * 5000 + ', "x": ', 1),
        True,
    ),
    "1e400 as a sample": (_sample("1e400"), True),
    "-1e400 as a sample": (_sample("-1e400"), True),
    "1e400 in the history": (_history_sample("1e400"), True),
    "a negative sample in the history": (_history_sample("-0.5"), True),
    "a boolean sample in the history": (_history_sample("true"), True),
    "a text sample in the history": (_history_sample('"0.4"'), True),
    "NaN as a sample": (_sample("NaN"), True),
    "NaN in the history": (_history_sample("NaN"), True),
    "a negative sample": (_sample("-0.001"), True),
    "a boolean sample": (_sample("true"), True),
    "a zero sample": (_sample("0"), False),
}


@pytest.mark.parametrize("name", HOSTILE_NUMBERS)
def test_numbers_no_measurement_has(tmp_path, capsys, name):
    content, refused = HOSTILE_NUMBERS[name]
    check_contract(_write(tmp_path, content), capsys, refused=refused)


def test_a_document_nested_100000_levels_deep(tmp_path, capsys):
    deep = "[" * 100_000 + "]" * 100_000
    check_contract(_write(tmp_path, deep), capsys, refused=True)
    inside = GOOD.decode().replace('"commit_info": {', '"commit_info": {"deep": ' + deep + ", ", 1)
    check_contract(_write(tmp_path, inside), capsys, refused=True)


@pytest.mark.slow  # ~30 s on this machine: writing and reading 50 MB six times
def test_fifty_megabytes_of_samples(tmp_path, capsys):
    doc = copy.deepcopy(GOOD_DOC)
    doc["benchmarks"][0]["stats"]["data"] = [0.123456789] * 4_000_000  # 50 MB of JSON
    path = _write(tmp_path, json.dumps(doc))
    assert path.stat().st_size > 50_000_000
    check_contract(path, capsys, refused=True)


@pytest.mark.slow  # ~10 s: writing and reading 50 MB six times
def test_fifty_megabytes_of_padding(tmp_path, capsys):
    padded = GOOD.decode().replace("{", "{" + " " * 50_000_000, 1)
    check_contract(_write(tmp_path, padded), capsys, refused=True)


def test_a_benchmark_named_by_a_number_is_refused(tmp_path, capsys):
    doc = copy.deepcopy(GOOD_DOC)
    doc["benchmarks"][0]["extra_info"]["workload"] = 12
    check_contract(_write(tmp_path, json.dumps(doc)), capsys, refused=True)


# -- another plugin, another Python --------------------------------------------------------------


def test_another_plugin_version_is_refused_with_the_way_out(tmp_path, capsys):
    for version in (0, 3, 99, "2", None):
        doc = _set(GOOD_DOC, ("pytest_concurrency", "schema_version"), version)
        check_contract(_write(tmp_path, json.dumps(doc)), capsys, refused=True)


def test_another_python_is_judged_refused_not_crashed(tmp_path, capsys):
    doc = _set(
        GOOD_DOC,
        ("pytest_concurrency", "python"),
        {"version": "2.7.18", "implementation": "PyPy", "minor": "2.7"},
    )
    path = _write(tmp_path, json.dumps(doc))
    assert check_contract(path, capsys) == "judged"
    result = gate.compare(baseline.load(path), CURRENT, META, SETTINGS)
    assert result.refused and "2.7" in result.refused


# -- what is not a file of JSON --------------------------------------------------------------------


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, capsys):
    path = tmp_path / "base.json"
    os.mkfifo(path)
    check_contract(path, capsys, refused=True)


def test_a_directory_is_refused(tmp_path, capsys):
    path = tmp_path / "base.json"
    path.mkdir()
    check_contract(path, capsys, refused=True)


def test_a_loop_of_links_is_refused(tmp_path, capsys):
    path = tmp_path / "base.json"
    path.symlink_to(tmp_path / "other.json")
    (tmp_path / "other.json").symlink_to(path)
    check_contract(path, capsys, refused=True)


def test_a_file_of_mode_000(tmp_path, capsys):
    path = _write(tmp_path, GOOD)
    path.chmod(0)
    try:  # root reads it anyway (judged); anyone else gets one line (refused)
        check_contract(path, capsys, refused=os.geteuid() != 0)
    finally:
        path.chmod(0o644)


# -- the same files in real processes ---------------------------------------------------------------

REAL = {
    "fifo": None,
    "5,000 digits": _sample("9" * 5000),
    "nested": "[" * 100_000 + "]" * 100_000,
    "1e400": _sample("1e400"),
    "truncated": GOOD[: len(GOOD) // 3].decode(),
}
#: The FIFO (a hang before) in the fast tier; the others, each a case the in-process tests
#: cover too, in the slow one.
REAL_CASES = [pytest.param(name, marks=() if name == "fifo" else pytest.mark.slow) for name in REAL]
#: A process that opened the fifo waits for a writer forever: this catches it. Not a speed limit:
#: at a load of 10 a session's start-up alone (an interpreter, pytest's plugins) passed 20 s.
HUNG_S = 120


def _real_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "base.json"
    if REAL[name] is None:
        os.mkfifo(path)
    else:
        path.write_text(REAL[name])
    return path


@pytest.mark.parametrize("name", REAL_CASES)
def test_a_real_session_and_the_report_command_end_in_one_line(pytester, name):
    # ~3 s idle, ~6 s here under load: one pytest session (it stops at start-up, before any
    # test) and one report command, each a fresh interpreter
    pytester.makepyfile(test_one="def test_one(benchmark):\n    benchmark(lambda: None)\n")
    path = _real_file(pytester.path, name)
    before = _fingerprint(path)
    session = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--concurrency-baseline={path}",
        ],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=HUNG_S,
    )
    assert session.returncode == pytest.ExitCode.USAGE_ERROR, session.stdout + session.stderr
    lines = [line for line in session.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: ") and path.name in lines[0], lines
    assert "Traceback" not in session.stdout + session.stderr
    report = subprocess.run(
        [sys.executable, "-m", "pytest_concurrency", "report", str(path)],
        capture_output=True,
        text=True,
        timeout=HUNG_S,
    )
    assert report.returncode == Exit.TOOL_USAGE, report.stdout + report.stderr
    assert report.stderr.count("\n") == 1 and path.name in report.stderr, report.stderr
    assert _fingerprint(path) == before
