"""The gate on synthetic records: matching, verdicts, thresholds, machines, Pythons, text."""

from __future__ import annotations

import os
import platform
import random
from importlib import metadata

import pytest
from _documents import document_from_records

from pytest_concurrency import measure
from pytest_concurrency.exit_codes import Exit
from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate.compare import GateSettings
from pytest_concurrency.gate.verdicts import (
    IMPROVED,
    INCONCLUSIVE,
    MISSING,
    NEW,
    REGRESSED,
    UNCHANGED,
)
from pytest_concurrency.measure.records import Record
from pytest_concurrency.report import tables
from pytest_concurrency.store import baseline, history
from pytest_concurrency.store.history import Baseline

# version-independent (the gate on synthetic records): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

CASES = [("ring", {"n": 50, "m": 1000}), ("switch", {"n": 1000})]
BACKENDS = {"gevent": "25.1.0", "uvloop": "0.21.0", "threading": "3.11.7"}
PY = {"version": "3.11.7", "implementation": "CPython", "minor": "3.11"}


def run(
    seed: int,
    rounds: int = 20,
    slower: dict | None = None,
    versions: dict | None = None,
    speed: float = 1.0,
) -> list[Record]:
    """One synthetic session: every case on every backend, 3% lognormal noise."""
    rng = random.Random(seed)
    out = []
    for workload, params in CASES:
        for i, (backend, version) in enumerate(sorted((versions or BACKENDS).items())):
            scale = (1 + i) * 1e-3 * speed * (slower or {}).get(backend, 1.0)
            samples = [scale * rng.lognormvariate(0, 0.03) for _ in range(rounds)]
            out.append(Record(workload, dict(params), backend, samples, backend_version=version))
    return out


def meta(python=PY, ns=270.0, libraries=None, cpu="AMD EPYC 7B13", swing=None) -> dict:
    calibration = {
        "version": 1,
        "ns_per_iteration": ns,
        **({"swing": swing} if swing is not None else {}),
    }
    return {
        "schema_version": 1,
        "python": dict(python),
        "backends": dict(BACKENDS),
        "libraries": libraries or {"greenlet": "3.1.1", "gevent": "25.1.0"},
        "cpu_count": 2,
        "cpu_model": cpu,
        "calibration": calibration,
    }


OTHER_CPU = "Intel Xeon E5-2680"


def baseline_of(seed: int = 1, **kw) -> Baseline:
    return Baseline.of(document_from_records(run(seed, **kw), meta()))


def shown(result) -> list[str]:
    """The gate's block as the report prints it: ``section title: line``."""
    return [f"{title}: {line}" for title, lines in tables.summary(result) for line in lines]


def statuses(result) -> dict:
    return {v.key: v.status for v in result.verdicts}


def test_a_a_passes():
    result = gate.compare(baseline_of(1), run(2), meta())
    assert not result.failed
    assert set(statuses(result).values()) == {UNCHANGED}
    assert "passed" in result.summary


def test_slowdown_in_one_backend_regresses_only_that_backend():
    result = gate.compare(baseline_of(1), run(2, slower={"uvloop": 1.15}), meta())
    assert result.failed
    regressed = result.by_status(REGRESSED)
    assert {v.key[2] for v in regressed} == {"uvloop"}
    assert len(regressed) == len(CASES)
    v = regressed[0]
    assert 0.10 < v.change < 0.20 and v.p_value < 0.01 and v.decided_by == "raw"
    assert v.ci[0] > 0
    line = next(
        line
        for line in shown(result)
        if line.startswith("Regressions (fail the build): ring[m=1000,n=50] on uvloop")
    )
    assert " ms -> " in line and "p=" in line and "threshold" in line


def test_same_slowdown_with_three_rounds_is_inconclusive_not_a_failure():
    result = gate.compare(
        baseline_of(1, rounds=3), run(2, rounds=3, slower={"uvloop": 1.15}), meta()
    )
    assert not result.failed
    inconclusive = result.by_status(INCONCLUSIVE)
    assert {v.key[2] for v in inconclusive} == {"uvloop"}
    assert "run at least 5 rounds" in inconclusive[0].note


def test_faster_run_is_reported_as_stale_baseline():
    result = gate.compare(baseline_of(1), run(2, slower={"gevent": 0.8}), meta())
    assert not result.failed
    assert {v.key[2] for v in result.by_status(IMPROVED)} == {"gevent"}
    assert "baseline is stale" in result.summary
    assert any(
        line.startswith(
            "Faster than the baseline (baseline is stale; refresh it): ring[m=1000,n=50] on gevent"
        )
        for line in shown(result)
    )


def test_new_and_missing_are_listed():
    current = [r for r in run(2) if r.backend != "threading"]
    current.append(Record("spawn", {"n": 10}, "gevent", [1e-3] * 20, backend_version="25.1.0"))
    result = gate.compare(baseline_of(1), current, meta())
    assert [v.key for v in result.by_status(NEW)] == [("spawn", "n=10", "gevent")]
    assert {v.key for v in result.by_status(MISSING)} == {
        (w, ",".join(f"{k}={p[k]}" for k in sorted(p)), "threading") for w, p in CASES
    }
    lines = shown(result)
    assert any(
        line.startswith("New since the baseline: spawn[n=10] on gevent")
        and "--concurrency-save-baseline" in line
        for line in lines
    ), lines
    assert any(
        line.startswith("Missing from this run: ring[m=1000,n=50] on threading") for line in lines
    )
    assert "1 new, 2 missing" in result.summary


def test_other_python_minor_is_refused_with_the_opt_in_flag():
    py310 = {"version": "3.10.13", "implementation": "CPython", "minor": "3.10"}
    result = gate.compare(baseline_of(1), run(2), meta(python=py310))
    assert result.failed and not result.verdicts
    assert "3.10.13" in result.refused and "3.11.7" in result.refused
    assert gate.ALLOW_CROSS_PYTHON_FLAG in result.refused
    assert tables.headline(result).startswith("Comparison refused: ")
    assert shown(result)[0].startswith("Comparison refused: ")


def test_other_implementation_is_refused():
    pypy = {"version": "3.11.7", "implementation": "PyPy", "minor": "3.11"}
    assert gate.compare(baseline_of(1), run(2), meta(python=pypy)).refused


def test_cross_python_when_allowed_compares_and_says_so():
    py310 = {"version": "3.10.13", "implementation": "CPython", "minor": "3.10"}
    result = gate.compare(
        baseline_of(1), run(2), meta(python=py310), GateSettings(allow_cross_python=True)
    )
    assert result.refused is None and not result.failed
    assert any(gate.ALLOW_CROSS_PYTHON_FLAG in n for n in result.notes)
    assert all(v.versions_changed.get("python") == ("3.11.7", "3.10.13") for v in result.verdicts)


