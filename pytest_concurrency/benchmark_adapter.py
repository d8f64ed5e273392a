"""pytest-benchmark's internals, touched here and nowhere else (tests/test_benchmark_adapter.py
checks it), so that an upgrade of it is checked in one module: its session (on the ``Config``),
the ``benchmark`` fixture's private attributes and a record's rounds. A fixture's ``stats`` is a
``Metadata`` (``None`` until it made its record), the session's ``benchmarks`` are those, and
each one's rounds are its ``.stats.data``. Layer 0, like exit_codes: it imports nothing of ours.
"""

from collections.abc import Callable
from typing import Any

# -- the session -------------------------------------------------------------------------------


def session(config) -> Any | None:
    """pytest-benchmark's session object, or None when its plugin is not active."""
    return getattr(config, "_benchmarksession", None)


def benchmarks(bs) -> list:
    return list(bs.benchmarks)


def measures(config) -> bool:
    """Whether pytest-benchmark measures in this session (on, and not --benchmark-disable)."""
    bs = session(config)
    return bs is not None and not bs.disabled


def at_least(bs, option: str, value: float) -> None:
    """One of its options (``min_rounds``, ``min_time``) raised to at least ``value``."""
    bs.options[option] = max(bs.options.get(option) or 0, value)


def use_timer(bs, timer: Callable[[], float]) -> None:
    from pytest_benchmark.utils import NameWrapper

    bs.options["timer"] = NameWrapper(timer)


def nothing_saved(config) -> None:
    """Its own saves (--benchmark-save, --benchmark-autosave, --benchmark-json) switched off."""
    bs = session(config)
    if bs is not None:
        bs.save = bs.autosave = bs.json = None


def replace_table(bs, display: Callable[[Any], None]) -> None:
    bs.display = display


def table_without(bs, left_out: Callable[[dict], bool], then: Callable[[int, Any], None]) -> None:
    """Its table without the rows (each an ``as_dict``) ``left_out`` names; then ``then(how many
    were left out, the terminal reporter)``."""
    display = bs.display

    def display_others(tr) -> None:
        groups = bs.groups or []
        kept = [(g, [b for b in benches if not left_out(b)]) for g, benches in groups]
        left = sum(len(benches) for _, benches in groups) - sum(len(b) for _, b in kept)
        bs.groups = [(g, benches) for g, benches in kept if benches]
        try:
            display(tr)
        finally:
            bs.groups = groups
        then(left, tr)

    bs.display = display_others


def document(config, bs, commit: dict | None = None) -> dict:
    """Its own JSON of this session, raw rounds included, the machine and the commit as its hooks
    say (``pytest_benchmark_generate_machine_info``, ``..._commit_info``: a suite's own heard);
    ``commit``: the commit hook's, when asked already."""
    return config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=bs.benchmarks,
        include_data=True,
        machine_info=bs.get_machine_info(),
        commit_info=commit if commit is not None else commit_info(config),
    )


def commit_info(config) -> dict:
    return config.hook.pytest_benchmark_generate_commit_info(config=config)


def code_identity(info: dict) -> dict:
    """A baseline's ``code`` (``{"commit", "dirty"}``, as every saved baseline has it) from the
    commit hook's info; ``{}`` when it knows no commit (no repository, no git)."""
    commit = info.get("id")
    if not commit or commit in ("unversioned", "unknown"):
        return {}
    return {"commit": str(commit), "dirty": bool(info.get("dirty"))}


def json_text(doc, indent: int) -> str:
    """``doc`` as JSON the way pytest-benchmark writes its files (odd params become text)."""
    from pytest_benchmark.utils import safe_dumps

    return safe_dumps(doc, indent=indent)


# -- a session's benchmark ---------------------------------------------------------------------


def ran(bench) -> bool:
    """Whether it ran without error and made its record (its rounds may be none)."""
    return not getattr(bench, "has_error", False) and bench.stats is not None


def recorded(bench) -> bool:
    return ran(bench) and bool(bench.stats.data)


def rounds(bench) -> list[float]:
    return list(bench.stats.data) if bench.stats is not None else []


# -- the benchmark fixture ---------------------------------------------------------------------


def is_fixture(obj) -> bool:
    """Whether ``obj`` is pytest-benchmark's ``benchmark`` fixture (not pytest-codspeed's)."""
    from pytest_benchmark.fixture import BenchmarkFixture

    return isinstance(obj, BenchmarkFixture)


def measured(fixture) -> bool:
    """Whether the fixture made its record (its first round ran)."""
    return getattr(fixture, "stats", None) is not None


def fixture_rounds(fixture) -> list[float]:
    return rounds(fixture.stats) if measured(fixture) else []


def mark_used(fixture, how: str) -> None:
    """Tell pytest-benchmark the fixture was used (``how``: said if it is used twice)."""
    fixture._mode = how


def mark_failed(fixture) -> None:
    """Its rounds failed: pytest-benchmark keeps no record of it."""
    fixture.has_error = True


def sent_record(fixture) -> dict:
    """What ``take_record`` makes the fixture's record of in another process."""
    meta = fixture.stats
    return {
        "mode": fixture._mode,
        "has_error": fixture.has_error,
        "iterations": meta.iterations if meta is not None else 1,
        "samples": rounds(meta) if meta is not None else [],
    }


def take_record(fixture, sent: dict) -> None:
    """The record ``sent_record`` sent, made here as the fixture would have."""
    fixture._mode, fixture.has_error = sent["mode"], sent["has_error"]
    if sent["samples"]:
        meta = fixture._make_stats(sent["iterations"])
        for sample in sent["samples"]:  # per iteration already: not ``update``, which divides
            meta.stats.update(sample)


def factories(fixture) -> tuple[Callable, Callable]:
    """``make_runner(function, args, kwargs)``: a runner, each call of which (calibration's,
    warm-up's, a round's) runs the function and reads the timer; ``make_stats(iterations)``:
    the record (added to the session's), whose ``update(seconds)`` adds a round."""
    return fixture._make_runner, fixture._make_stats


def use_factories(fixture, make_runner: Callable, make_stats: Callable | None = None) -> None:
    fixture._make_runner = make_runner
    if make_stats is not None:
        fixture._make_stats = make_stats


def round_limits(fixture) -> tuple[int, float]:
    """Its least rounds and its time for them (seconds)."""
    return fixture._min_rounds, fixture._max_time


def calibrate_with(fixture, calibrate, precision, min_rounds: int) -> None:
    """Its calibration (``calibrate(runner)``), its timer's precision (``precision(timer)``) and
    its least rounds replaced."""
    fixture._calibrate_timer, fixture._get_precision = calibrate, precision
    fixture._min_rounds = min_rounds


def set_min_rounds(fixture, rounds: int) -> None:
    """Its least rounds, from within its calibration (it reads them after)."""
    fixture._min_rounds = rounds


def precision(fixture) -> float:
    return fixture._get_precision(fixture._timer)


def precisions(fixture_class: type) -> dict:
    """Where the fixture's class caches each timer's precision."""
    return fixture_class._precisions  # type: ignore[attr-defined]
