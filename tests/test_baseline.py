"""Baseline files: round trip, atomic save, and a clear error for every kind of bad file."""

from __future__ import annotations

import errno
import json
import os

import pytest
from _documents import document_from_records

from pytest_concurrency.measure import records
from pytest_concurrency.store import baseline
from pytest_concurrency.store.baseline import BaselineError

# version-independent (the baseline store's files: JSON in, JSON out): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once


def sample_doc(n: int = 5) -> dict:
    recs = [
        records.Record(
            "ring",
            {"n": 10, "m": 100},
            "gevent",
            [1e-3 + i * 1e-6 for i in range(n)],
            ops=1000,
            unit="hop",
            backend_version="25.1.0",
        ),
        records.Record(
            "switch",
            {"n": 1000},
            "asyncio",
            [2e-3 + i * 1e-6 for i in range(n)],
            ops=1000,
            unit="switch",
            backend_version="3.11.7",
        ),
    ]
    meta = baseline.current_meta(
        {"gevent": "25.1.0", "asyncio": "3.11.7"}, {"version": 1, "ns_per_iteration": 270.0}
    )
    return document_from_records(recs, meta)


def test_round_trip_keeps_samples_and_is_pytest_benchmark_json(tmp_path):
    path = tmp_path / "base.json"
    doc = sample_doc()
    baseline.save(path, doc)
    loaded = baseline.load(path)
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(loaded.doc)
    bench = loaded.doc["benchmarks"][0]
    assert bench["stats"]["data"] == doc["benchmarks"][0]["stats"]["data"]
    assert bench["stats"]["median"] == pytest.approx(loaded.records[0].median)
    assert loaded.meta["python"]["minor"].count(".") == 1
    assert [r.key for r in loaded.records] == [
        ("ring", "m=100,n=10", "gevent"),
        ("switch", "n=1000", "asyncio"),
    ]
    assert not [p for p in os.listdir(tmp_path) if p != "base.json"]  # no temp file left


def test_a_save_keeps_every_kth_round_of_a_long_benchmark_on_a_line_of_its_own(tmp_path):
    """pytest-benchmark runs a small function 100,000 rounds and more: a real suite's baseline
    (yarl's 91 URL benchmarks) outgrew what a read accepts by its third session."""
    path = tmp_path / "base.json"
    doc = sample_doc(n=25_000)
    doc[baseline.SECTION]["history"] = [
        {"benchmarks": [{"workload": "ring", "samples": list(range(3001)), "keep": "me"}]}
    ]
    baseline.save(path, doc)
    text = path.read_text()
    saved = json.loads(text)
    data = saved["benchmarks"][0]["stats"]["data"]
    assert len(data) == baseline.KEPT_ROUNDS and data == doc["benchmarks"][0]["stats"]["data"][::25]
    assert saved["benchmarks"][0]["stats"]["median"] == doc["benchmarks"][0]["stats"]["median"]
    (old,) = saved[baseline.SECTION]["history"][0]["benchmarks"]
    assert len(old["samples"]) == baseline.KEPT_ROUNDS and old["samples"][:3] == [0, 3, 6]
    assert old["keep"] == "me"  # the rest of an entry as it was
    assert len(text) < 2 * 30 * baseline.KEPT_ROUNDS  # the samples one line each benchmark
    assert len(doc["benchmarks"][0]["stats"]["data"]) == 25_000  # the caller's document untouched


def test_save_creates_missing_directories(tmp_path):
    path = tmp_path / "ci" / "py311" / "base.json"
    baseline.save(path, sample_doc())
    assert baseline.load(path).doc["benchmarks"]