def test_cross_python_is_never_normalized():
    py312 = {"version": "3.12.1", "implementation": "CPython", "minor": "3.12"}
    result = gate.compare(
        baseline_of(1),
        run(2, speed=1.3),
        meta(python=py312, ns=351.0, cpu=OTHER_CPU),
        GateSettings(allow_cross_python=True),
    )
    assert all(v.decided_by == "raw" for v in result.verdicts)
    assert {v.status for v in result.verdicts} == {
        REGRESSED
    }  # a slower interpreter is what was asked about


def test_a_verdict_across_a_release_of_the_code_under_test_says_so():
    """A suite's own benchmarks measure its library: its release is in the baseline (under_test)."""
    base = document_from_records(run(1), {**meta(), "under_test": {"thelib": "1.2"}})
    cur_meta = {**meta(), "under_test": {"thelib": "1.3", "other": "2.0"}}
    result = gate.compare(Baseline.of(base), run(2, slower={"gevent": 1.3}), cur_meta)
    assert all(v.versions_changed.get("thelib") == ("1.2", "1.3") for v in result.verdicts)
    assert all("other" not in v.versions_changed for v in result.verdicts)  # new: nothing to say
    line = next(line for line in shown(result) if line.startswith("Regressions"))
    assert "versions changed: thelib 1.2 -> 1.3" in line
    same = gate.compare(Baseline.of(base), run(2), {**meta(), "under_test": {"thelib": "1.2"}})
    assert not any(v.versions_changed for v in same.verdicts)


def test_the_session_records_the_versions_of_what_it_imported():
    recorded = baseline.under_test_versions()
    assert recorded.get("pytest-concurrency-bench") is None and "pytest" not in recorded
    import gevent  # noqa: F401  (the tests' own library, as a suite's would be)

    assert (
        baseline.under_test_versions()["gevent"] == baseline.library_versions(["gevent"])["gevent"]
    )


def test_a_projects_egg_info_in_the_run_directory_is_not_taken_for_the_imported_copy(
    tmp_path, monkeypatch
):
    # an sdist's tree: its egg-info, first on sys.path, names an older version than the one imported
    import gevent

    info = tmp_path / "gevent.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: gevent\nVersion: 0.0.1\n")
    (info / "top_level.txt").write_text("gevent\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert metadata.version("gevent") == "0.0.1"  # what a lookup by name finds
    assert baseline.under_test_versions()["gevent"] == gevent.__version__ != "0.0.1"


def test_versions_that_moved_are_named_per_benchmark():
    bumped = dict(BACKENDS, gevent="26.9.0")
    cur_meta = meta(libraries={"greenlet": "3.2.0", "gevent": "26.9.0"})
    result = gate.compare(
        baseline_of(1), run(2, versions=bumped, slower={"gevent": 1.15}), cur_meta
    )
    by_backend = {v.key[2]: v.versions_changed for v in result.verdicts if v.key[0] == "ring"}
    assert by_backend["gevent"] == {"gevent": ("25.1.0", "26.9.0"), "greenlet": ("3.1.1", "3.2.0")}
    assert by_backend["uvloop"] == {} and by_backend["threading"] == {}
    line = next(
        line
        for line in shown(result)
        if line.startswith("Regressions (fail the build): ring[m=1000,n=50] on gevent")
    )
    assert "versions changed: gevent 25.1.0 -> 26.9.0, greenlet 3.1.1 -> 3.2.0" in line


ALL_SLOW = {("ring", "uvloop"), ("ring", "gevent"), ("switch", "uvloop"), ("switch", "gevent")}


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({}, ALL_SLOW),
        ({"uvloop": 0.20}, {("ring", "gevent"), ("switch", "gevent")}),  # backend
        ({"ring": 0.20}, {("switch", "uvloop"), ("switch", "gevent")}),  # workload
        ({"switch": 0.20, "gevent": 0.20}, {("ring", "uvloop")}),
        (
            {"ring": 0.20, "uvloop": 0.03},
            {("switch", "uvloop"), ("switch", "gevent")},
        ),  # the larger applies
        (
            {"uvloop": 0.20, "ring:uvloop": 0.05},
            ALL_SLOW - {("switch", "uvloop")},
        ),  # workload:backend first
    ],
)
def test_threshold_overrides(overrides, expected):
    result = gate.compare(
        baseline_of(1),
        run(2, slower={"uvloop": 1.12, "gevent": 1.12}),
        meta(),
        GateSettings(threshold=0.05, overrides=overrides),
    )
    assert {(v.key[0], v.key[2]) for v in result.by_status(REGRESSED)} == expected


def test_per_test_threshold_beats_everything():
    current = run(2, slower={"uvloop": 1.12})
    key = ("ring", "m=1000,n=50", "uvloop")
    settings = GateSettings(threshold=0.05, overrides={"ring:uvloop": 0.05}, tests={key: 0.30})
    result = gate.compare(baseline_of(1), current, meta(), settings)
    assert key not in {v.key for v in result.by_status(REGRESSED)}
    assert next(v for v in result.verdicts if v.key == key).threshold == 0.30
    for rec in current:  # the marker's threshold travels in the record's extra_info
        if rec.key == key:
            rec.extra["threshold"] = 0.30
    result = gate.compare(baseline_of(1), current, meta(), GateSettings(threshold=0.05))
    assert [v.key for v in result.by_status(REGRESSED)] == [("switch", "n=1000", "uvloop")]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="0.10 for 10%"):
        GateSettings(threshold=-0.1)
    with pytest.raises(ValueError, match="gevent"):
        GateSettings(overrides={"gevent": "10"})
    with pytest.raises(ValueError, match="alpha"):
        GateSettings(alpha=5)


def test_slower_machine_is_judged_normalized():
    # the same code on a machine 30% slower: raw says regression, normalized says no
    result = gate.compare(baseline_of(1), run(2, speed=1.3), meta(ns=351.0, cpu=OTHER_CPU))
    assert not result.failed
    assert result.calibration_ratio == pytest.approx(1.3)
    v = result.verdicts[0]
    assert v.decided_by == "normalized" and v.raw_change > 0.25 and abs(v.normalized_change) < 0.05
    assert any("normalized" in n for n in result.notes)


def test_slower_machine_still_catches_a_real_regression():
    result = gate.compare(
        baseline_of(1),
        run(2, speed=1.3, slower={"gevent": 1.15}),
        meta(ns=351.0, cpu=OTHER_CPU),
    )
    assert {v.key[2] for v in result.by_status(REGRESSED)} == {"gevent"}
    line = next(
        line
        for line in shown(result)
        if line.startswith("Regressions (fail the build):") and " on gevent" in line
    )
    assert "decided by normalized" in line and "raw +" in line


def test_a_slow_calibration_reading_on_the_same_machine_never_normalizes():
    # the loop read 45% slow on the very machine of the baseline: scaling by it would call
    # every unchanged benchmark 30% "improved" and hide a real 15% regression
    result = gate.compare(baseline_of(1), run(2, slower={"gevent": 1.15}), meta(ns=392.0))
    assert all(v.decided_by == "raw" for v in result.verdicts)
    assert not result.by_status(IMPROVED)
    assert {v.key[2] for v in result.by_status(REGRESSED)} == {"gevent"}
    assert any("same machine" in n for n in result.notes)


