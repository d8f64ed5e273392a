"""Sessions saving to one baseline at once: one at a time, each added to the file as it is then.

In-process-fast: forked processes call the save itself (``gate.save.store``) with small
documents; the real sessions are left to evidence/nothing_lost.py (``saves`` cases).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from _documents import document_from_records

from pytest_concurrency.gate import save
from pytest_concurrency.measure.records import Record
from pytest_concurrency.settings import Settings
from pytest_concurrency.store import atomic, baseline, history

pytestmark = [  # version-independent (flock, the merge): once, on one Python
    pytest.mark.once,
    pytest.mark.skipif(atomic.fcntl is None, reason="flock is POSIX's"),
]

FORK = multiprocessing.get_context("fork")
PY = {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"}


def _session(tag: str) -> tuple[dict, list]:
    """One session's document and records; ``tag`` is its commit id (the samples are the same in
    every session, so no save reads another as a change of speed)."""
    recs = [Record("ring", {"n": 10}, b, [1.0] * 5, backend_version="1.0") for b in ("a", "b")]
    meta = {
        "schema_version": baseline.SCHEMA_VERSION,
        "python": dict(PY),
        "backends": {},
        "libraries": {},
        "cpu_count": 2,
        "calibration": {"version": 1, "ns_per_iteration": 270.0},
    }
    return document_from_records(recs, meta, commit_info={"id": tag}), recs


def _save(path: Path, keep: int, tag: str, log: Path | None = None) -> list[str]:
    def wrote(line: str) -> None:  # under the lock: the log's order is the order of the saves
        if log is not None:
            with open(log, "a") as fh:
                fh.write(tag + "\n")

    doc, recs = _session(tag)
    return save.store(path, doc, recs, Settings().gate, keep, wrote)


def _tags(path: Path) -> list[str]:
    """The sessions in the file, newest first."""
    doc = baseline.load(path).doc
    return [doc["commit_info"]["id"]] + [e["commit"] for e in doc[history.SECTION]["history"]]


@pytest.fixture(scope="module", autouse=True)
def _imported_before_forking(tmp_path_factory):
    """The gate's statistics (scipy: seconds to import) imported once, not in every child."""
    path = tmp_path_factory.mktemp("warm") / "b.json"
    _save(path, 5, "one")
    _save(path, 5, "two")


def _in_child(go, path: Path, keep: int, tag: str, log: Path) -> None:
    go.wait()
    _save(path, keep, tag, log)


@pytest.mark.parametrize("n, keep", [(3, 5), (10, 5), (8, 10)])
def test_sessions_saved_at_once_are_all_kept_newest_first(tmp_path, n, keep):
    """~0.5 s: three sessions saving at once each said "written (2 sessions)", and the file held
    1-3 of the 4 sessions (each added itself to the file as it had read it at its start)."""
    path, log = tmp_path / "b.json", tmp_path / "order"
    _save(path, keep, "first")
    go = FORK.Event()
    procs = [FORK.Process(target=_in_child, args=(go, path, keep, f"s{i}", log)) for i in range(n)]
    for proc in procs:
        proc.start()
    go.set()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * n
    saved = log.read_text().split()
    assert sorted(saved) == sorted(f"s{i}" for i in range(n))
    assert _tags(path) == (saved[::-1] + ["first"])[:keep]
    assert not (tmp_path / "b.json.lock").exists()


def _hold(path: Path, held, release, die: bool) -> None:
    with atomic.locked(path, lambda: None):
        held.set()
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        release.wait(60)


def test_a_save_that_waits_says_so_once_and_then_saves(tmp_path, capfd):
    """~0.5 s: the save waits for the one holding the lock, and says why it seems to hang."""
    path = tmp_path / "b.json"
    _save(path, 5, "first")
    held, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold, args=(path, held, release, False))
    holder.start()
    assert held.wait(30)
    timer = FORK.Process(target=lambda: (time.sleep(0.5), release.set()))
    timer.start()
    started = time.monotonic()
    _save(path, 5, "second")
    waited = time.monotonic() - started
    holder.join(30)
    timer.join(30)
    err = capfd.readouterr().err
    assert waited >= 0.4 and _tags(path) == ["second", "first"]
    assert err.count("pytest-concurrency: waiting for another session's save to") == 1, err


