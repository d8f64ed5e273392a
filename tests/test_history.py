"""Baselines of several sessions: how saves stack up, what is dropped, what is refused."""

from __future__ import annotations

import json

import pytest
from _documents import document_from_records

from pytest_concurrency.measure.records import Record
from pytest_concurrency.store import baseline, history
from pytest_concurrency.store.baseline import BaselineError
from pytest_concurrency.store.history import Baseline

# version-independent (a baseline's sessions: arithmetic on records): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

PY = {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"}


def meta(python=PY, ns=270.0) -> dict:
    return {
        "schema_version": baseline.SCHEMA_VERSION,
        "python": dict(python),
        "backends": {},
        "libraries": {},
        "cpu_count": 2,
        "calibration": {"version": 1, "ns_per_iteration": ns},
    }


def session_doc(tag: float, backends=("asyncio", "gevent"), python=PY) -> dict:
    """A one-session document whose every sample is ``tag`` (so sessions can be told apart)."""
    recs = [
        Record("ring", {"n": 10}, b, [tag] * 5, backend_version="1.0", extra={"foreign_cpu": 0.01})
        for b in backends
    ]
    return document_from_records(recs, meta(python))


def stack(tags, keep: int) -> dict:
    doc = None
    for tag in tags:
        doc = history.merge(session_doc(tag), doc and Baseline.of(doc), keep)
    return doc


def medians(doc, backend="asyncio") -> list:
    found = (doc if isinstance(doc, Baseline) else Baseline.of(doc)).sessions
    return [s.samples[0] for s in found[("ring", "n=10", backend)]]


def test_sessions_stack_newest_first_and_the_oldest_go_beyond_keep():
    doc = stack([1.0, 2.0, 3.0, 4.0], keep=3)
    assert history.count(doc) == 3
    assert medians(doc) == [4.0, 3.0, 2.0]
    assert doc["benchmarks"][0]["stats"]["data"] == [4.0] * 5  # pytest-benchmark sees the latest


def test_keep_one_replaces_the_baseline():
    doc = stack([1.0, 2.0], keep=1)
    assert history.count(doc) == 1 and medians(doc) == [2.0]


def test_a_restarted_benchmark_keeps_only_the_new_session():
    doc = stack([1.0, 2.0], keep=5)
    doc = history.merge(session_doc(3.0), Baseline.of(doc), 5, restart=[("ring", "n=10", "gevent")])
    assert medians(doc, "gevent") == [3.0]
    assert medians(doc, "asyncio") == [3.0, 2.0, 1.0]


def test_an_earlier_session_left_without_benchmarks_is_dropped():
    doc = history.merge(
        session_doc(2.0),
        Baseline.of(session_doc(1.0, backends=("gevent",))),
        5,
        restart=[("ring", "n=10", "gevent")],
    )
    assert history.count(doc) == 1


def test_a_benchmark_only_in_earlier_sessions_is_still_known():
    doc = history.merge(session_doc(2.0, backends=("asyncio",)), Baseline.of(session_doc(1.0)), 5)
    assert medians(doc, "gevent") == [1.0]


def test_sessions_keep_their_load_version_and_calibration():
    older = session_doc(1.0)
    older["pytest_concurrency"]["calibration"]["ns_per_iteration"] = 300.0
    doc = history.merge(session_doc(2.0), Baseline.of(older), 5)
    found = Baseline.of(doc).sessions
    first, second = found[("ring", "n=10", "asyncio")]
    assert first.foreign_cpu == second.foreign_cpu == 0.01
    assert first.backend_version == second.backend_version == "1.0"
    assert [c["ns_per_iteration"] for c in Baseline.of(doc).calibrations] == [270.0, 300.0]


def test_another_python_cannot_sit_behind_this_one():
    other = session_doc(
        1.0, python={"version": "3.10.4", "implementation": "CPython", "minor": "3.10"}
    )
    reason = history.incompatible(Baseline.of(other), meta())
    assert (
        "CPython 3.10.4" in reason
        and "CPython 3.11.7" in reason
        and "one baseline file per Python" in reason
    )
    assert history.incompatible(Baseline.of(session_doc(1.0)), meta()) is None


def test_a_saved_history_reads_back(tmp_path):
    path = tmp_path / "base.json"
    baseline.save(path, stack([1.0, 2.0, 3.0], keep=5))
    assert medians(baseline.load(path)) == [3.0, 2.0, 1.0]


@pytest.mark.parametrize(
    "damage, message",
    [
        ("not a list", "pytest_concurrency.history is a string, not a list"),
        ([{"datetime": "x"}], "pytest_concurrency.history[0] lacks 'benchmarks'"),
        (
            [
                {
                    "benchmarks": [
                        {"workload": "ring", "params": {}, "backend": "gevent", "samples": []}
                    ]
                }
            ],
            "history[0].benchmarks[0].samples is empty: a session without rounds",
        ),
        (
            [
                {
                    "benchmarks": [
                        {"workload": "ring", "params": {}, "backend": "gevent", "samples": ["1"]}
                    ]
                }
            ],
            "history[0].benchmarks[0].samples[0] is a string, where only non-negative numbers",
        ),
    ],
)
def test_a_damaged_history_is_refused_with_the_fix(tmp_path, damage, message):
    doc = stack([1.0, 2.0], keep=5)
    doc["pytest_concurrency"]["history"] = damage
    path = tmp_path / "base.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError) as info:
        baseline.load(path)
    assert message in str(info.value) and "re-create it with" in str(info.value)


def test_a_version_1_baseline_still_reads(tmp_path):
    doc = session_doc(1.0)
    doc["pytest_concurrency"]["schema_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    assert baseline.load(path).count == 1


def test_a_save_starts_from_nothing_when_there_is_nothing(tmp_path):
    assert baseline.load_previous(tmp_path / "absent.json") is None
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert baseline.load_previous(empty) is None


@pytest.mark.parametrize(
    "content", ["my notes, not JSON\n", '{"benchmarks": [], "machine_info": {}}']
)
def test_a_save_never_overwrites_a_file_that_is_not_a_baseline(tmp_path, content):
    path = tmp_path / "precious.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as info:
        baseline.load_previous(path)
    assert "exists and is not a baseline" in str(info.value) and "left untouched" in str(info.value)
    assert path.read_text() == content


def test_each_session_keeps_its_code_identity_and_disturbed_flag():
    first = session_doc(1.0)
    first["pytest_concurrency"]["code"] = {"commit": "a" * 40, "dirty": False}
    first["benchmarks"][0]["extra_info"]["disturbed"] = "+50% against the earlier sessions"
    doc = history.merge(session_doc(2.0), Baseline.of(first), 5)
    assert doc["pytest_concurrency"]["history"][0]["code"] == {"commit": "a" * 40, "dirty": False}
    assert Baseline.of(doc).identities[1] == ({"commit": "a" * 40, "dirty": False}, {})
    found = Baseline.of(doc).sessions
    assert [s.disturbed for s in found[("ring", "n=10", "asyncio")]] == [
        "",
        "+50% against the earlier sessions",
    ]