def test_a_machine_whose_speed_swings_within_the_session_cannot_judge_small_changes():
    # the calibration at the session's start and end differed by 30%: a 15% change is unsure
    result = gate.compare(
        baseline_of(1), run(2, slower={"gevent": 1.15, "uvloop": 1.6}), meta(swing=0.30)
    )
    by_backend = {v.key[2]: v for v in result.verdicts if v.key[0] == "ring"}
    assert by_backend["gevent"].status == INCONCLUSIVE and "moved 30%" in by_backend["gevent"].note
    assert (
        by_backend["uvloop"].status == REGRESSED
    )  # +60% is beyond what the machine's swing explains
    assert ("ring", by_backend["gevent"].key[1], "gevent") in gate.suspects(result)


def test_same_machine_within_tolerance_is_judged_raw():
    result = gate.compare(baseline_of(1), run(2, slower={"uvloop": 1.15}), meta(ns=275.0))
    v = result.by_status(REGRESSED)[0]
    assert v.decided_by == "raw"
    assert v.normalized_change == pytest.approx((1 + v.raw_change) / (275 / 270) - 1)


def test_missing_calibration_falls_back_to_raw():
    cur = meta()
    cur["calibration"] = None
    result = gate.compare(baseline_of(1), run(2), cur)
    assert all(v.decided_by == "raw" for v in result.verdicts)
    assert any("raw" in n for n in result.notes)


def test_a_burst_that_a_second_session_does_not_reproduce_is_not_a_regression():
    doc = baseline_of(1)
    burst = run(2, slower={"gevent": 1.3})  # every round of one session hit by interference
    first = gate.compare(doc, burst, meta())
    suspects = gate.suspects(first)
    assert {k[2] for k in suspects} == {"gevent"}
    second_session = {r.key: r for r in run(3) if r.key in suspects}
    judged = gate.faster_sessions(burst, second_session)
    # the faster one's rounds
    assert all(r.samples == second_session[r.key].samples for r in judged if r.key in suspects)
    result = gate.reproduce(first, gate.compare(doc, judged, meta()), second_session)
    assert not result.failed
    notes = [v.note for v in result.verdicts if v.key in suspects]
    assert notes and all(
        n.startswith("not reproduced: the first session measured +") for n in notes
    )
    assert (
        f"{len(suspects)} suspected regression(s) re-measured in a second session (their tests "
        "run again in a fresh process), 0 reproduced" in result.notes
    )


def test_benchmarks_measured_again_only_because_every_one_is_are_not_called_suspects():
    # --concurrency-remeasure=every: the unchanged ones had nothing to reproduce, and their
    # verdicts must not say a second session "did not confirm" them
    doc = baseline_of(1)
    burst = run(2, slower={"gevent": 1.3})
    first = gate.compare(doc, burst, meta())
    suspects = set(gate.suspects(first))
    every = {r.key: r for r in run(3)}
    assert suspects and set(every) - suspects
    result = gate.reproduce(
        first, gate.compare(doc, gate.faster_sessions(burst, every), meta()), every
    )
    for v in result.verdicts:
        assert ("not reproduced" in (v.note or "")) == (v.key in suspects), (v.key, v.note)
    assert (
        f"{len(suspects)} suspected regression(s) re-measured in a second session (their tests "
        f"run again in a fresh process), 0 reproduced; {len(every) - len(suspects)} other "
        "benchmark(s) measured again (--concurrency-remeasure=every), each judged on the "
        "faster of its two sessions" in result.notes
    )
    steady = run(2)  # no suspect at all: the summary says only what was measured again
    first = gate.compare(doc, steady, meta())
    assert not gate.suspects(first)
    result = gate.reproduce(
        first, gate.compare(doc, gate.faster_sessions(steady, every), meta()), every
    )
    assert result.notes[0] == (
        f"{len(every)} benchmark(s) measured again (--concurrency-remeasure=every), each "
        "judged on the faster of its two sessions"
    )


def test_a_real_slowdown_reproduces_and_still_fails():
    doc = baseline_of(1)
    slow = run(2, slower={"gevent": 1.15})
    first = gate.compare(doc, slow, meta())
    suspects = gate.suspects(first)
    again = {r.key: r for r in run(3, slower={"gevent": 1.15}) if r.key in suspects}
    result = gate.reproduce(
        first, gate.compare(doc, gate.faster_sessions(slow, again), meta()), again
    )
    assert result.failed and {v.key[2] for v in result.by_status(REGRESSED)} == {"gevent"}
    assert all("reproduced by a second session" in v.note for v in result.by_status(REGRESSED))


def test_a_change_within_the_gap_of_the_runs_own_two_processes_is_inconclusive_on_one_session():
    # unchanged FastAPI on a quiet machine: +22.7% in the first process, +10.2% in the second,
    # against one baseline session: the processes of the same code were as far apart as the change
    doc = baseline_of(1)
    first_process = run(2, slower={"gevent": 1.25})
    first = gate.compare(doc, first_process, meta())
    suspects = gate.suspects(first)
    again = {r.key: r for r in run(3, slower={"gevent": 1.10}) if r.key in suspects}
    result = gate.reproduce(
        first, gate.compare(doc, gate.faster_sessions(first_process, again), meta()), again
    )
    assert not result.failed
    gevent = [v for v in result.verdicts if v.key in suspects and v.key[2] == "gevent"]
    assert gevent and all(v.status == INCONCLUSIVE for v in gevent)
    assert all("two processes of the same code differ by" in v.note for v in gevent)
    assert all("one baseline session cannot tell" in v.note for v in gevent)
    # learned drift (3 sessions) keeps the rule out: the threshold already holds the drift
    three, _ = gate.add_session(document_from_records(run(4), meta()), baseline_of(1), run(4))
    three, _ = gate.add_session(document_from_records(run(5), meta()), Baseline.of(three), run(5))
    doc3 = Baseline.of(three)
    first = gate.compare(doc3, first_process, meta())
    result = gate.reproduce(
        first, gate.compare(doc3, gate.faster_sessions(first_process, again), meta()), again
    )
    assert all("two processes of the same code" not in (v.note or "") for v in result.verdicts)


def test_the_least_disturbed_calibration_counts():
    from pytest_concurrency.gate import calibrate

    start, end = (
        {"version": 1, "ns_per_iteration": 480.0},
        {"version": 1, "ns_per_iteration": 260.0},
    )
    assert calibrate.fastest(start, end) is end
    assert calibrate.fastest(None, start) is start
    assert calibrate.fastest(None, None) is None


# -- baselines of several sessions (history.py) -------------------------------------------


def sessions_doc(speeds, first_seed: int = 10, ns=None, slower=None) -> dict:
    """A baseline saved once per entry of ``speeds`` (oldest first), as repeated saves do;
    ``slower``: each session's backends slower than the others (run's ``slower``)."""
    doc = None
    for i, speed in enumerate(speeds):
        session_meta = meta(ns=ns[i] if ns else 270.0)
        recs = run(first_seed + i, speed=speed, slower=slower[i] if slower else None)
        doc = history.merge(
            document_from_records(recs, session_meta),
            doc and Baseline.of(doc),
            keep=len(speeds),
        )
    return doc