def write(tmp_path, content, name="base.json"):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def expect(path, *fragments):
    with pytest.raises(BaselineError) as info:
        baseline.load(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    return message


def test_missing_file(tmp_path):
    expect(tmp_path / "nope.json", "does not exist", "--concurrency-save-baseline=")


def test_directory(tmp_path):
    expect(tmp_path, "is a directory", "JSON file")


def test_empty_file(tmp_path):
    expect(write(tmp_path, "  \n"), "is empty", "re-create it with")


def test_truncated_file(tmp_path):
    text = json.dumps(sample_doc())
    expect(write(tmp_path, text[: len(text) // 2]), "truncated", "re-create it with")


def test_not_json(tmp_path):
    expect(
        write(tmp_path, "machine_info: x\nbenchmarks: []\n"),
        "not valid JSON",
        "line 1",
        "re-create it with",
    )


def test_binary_file(tmp_path):
    expect(write(tmp_path, b"\xff\xfe\x00garbage"), "not JSON", "re-create it with")


def test_json_list(tmp_path):
    expect(write(tmp_path, "[1, 2]"), "JSON list", "re-create it with")


def test_plain_pytest_benchmark_file_says_how_to_make_a_baseline(tmp_path):
    doc = sample_doc()
    del doc[baseline.SECTION]
    expect(
        write(tmp_path, json.dumps(doc)),
        "plain pytest-benchmark file",
        "--concurrency-save-baseline=",
    )


def test_json_from_another_tool(tmp_path):
    expect(
        write(tmp_path, json.dumps({"name": "pkg", "version": "1.0"})),
        "another tool",
        "--concurrency-save-baseline",
    )


@pytest.mark.parametrize("version, extra", [(3, "newer"), (0, ""), (None, "")])
def test_wrong_schema_version(tmp_path, version, extra):
    doc = sample_doc()
    doc[baseline.SECTION]["schema_version"] = version
    msg = expect(
        write(tmp_path, json.dumps(doc)), f"schema version {version!r}", "re-create it with"
    )
    assert extra in msg


def test_missing_python_info(tmp_path):
    doc = sample_doc()
    del doc[baseline.SECTION]["python"]
    expect(write(tmp_path, json.dumps(doc)), "Python version", "re-create it with")


def test_no_benchmarks(tmp_path):
    doc = sample_doc()
    doc["benchmarks"] = []
    expect(write(tmp_path, json.dumps(doc)), "no benchmarks", "re-create it with")


def test_benchmarks_without_raw_samples(tmp_path):
    doc = sample_doc()
    for bench in doc["benchmarks"]:
        del bench["stats"]["data"]
    expect(
        write(tmp_path, json.dumps(doc)),
        "without raw samples",
        "ring[m=100,n=10] on gevent",
        "always stores them",
    )


def test_unwritable_path_is_a_clear_error(tmp_path):
    blocker = write(tmp_path, "not a directory", name="blocker")
    target = blocker / "base.json"  # its "directory" is a file: not writable, even as root
    with pytest.raises(BaselineError) as info:
        baseline.save(target, sample_doc())
    assert str(target) in str(info.value)
    assert "writable directory" in str(info.value)
    assert blocker.read_text() == "not a directory"


@pytest.mark.parametrize("fail_at", ["replace", "fsync", "chmod"])
def test_failed_save_leaves_the_old_baseline_intact(tmp_path, monkeypatch, fail_at):
    path = tmp_path / "base.json"
    baseline.save(path, sample_doc(3))
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(baseline.os, fail_at, boom)
    with pytest.raises(BaselineError, match="No space left on device"):
        baseline.save(path, sample_doc(8))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["base.json"]  # the temp file was removed


def test_objects_json_cannot_hold_are_saved_as_text_like_pytest_benchmark_does(tmp_path):
    class Case:
        def __repr__(self):
            return "Case(n=10)"

    doc = sample_doc()
    doc["benchmarks"][0]["params"] = {"case": Case()}
    baseline.save(tmp_path / "base.json", doc)
    assert (
        "Case(n=10)" in baseline.load(tmp_path / "base.json").doc["benchmarks"][0]["params"]["case"]
    )


def test_save_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "base.json"
    baseline.save(path, sample_doc())
    os.chmod(path, 0o640)
    baseline.save(path, sample_doc(7))
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert len(baseline.load(path).doc["benchmarks"][0]["stats"]["data"]) == 7


@pytest.mark.parametrize(
    "code, fix",
    [
        (errno.ENOSPC, "free space (or quota) on the file system of"),
        (errno.EDQUOT, "free space (or quota) on the file system of"),
        (errno.EROFS, "choose a path on a writable file system"),
        (errno.EACCES, "or fix the permissions of"),
    ],
)
def test_a_save_that_fails_says_the_fix_its_error_calls_for(tmp_path, monkeypatch, code, fix):
    """~0 s: a full disk was told to "fix the permissions"."""

    def refused(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(baseline.os, "replace", refused)
    with pytest.raises(BaselineError) as info:
        baseline.save(tmp_path / "base.json", sample_doc())
    said = str(info.value)
    assert fix in said and os.strerror(code) in said and "\n" not in said, said
    assert ("permissions" in said) == (code == errno.EACCES), said


def test_a_markdown_report_on_a_full_disk_is_the_sessions_error_not_a_traceback(
    tmp_path, monkeypatch
):
    """~0 s: it was an OSError traceback after the summary."""
    from types import SimpleNamespace

    from pytest_concurrency import session_end
    from pytest_concurrency.report import markdown

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(markdown, "write", full)
    outcome = session_end.SessionOutcome([])
    s = SimpleNamespace(report_md=tmp_path / "r.md", plot_dir=None)
    written: list[str] = []
    session_end._report(outcome, s, written)
    assert not written  # not written: a Ctrl-C now must not say the report was
    assert outcome.errors == [
        f"the markdown report {tmp_path / 'r.md'} was not written: No space left on device: free "
        f"space (or quota) on the file system of {str(tmp_path)!r}, or choose a path on another one"
    ]
    assert outcome.failed and not outcome.messages