def test_a_lock_whose_holder_was_killed_does_not_block(tmp_path, capfd):
    """~0.3 s: flock is released by the kernel when its holder dies; the lock file it left is
    taken at once."""
    path = tmp_path / "b.json"
    held, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold, args=(path, held, release, True))
    holder.start()
    holder.join(30)
    assert holder.exitcode == -signal.SIGKILL and held.is_set()
    assert (tmp_path / "b.json.lock").exists()  # left by the killed holder
    started = time.monotonic()
    _save(path, 5, "after")
    assert time.monotonic() - started < 2 and _tags(path) == ["after"]
    assert "waiting" not in capfd.readouterr().err
    assert not (tmp_path / "b.json.lock").exists()


def test_a_ctrl_c_ends_the_wait_and_writes_nothing(tmp_path):
    """~0.5 s: a save waiting for the lock is interrupted like any other wait."""
    path = tmp_path / "b.json"
    held, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold, args=(path, held, release, False))
    holder.start()
    assert held.wait(30)
    previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    # Python's own Ctrl-C, as in a user's session (an xdist worker may have set it aside)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            _save(path, 5, "x")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGINT, previous_int)
        release.set()
        holder.join(30)
    assert not path.exists()


def test_a_benchmark_that_measured_nothing_is_left_out_and_the_file_stays_readable(tmp_path):
    """~0 s: a baseline whose samples are all zero is refused when read; a save must not write one
    (a test that counts nothing would otherwise make the baseline unusable)."""
    path = tmp_path / "b.json"
    doc, recs = _session("zeros")
    doc["benchmarks"][1]["stats"]["data"] = [0.0] * 5
    recs[1] = Record("ring", {"n": 10}, "b", [0.0] * 5, backend_version="1.0")
    said = save.store(
        path, doc, recs, Settings().gate, Settings().baseline_sessions, lambda line: None
    )
    assert said[0] == (
        f"{recs[1].label} measured 0 in every round: left out of the baseline, as no change can "
        "be judged against it"
    )
    assert [b["extra_info"]["backend"] for b in baseline.load(path).doc["benchmarks"]] == ["a"]
    doc["benchmarks"] = doc["benchmarks"][1:]
    with pytest.raises(baseline.BaselineError, match="every benchmark measured 0 in every round"):
        save.store(
            path, doc, recs[1:], Settings().gate, Settings().baseline_sessions, lambda line: None
        )
    assert [b["extra_info"]["backend"] for b in baseline.load(path).doc["benchmarks"]] == ["a"]


def test_a_lock_file_that_is_a_link_is_refused_with_one_line(tmp_path):
    """~0 s: a planted b.json.lock -> elsewhere must not make a save create or lock that file."""
    path, elsewhere = tmp_path / "b.json", tmp_path / "elsewhere"
    (tmp_path / "b.json.lock").symlink_to(elsewhere)
    with pytest.raises(baseline.BaselineError, match=r"cannot write the baseline .*b\.json\.lock"):
        _save(path, 5, "x")
    assert not elsewhere.exists() and not path.exists()


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="fork and /proc: Linux")


def _killed_while_writing(path: Path) -> None:
    """A save SIGKILLed after its temporary file is written, before it is renamed into place."""
    atomic._fsync_file = lambda tmp: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[assignment]
    _save(path, 5, "killed")


def test_a_save_removes_what_a_save_killed_while_it_wrote_left(tmp_path):
    """~0.5 s: the killed save's ``.b.XXXXXXXX.tmp.json`` stayed beside the baseline for good."""
    path = tmp_path / "b.json"
    _save(path, 5, "first")
    child = FORK.Process(target=_killed_while_writing, args=(path,))
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    (left,) = tmp_path.glob(".b.*.tmp.json")
    others = [tmp_path / ".b.x.abcdefgh.tmp.json", tmp_path / ".bb.abcdefgh.tmp.json"]
    for other in others:  # another file's (b.x.json's, bb.json's): not this save's to remove
        other.write_text("{}")
    assert _tags(path) == ["first"]  # the baseline as it was
    _save(path, 5, "next")
    assert not left.exists() and all(other.exists() for other in others)
    assert _tags(path) == ["next", "first"]