def test_one_unlucky_baseline_session_is_outvoted_by_the_others():
    # the latest session ran 9% fast (a quiet spell); the four before it ran at the usual speed
    lucky = sessions_doc([1.0, 1.0, 1.0, 1.0, 0.91])
    assert history.count(lucky) == 5
    assert not gate.compare(Baseline.of(lucky), run(2), meta()).failed
    alone = Baseline.of(document_from_records(run(14, speed=0.91), meta()))
    assert gate.compare(alone, run(2), meta()).failed  # what a single-session baseline says


def test_drift_between_sessions_widens_that_benchmarks_threshold():
    drifting = sessions_doc([1.0, 1.12, 0.9, 1.08, 0.95])
    result = gate.compare(Baseline.of(drifting), run(2, slower={"gevent": 1.3}), meta())
    v = next(v for v in result.verdicts if v.key[2] == "gevent")
    # +30% is beyond the 7% set: the widened threshold may not call it "unchanged"
    assert v.status == INCONCLUSIVE and v.too_noisy and v.sessions == 5
    assert 0.05 < v.drift < 0.15 and v.threshold > 0.3 and v.base_threshold == pytest.approx(0.07)
    assert v.note.startswith(f"baseline too noisy (threshold widened to +{v.threshold:.0%} by the ")
    assert "re-record the baseline" in v.note
    assert "median drifts" in v.note and "between the baseline's 5 sessions" in v.note
    assert not result.failed and result.too_noisy == [
        v for v in result.verdicts if v.key[2] == "gevent"
    ]
    assert "inconclusive as the baseline is too noisy" in result.summary
    assert any(
        line.startswith("Inconclusive")
        and "ring[m=1000,n=50] on gevent" in line
        and "baseline too noisy" in line
        for line in shown(result)
    )
    quiet = next(v for v in result.verdicts if v.key[2] == "uvloop")
    assert (
        quiet.status == UNCHANGED and quiet.threshold > 0.2
    )  # within 7%: unchanged, its threshold shown
    assert any(
        "ring[m=1000,n=50] on uvloop" in line and "widened from 7%" in line
        for line in shown(result)
    )

    steady = gate.compare(
        Baseline.of(sessions_doc([1.0] * 5)), run(2, slower={"gevent": 1.3}), meta()
    )
    v = next(v for v in steady.verdicts if v.key[2] == "gevent")
    assert v.status == REGRESSED and v.threshold == pytest.approx(0.07) and v.drift < 0.02


def test_one_benchmark_drifting_alone_names_its_sessions_and_asks_for_a_new_baseline():
    alone = [{"gevent": f} for f in (1.0, 1.25, 0.8, 1.2, 0.85)]
    drifting = sessions_doc([1.0] * 5, slower=alone)
    result = gate.compare(Baseline.of(drifting), run(2, slower={"gevent": 1.2}), meta())
    v = next(v for v in result.verdicts if v.key[2] == "gevent")
    assert v.status == INCONCLUSIVE and v.too_noisy and v.threshold > 0.2
    assert (
        "widened to" in v.note
        and " of 5 saves, at " in v.note
        and "re-record the baseline" in v.note
    )
    steady = next(v for v in result.verdicts if v.key[2] == "uvloop")
    assert steady.status == UNCHANGED and not steady.widened_by


def test_a_benchmark_whose_few_sessions_agreed_by_luck_is_judged_at_its_suites_drift():
    # three sessions each: two backends' benchmarks drift about 6% between sessions, gevent's
    # sessions happen to agree; +10% on gevent is within what this suite's sessions drift
    speeds = [{"uvloop": u, "threading": t} for u, t in ((1.0, 1.0), (1.06, 0.94), (0.95, 1.05))]
    base = Baseline.of(sessions_doc([1.0] * 3, slower=speeds))
    now = run(2, slower={"gevent": 1.1})
    result = gate.compare(base, now, meta())
    v = next(v for v in result.verdicts if v.key[2] == "gevent")
    assert v.status == INCONCLUSIVE and v.too_noisy and v.drift < 0.02
    assert v.widened_by == gate.SUITE_DRIFT and "typical benchmark" in v.note
    assert "inconclusive within what this suite's sessions drift" in result.summary
    assert "re-record" not in result.summary and "alpha 0.01, raw)" in result.summary
    # alone (too few benchmarks to say what is typical), its own lucky sessions decide
    gevent_only = [r for r in now if r.backend == "gevent"]
    alone = gate.compare(base, gevent_only, meta()).by_status(REGRESSED)
    assert {v.key for v in alone} == {r.key for r in gevent_only}


def test_a_benchmark_left_with_two_sessions_is_judged_at_its_suites_drift_too():
    # gevent's third session ran 40% slow (a neighbour): it is left out, two sessions remain,
    # too few for a drift of their own; the suite's says how far a session lands
    speeds = [{"uvloop": u, "threading": t} for u, t in ((1.0, 1.0), (1.06, 0.94), (0.95, 1.05))]
    speeds[2]["gevent"] = 1.4
    base = Baseline.of(sessions_doc([1.0] * 3, slower=speeds))
    now = run(2, slower={"gevent": 1.1})
    v = next(v for v in gate.compare(base, now, meta()).verdicts if v.key[2] == "gevent")
    assert "left out as disturbed: the 3rd of 3 saves, at " in v.note and v.sessions == 2
    assert v.status == INCONCLUSIVE and v.widened_by == gate.SUITE_DRIFT, v.note
    # alone, two sessions learn no drift (what decides then is the span of its three sessions)
    alone = gate.compare(base, [r for r in now if r.backend == "gevent"], meta())
    assert [v.drift for v in alone.verdicts if v.key[2] == "gevent"] == [None, None]


def test_a_benchmark_left_with_one_session_is_judged_at_its_suites_drift():
    # yarl's test_url_build_access_raw_path: two of its three sessions left out as disturbed, an
    # A/A judged on the third at 7% read +13.4% in two processes and failed the build
    speeds = [{"uvloop": u, "threading": t} for u, t in ((1.0, 1.0), (1.06, 0.94), (0.95, 1.05))]
    doc = sessions_doc([1.0] * 3, slower=speeds)
    for entry in doc["pytest_concurrency"]["history"]:  # the two earlier sessions, flagged so
        for b in entry["benchmarks"]:
            if b["backend"] == "gevent":
                b["disturbed"] = "flagged when saved"
    now = run(2, slower={"gevent": 1.1})
    v = next(
        v for v in gate.compare(Baseline.of(doc), now, meta()).verdicts if v.key[2] == "gevent"
    )
    assert v.sessions == 1 and v.drift is None and v.widened_by == gate.SUITE_DRIFT, v.note
    assert v.status == INCONCLUSIVE and "one baseline session left" in v.note and v.threshold > 0.1


def test_fewer_than_three_sessions_learn_no_drift_and_say_how_to_get_it():
    result = gate.compare(Baseline.of(sessions_doc([1.0, 1.0])), run(2), meta())
    assert all(v.drift is None and v.sessions == 2 for v in result.verdicts)
    assert any("holds 2 session(s): save 1 more" in n for n in result.notes)


def test_machine_speed_is_the_typical_sessions_not_the_latest():
    # the latest session's calibration was disturbed (400 ns); the other two say 270 ns
    doc = sessions_doc([1.0, 1.0, 1.0], ns=[270.0, 270.0, 400.0])
    result = gate.compare(Baseline.of(doc), run(2), meta(ns=270.0))
    assert result.calibration_ratio == pytest.approx(1.0)
    assert all(v.decided_by == "raw" for v in result.verdicts) and not result.failed


# -- other processes' load ----------------------------------------------------------------


def loaded(recs, foreign: float, kind: str = "light") -> list[Record]:
    for r in recs:
        r.extra.update(foreign_cpu=foreign, task_kind=kind)
    return recs


def load_case(kind: str, then: float, now: float, cpus: int):
    doc = document_from_records(loaded(run(1), then, kind), meta())
    current = meta()
    current["cpu_count"] = cpus
    return gate.compare(
        Baseline.of(doc), loaded(run(2, slower={"gevent": 1.3}), now, kind), current
    )


def test_a_busier_machine_makes_thread_and_process_slowdowns_inconclusive():
    for kind in ("thread", "process"):
        result = load_case(kind, then=0.02, now=1.0, cpus=16)
        assert not result.failed
        v = next(v for v in result.verdicts if v.key[2] == "gevent")
        assert v.status == INCONCLUSIVE
        assert (
            "machine was busier than for the baseline" in v.note
            and f"{kind}s need free cores" in v.note
        )
        assert v.key in gate.suspects(result)  # a second session, maybe quieter, decides


def test_a_busier_machine_spares_light_tasks_unless_it_leaves_them_no_free_core():
    assert load_case("light", then=0.02, now=1.0, cpus=16).failed  # 15 cores were still free
    starved = load_case("light", then=0.02, now=1.0, cpus=2)
    assert not starved.failed
    assert any("less than one free core of 2" in v.note for v in starved.verdicts)


def test_the_same_load_on_both_sides_is_judged_normally_while_it_leaves_a_free_core():
    assert load_case("thread", then=1.0, now=1.05, cpus=4).failed
    # without a core of its own, a process's speed is the scheduler's placement, however busy
    # the baseline's machine was: a slowdown there is inconclusive, never a red build
    starved = load_case("thread", then=1.0, now=1.05, cpus=2)
    assert not starved.failed
    v = next(v for v in starved.verdicts if v.key[2] == "gevent")
    assert v.status == INCONCLUSIVE and "less than one free core of 2" in v.note
    assert not load_case("light", then=1.0, now=1.05, cpus=2).failed


@pytest.mark.parametrize(
    "now, status", [(1.3, INCONCLUSIVE), (1.8, INCONCLUSIVE), (2.5, INCONCLUSIVE), (2.7, REGRESSED)]
)
def test_one_outlying_session_does_not_widen_the_threshold(now, status):
    # one session 60% slow with tight rounds: left out of the drift and the center, but a speed
    # this code ran at, so a session within it, or within 60% past it (a process's speeds are that
    # far apart, and five sessions need not have seen them all), is no evidence of a change
    result = gate.compare(
        Baseline.of(sessions_doc([1.0, 1.0, 1.6, 1.0, 1.0])), run(2, slower={"gevent": now}), meta()
    )
    v = next(v for v in result.verdicts if v.key[2] == "gevent")
    assert v.status == status and v.threshold == pytest.approx(0.07)
    assert ("within what the baseline's own 5 sessions" in v.note) == (status == INCONCLUSIVE)


def _counted(workload: str, count: float, waits: bool) -> Record:
    return Record(
        workload,
        {"tasks": 10},
        "gevent",
        [count, count * 1.0001, count * 0.9999],
        ops=10,
        backend_version="25.1.0",
        extra={"measure": "instructions", "waits": waits},
    )


@pytest.mark.parametrize("change, status", [(1.05, UNCHANGED), (1.15, REGRESSED)])
def test_counts_of_a_waiting_workload_are_judged_beyond_their_floor(change, status):
    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    base = document_from_records(
        [_counted("io", 1e6, waits=True), _counted("ring", 1e6, waits=False)], counted_meta
    )
    now = [_counted("io", 1e6 * change, waits=True), _counted("ring", 1e6 * 1.05, waits=False)]
    result = gate.compare(Baseline.of(base), now, counted_meta)
    io, ring = sorted(result.verdicts, key=lambda v: v.key[0])
    assert io.status == status and io.threshold == pytest.approx(0.10)
    assert "this workload waits" in io.note
    assert ring.status == REGRESSED and ring.threshold == pytest.approx(
        measure.instrument("instructions").default_threshold
    )


def _in_layouts(count: float, *others: float) -> Record:
    rec = _counted("ring", count, waits=False)
    rec.extra["layouts"] = [[x, x * 1.0001, x * 0.9999] for x in others]
    return rec


def test_counts_in_several_layouts_are_judged_on_their_median_and_kept_with_the_baseline():
    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    base = document_from_records(
        [_in_layouts(1e6, 1.001e6, 1.028e6)], counted_meta
    )  # one landed badly
    assert baseline.check(base, "base.json") is None
    parsed = Baseline.of(base)
    (session,) = parsed.sessions[_counted("ring", 1, False).key]
    assert [len(rounds) for rounds in session.layouts] == [3, 3]
    (same,) = gate.compare(
        parsed,
        [_in_layouts(1.028e6, 0.999e6, 1.0005e6)],
        counted_meta,
        gate.GateSettings(threshold=0.01),
    ).verdicts
    # one session a side, the same layouts: layout N pairs with layout N, and two layouts that
    # moved 2.8% each way while the median did not are inconclusive, not "unchanged"
    assert same.status == INCONCLUSIVE and same.current_median == pytest.approx(1.0005e6), same
    assert "layout by layout +2.80%, -0.20%, -2.68%: 2 of 3 layouts moved beyond 1%" in same.note
    assert "layouts disagree by 2.80%" in same.note
    (aa,) = gate.compare(  # the same counts in the same layouts, one of which landed badly
        parsed,
        [_in_layouts(1e6, 1.001e6, 1.028e6)],
        counted_meta,
        gate.GateSettings(threshold=0.01),
    ).verdicts
    assert aa.status == UNCHANGED and aa.change == pytest.approx(0.0, abs=1e-9), aa
    (stepped,) = gate.compare(  # +1.5%, and one of the head's layouts stepped back by 2%
        parsed,
        [_in_layouts(1.015e6, 1.016e6, 1.028e6 * 1.015 * 0.98)],
        counted_meta,
        gate.GateSettings(threshold=0.01),
    ).verdicts
    assert stepped.status == REGRESSED and stepped.change == pytest.approx(0.015, abs=1e-3)
    (slower,) = gate.compare(
        parsed,
        [_in_layouts(1.02e6, 1.021e6, 1.05e6)],
        counted_meta,
        gate.GateSettings(threshold=0.01),
    ).verdicts
    assert slower.status == REGRESSED and slower.change == pytest.approx(
        1.021 / 1.001 - 1, abs=1e-4
    )
    result = gate.compare(
        parsed, [_in_layouts(1.012e6, 1.011e6, 1.04e6)], counted_meta
    )  # the default threshold
    (v,) = result.verdicts
    assert v.status == REGRESSED and v.threshold == pytest.approx(
        0.01
    )  # three layouts a side: 1%, not 2%
    assert "(threshold 1%, instructions, exact)" in result.summary
    finer = gate.compare(  # a threshold under 1% reads as given, not rounded to "0%"
        parsed,
        [_in_layouts(1.008e6, 1.007e6, 1.03e6)],
        counted_meta,
        gate.GateSettings(threshold=0.005),
    )
    assert finer.verdicts[0].status == REGRESSED
    assert "(threshold 0.5%, instructions, exact)" in finer.summary, finer.summary
    one = document_from_records([_counted("ring", 1.001e6, waits=False)], counted_meta)
    result = gate.compare(Baseline.of(one), [_in_layouts(1.012e6, 1.011e6, 1.04e6)], counted_meta)
    assert [(v.status, v.threshold) for v in result.verdicts] == [(UNCHANGED, pytest.approx(0.02))]
    mixed = document_from_records(
        [_in_layouts(1e6, 1.001e6, 1.028e6), _counted("chain", 1e6, waits=False)], counted_meta
    )  # a workload case beside a plain test
    both = gate.compare(
        Baseline.of(mixed),
        [_in_layouts(1e6, 1e6, 1e6), _counted("chain", 1e6, waits=False)],
        counted_meta,
    )
    assert "(thresholds 1%, 2%, instructions, exact)" in both.summary
    again, _ = gate.add_session(
        document_from_records([_in_layouts(1e6, 1e6, 1e6)], counted_meta),
        parsed,
        [_in_layouts(1e6, 1e6, 1e6)],
    )
    kept = Baseline.of(again).sessions[_counted("ring", 1, False).key]
    assert [len(s.layouts) for s in kept] == [2, 2]


@pytest.mark.parametrize(
    "second, threshold", [(1.0009e6, 0.01), (0.9991e6, 0.01), (1.0011e6, 0.02), (0.998e6, 0.02)]
)
def test_two_layouts_that_agree_stand_for_three(second, threshold):
    """~0 s: a counted session's third layout counts only the tests its first two disagree on
    (roles/forked_layouts.py), as the median of three lies between any two: two within 0.1%
    (measure/layouts.py ``AGREE``) are judged at the 1% of three layouts, two farther apart at
    the 2% of fewer, on either side."""
    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    three = document_from_records([_in_layouts(1e6, 1e6, 1e6)], counted_meta)
    two = document_from_records([_in_layouts(1e6, second)], counted_meta)
    for base, current in ((three, _in_layouts(1e6, second)), (two, _in_layouts(1e6, 1e6, 1e6))):
        (v,) = gate.compare(Baseline.of(base), [current], counted_meta).verdicts
        assert v.threshold == pytest.approx(threshold), (second, v)


@pytest.mark.parametrize("layouts", [[[]], [[1.0, "x"]], {"a": [1.0]}, [[-1.0]]])
def test_a_baseline_with_layouts_that_are_not_rounds_is_refused_by_name(layouts):
    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    rec = _counted("ring", 1e6, waits=False)
    rec.extra["layouts"] = layouts
    with pytest.raises(
        baseline.BaselineError,
        match=r"\('ring\[tasks=10\] on gevent'\)\.extra_info\.layouts",
    ):
        baseline.check(document_from_records([rec], counted_meta), "base.json")


# -- disturbed baseline sessions (the misreports) ---------------------------------

RING = ("ring", {"n": 50, "m": 1000})


def one(
    seed: int, backend: str, scale: float = 1.0, sigma: float = 0.03, rounds: int = 20
) -> list[Record]:
    """One benchmark's session: ``rounds`` samples around ``scale`` ms, lognormal ``sigma``."""
    rng = random.Random(seed)
    samples = [scale * 1e-3 * rng.lognormvariate(0, sigma) for _ in range(rounds)]
    return [Record(*RING, backend, samples, backend_version=BACKENDS.get(backend, "3.11.7"))]


def saved(sessions, backend: str, keep: int = 5, code=None) -> tuple[dict, list[str]]:
    """A baseline saved once per (scale, sigma) of ``sessions`` (oldest first), as the plugin
    saves (``gate.add_session``), with what the saves said; ``code``: each session's identity."""
    doc, said = None, []
    for i, (scale, sigma) in enumerate(sessions):
        recs = one(40 + i, backend, scale, sigma)
        session_meta = {**meta(), **({"code": code} if code else {})}
        doc, messages = gate.add_session(
            document_from_records(recs, session_meta),
            doc and Baseline.of(doc),
            recs,
            keep=keep,
        )
        said += messages
    return doc, said


def test_one_disturbed_session_of_three_never_hides_a_real_slowdown():
    # misreport 1: one disturbed session (50% slow, wide) widened the threshold to +223%
    # silently, and a real +70% on asyncio read "unchanged"
    doc = None  # stored as they were: no session dropped on saving
    for i, (scale, sigma) in enumerate([(1.0, 0.03), (1.5, 0.3), (1.0, 0.03)]):
        doc = history.merge(
            document_from_records(one(40 + i, "asyncio", scale, sigma), meta()),
            doc and Baseline.of(doc),
            5,
        )
    result = gate.compare(Baseline.of(doc), one(99, "asyncio", 1.7), meta())
    v = result.verdicts[0]
    assert v.status in (REGRESSED, INCONCLUSIVE), (v.status, v.threshold, v.note)
    assert v.status != UNCHANGED and v.change > 0.5
    line = next(line for line in shown(result) if "ring[m=1000,n=50] on asyncio" in line)
    assert "disturbed" in line and "the 2nd of 3 saves, at " in line


def test_one_disturbed_session_never_drops_the_good_ones():
    # misreport 2: a disturbed third session read as "changed speed" dropped the two good
    # ones ("measured other code"); a real +47% on gevent then read "improved -14.7%"
    doc, said = saved([(1.0, 0.03), (1.0, 0.03), (1.72, 0.1)], "gevent")
    assert not any("were dropped" in m for m in said), said
    assert history.count(doc) == 3
    result = gate.compare(Baseline.of(doc), one(99, "gevent", 1.47), meta())
    v = result.verdicts[0]
    assert v.status in (REGRESSED, INCONCLUSIVE), (v.status, v.change, v.note)
    assert v.change > 0.3


def test_a_new_speed_confirmed_by_a_second_session_restarts_the_history():
    # the first session at a new speed is flagged; the second confirms it: the code changed
    doc, said = saved([(1.0, 0.03), (1.0, 0.03), (1.5, 0.03)], "gevent")
    assert any("flagged disturbed" in m for m in said) and not any(
        "were dropped" in m for m in said
    )
    recs = one(60, "gevent", 1.5)
    doc, said = gate.add_session(document_from_records(recs, meta()), Baseline.of(doc), recs)
    assert any("confirmed by a second session" in m and "were dropped" in m for m in said), said
    assert len(Baseline.of(doc).sessions[recs[0].key]) == 1
    assert statuses(gate.compare(Baseline.of(doc), one(99, "gevent", 1.5), meta())) == {
        recs[0].key: UNCHANGED
    }


def test_a_new_speed_on_the_same_clean_commit_keeps_the_earlier_sessions():
    # yarl's test_url_joinpath_with_truediv ran 258, 136, 132 µs in three saves of one release:
    # the third "confirmed" the second and dropped the first; an A/A at 250 µs then failed
    commit = {"commit": "1a2b3c4d5e", "dirty": False}
    doc, said = saved([(1.9, 0.03), (1.0, 0.03), (1.0, 0.03)], "gevent", code=commit)
    assert not any("were dropped" in m for m in said), said
    assert sum("of the same commit" in m for m in said) == 2, said
    assert [len(s) for s in Baseline.of(doc).sessions.values()] == [3]
    [v] = gate.compare(Baseline.of(doc), one(99, "gevent", 1.85), meta()).verdicts
    assert v.status != REGRESSED, (v.status, v.change, v.note)
    # a dirty tree's edits are not in its identity: there the new speed is the code's
    dirty = {**commit, "dirty": True}
    doc, said = saved([(1.9, 0.03), (1.0, 0.03), (1.0, 0.03)], "gevent", code=dirty)
    assert any("confirmed by a second session" in m for m in said), said


def test_a_session_whose_rounds_spread_far_wider_is_left_out():
    doc = None
    for i, (scale, sigma) in enumerate([(1.0, 0.03), (1.3, 0.4)]):
        doc = history.merge(
            document_from_records(one(40 + i, "asyncio", scale, sigma), meta()),
            doc and Baseline.of(doc),
            5,
        )
    v = gate.compare(Baseline.of(doc), one(99, "asyncio", 1.0), meta()).verdicts[0]
    assert v.status == UNCHANGED and v.sessions == 1
    assert (
        "left out as disturbed: the 2nd of 2 saves, at " in v.note
        and "(its rounds spread" in v.note
    )


def test_sessions_of_different_code_are_named():
    previous = None
    for i, code in enumerate(
        [{"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": True}]
    ):
        doc = document_from_records(one(40 + i, "asyncio"), {**meta(), "code": code})
        doc["datetime"] = f"2026-11-29T0{8 + i}:12:05.123456+00:00"
        previous = Baseline.of(history.merge(doc, previous, 5))
    notes = gate.compare(previous, one(99, "asyncio"), meta()).notes
    assert (
        "baseline sessions measured different code: save 1 of 2 (2026-11-29 08:12:05 UTC): "
        "aaaaaaaaaa; gevent 25.1.0, greenlet 3.1.1 / save 2 of 2 (2026-11-29 09:12:05 UTC): "
        "bbbbbbbbbb (dirty); gevent 25.1.0, greenlet 3.1.1"
    ) in notes, notes


def test_a_disturbed_session_is_named_by_its_place_in_the_order_of_saving_and_its_time():
    """Sessions were numbered newest first, silently: the third save, flagged disturbed, was named
    "baseline session 1" by the next judgement, and a user counting saves 1, 2, 3 looked at the
    first. Each save here at a time of its own, the first one 60% slow."""
    previous = None
    for i, scale in enumerate([1.6, 1.0, 1.0, 1.0]):
        doc = document_from_records(one(40 + i, "asyncio", scale), meta())
        doc["datetime"] = f"2026-11-29T08:1{i}:05.500000+00:00"
        doc = history.merge(doc, previous, 5)
        previous = Baseline.of(doc)
    v = gate.compare(previous, one(99, "asyncio"), meta()).verdicts[0]
    assert "left out as disturbed: the 1st of 4 saves, at 2026-11-29 08:10:05 UTC (its median" in (
        v.note
    ), v.note
    # saved after them, a session at another speed says when it was saved: the name it goes by
    recs = one(60, "asyncio", 1.5)
    doc = document_from_records(recs, meta())
    doc["datetime"] = "2026-11-29T08:14:05+00:00"
    _, said = gate.add_session(doc, previous, recs)
    assert any(
        "this session (saved 2026-11-29 08:14:05 UTC) is flagged disturbed" in m for m in said
    ), said


def test_a_session_records_its_code_identity(tmp_path):
    import subprocess

    assert baseline.code_identity(tmp_path) == {}  # no repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "a"], cwd=tmp_path, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / "baseline.json").write_text("{}")  # untracked: still clean
    assert baseline.code_identity(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "a.py").write_text("x = 2\n")
    assert baseline.code_identity(tmp_path) == {"commit": head, "dirty": True}


def test_a_faster_run_that_a_noisy_baseline_hides_is_inconclusive_but_never_fails():
    drifting = sessions_doc([1.0, 1.12, 0.9, 1.08, 0.95])
    result = gate.compare(
        Baseline.of(drifting), run(2, slower={"gevent": 0.85}), meta()
    )  # 15% faster
    v = next(v for v in result.verdicts if v.key[2] == "gevent")
    assert v.status == INCONCLUSIVE and "baseline too noisy" in v.note
    assert not v.too_noisy and not result.too_noisy and not result.failed


def test_a_slowdown_only_a_noisy_baseline_hides_passes_and_says_so():
    # unchanged code drifts so: 8 of 10 A/A sessions of a plain test once exited 6 on it
    from pytest_concurrency import session_end
    from pytest_concurrency.gate.verdicts import GateResult, Verdict

    noisy = Verdict(("ring", "n=1", "gevent"), INCONCLUSIVE, too_noisy=True)
    regressed = Verdict(("ring", "n=1", "asyncio"), REGRESSED)
    outcome = session_end.SessionOutcome([], gate=GateResult(verdicts=[noisy]))
    assert outcome.status(0) == 0 and GateResult(verdicts=[noisy]).too_noisy == [noisy]
    assert (
        session_end.SessionOutcome([], gate=GateResult(verdicts=[noisy, regressed])).status(0) == 1
    )
    assert session_end.SessionOutcome([], gate=GateResult()).status(0) == 0


def test_counts_that_changed_restart_at_once():
    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    doc = None
    for count in (1e6, 1e6, 1.3e6):
        recs = [_counted("ring", count, waits=False)]
        doc, said = gate.add_session(
            document_from_records(recs, counted_meta), doc and Baseline.of(doc), recs
        )
    assert any(
        "changed speed (+30.0%): its earlier baseline sessions were dropped" in m for m in said
    ), said
    assert len(Baseline.of(doc).sessions[recs[0].key]) == 1


def test_a_wide_session_beside_ones_that_repeat_exactly_is_named_without_error():
    from pytest_concurrency.gate import sessions

    steady = history.BaselineSession([1.0] * 6, None)
    wide = history.BaselineSession([0.5, 0.8, 0.95, 1.05, 1.5, 2.0], None)
    assert sessions.disturbed([wide, steady, steady], 0.07) == {
        0: "its rounds spread 70%, far beyond the other sessions' 0%"
    }
    assert sessions.disturbed([wide, wide], 0.07) == {}  # never all of them


# -- a counted baseline knows what measured it ----------------------------------------------

MEASURING = {
    "plugin": "0.2.0",
    "code": "1f2e3d4c5b6a7980",
    "python_build": "3.11.7 main Nov 1 2026 GCC 12.2.0",
    "valgrind": "3.19.0",
}


def _counted_meta(**measuring) -> dict:
    return {
        **meta(),
        "measure": "instructions",
        "calibration": None,
        "measuring": {**MEASURING, **measuring},
    }


@pytest.mark.parametrize(
    "part, new, named",
    [
        ("code", "0000000000000000", "its measuring code 1f2e3d4c5b6a7980 -> 0000000000000000"),
        ("plugin", "0.3.0", "pytest-concurrency 0.2.0 -> 0.3.0"),
        ("valgrind", "3.20.0", "valgrind 3.19.0 -> 3.20.0"),
        ("python_build", "3.11.7 main Dec 1 2026 GCC 13.1.0", "the Python build"),
    ],
)
def test_a_changed_measuring_side_asks_for_a_new_baseline_not_a_verdict(part, new, named):
    base = document_from_records([_counted("ring", 1e6, waits=False)], _counted_meta())
    result = gate.compare(
        Baseline.of(base), [_counted("ring", 1.3e6, waits=False)], _counted_meta(**{part: new})
    )
    assert (
        result.rerecord
        and named in result.rerecord
        and "record the baseline again" in result.rerecord
    )
    assert result.verdicts == [] and not result.failed  # neither a regression nor a pass
    assert tables.headline(result).startswith("Re-record the baseline: ")


def test_the_same_measuring_side_judges_and_other_library_versions_do_not_ask_for_a_new_baseline():
    base = document_from_records([_counted("ring", 1e6, waits=False)], _counted_meta())
    now = {
        **_counted_meta(),
        "libraries": {"greenlet": "3.2.0", "gevent": "25.1.0"},
    }  # the user's upgrade
    result = gate.compare(Baseline.of(base), [_counted("ring", 1.3e6, waits=False)], now)
    assert result.rerecord is None and list(statuses(result).values()) == [REGRESSED]


def test_a_counted_baseline_from_another_directory_judges_and_says_counts_follow_the_directory():
    base = document_from_records(
        [_counted("ring", 1e6, waits=False)], {**_counted_meta(), "directory": "/a/x"}
    )
    moved = gate.compare(
        Baseline.of(base),
        [_counted("ring", 1.3e6, waits=False)],
        {**_counted_meta(), "directory": "/b/longer"},
    )
    assert moved.rerecord is None and list(statuses(moved).values()) == [
        REGRESSED
    ]  # judged, not refused
    (said,) = [n for n in moved.notes if "another directory" in n]
    assert (
        "('/a/x' -> '/b/longer')" in said
        and "record the baseline in the directory it is judged in" in said
    )
    same = gate.compare(
        Baseline.of(base),
        [_counted("ring", 1e6, waits=False)],
        {**_counted_meta(), "directory": "/a/x"},
    )
    assert not any("another directory" in n for n in same.notes)
    assert measure.instrument("instructions").session_meta()["directory"] == os.getcwd()


def test_a_counted_baseline_that_does_not_say_what_measured_it_is_recorded_again():
    old = {k: v for k, v in _counted_meta().items() if k != "measuring"}
    base = document_from_records([_counted("ring", 1e6, waits=False)], old)
    result = gate.compare(Baseline.of(base), [_counted("ring", 1e6, waits=False)], _counted_meta())
    assert "does not say what measured it" in result.rerecord


def test_the_measuring_side_hashes_the_code_a_measured_process_runs():
    side = measure.measuring_side()
    assert len(side["code"]) == 16 and side["python_build"].startswith(platform.python_version())
    assert measure.measuring_side() == side  # stable
    assert measure.instrument("instructions").session_meta()["measuring"]["code"] == side["code"]


def test_the_session_exits_seven_when_the_baseline_must_be_recorded_again():
    from pytest_concurrency import session_end
    from pytest_concurrency.gate.verdicts import GateResult

    outcome = session_end.SessionOutcome(
        records=[], gate=GateResult(rerecord="the measuring side changed")
    )
    assert outcome.status(0) == Exit.RERECORD_BASELINE == 7


def test_new_and_missing_counted_benchmarks_read_in_instructions_not_seconds():
    from pytest_concurrency.report import tables

    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    base = document_from_records([_counted("ring", 2e6, waits=False)], counted_meta)
    result = gate.compare(Baseline.of(base), [_counted("chain", 3e6, waits=False)], counted_meta)
    lines = {v.status: tables.verdict_line(v) for v in result.verdicts}
    assert "2.00M instr" in lines[MISSING] and "3.00M instr" in lines[NEW], lines


def test_against_the_base_nothing_asks_to_save_or_refresh_a_baseline():
    """Counted against the base, the base's counts are a one-session baseline the run made: its
    improvements were headed "Faster than the baseline (baseline is stale; refresh it)" and a note
    asked to save two more sessions to a file the user never saw."""
    counted_meta = {**meta(), "measure": "instructions", "calibration": None}
    base = Baseline.of(
        document_from_records(
            [_counted("io", 1e6, waits=True), _counted("ring", 1e6, waits=False)], counted_meta
        )
    )
    now = [_counted("ring", 0.5e6, waits=False), _counted("switch", 1e6, waits=False)]
    result = gate.compare(base, now, counted_meta, against="the base side (lifx-async==1.2)")
    shown_lines = " ".join(" ".join([title, *lines]) for title, lines in tables.summary(result))
    assert "Faster than the base side ring[tasks=10] on gevent: " in shown_lines, shown_lines
    assert "not run by the base side (lifx-async==1.2)" in shown_lines
    assert "run by the base side (lifx-async==1.2) but not run now" in shown_lines
    for word in (
        "stale",
        "refresh",
        "holds 1 session",
        "save 2 more",
        "than the baseline",
        "a baseline from",
    ):
        assert word not in shown_lines, (word, shown_lines)
    # the same counts against a stored baseline still ask for it
    stored = " ".join(
        " ".join([t, *lines]) for t, lines in tables.summary(gate.compare(base, now, counted_meta))
    )
    assert "baseline is stale: refresh it" in stored and "holds 1 session(s)" in stored
