"""pytest-benchmark's internals, touched here and nowhere else (tests/test_benchmark_adapter.py
enforces it): its session (``config._benchmarksession``), the ``benchmark`` fixture's private
attributes (the runner and stats factories, its mode, its calibration) and a record's ``stats``
and ``has_error``. An upgrade of pytest-benchmark is checked in this one module.

A fixture's ``stats`` is a ``Metadata`` (``None`` until its first round); the session's
``benchmarks`` are those ``Metadata``, each holding its rounds in ``.stats.data``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: pytest-benchmark's names this module wraps, for the test that no other module uses them
PRIVATE_NAMES = frozenset(
    {
        "_benchmarksession",
        "_calibrate_timer",
        "_get_precision",
        "_make_runner",
        "_make_stats",
        "_max_time",
        "_min_rounds",
        "_mode",
        "_precisions",
        "_timer",
        "has_error",
        "stats",
        "get_machine_info",
        "autosave",
        "groups",
        "display",
    }
)


# -- the session -----------------------------------------------------------------------------


def session(config) -> Any | None:
    """pytest-benchmark's session object, or None when its plugin is not active."""
    return getattr(config, "_benchmarksession", None)


def benchmarks(bs) -> list:
    """Every benchmark of the session so far (``Metadata``, with or without rounds)."""
    return list(bs.benchmarks)


def measures(config) -> bool:
    """Whether pytest-benchmark measures in this session (on, and not --benchmark-disable)."""
    bs = session(config)
    return bs is not None and not bs.disabled


def at_least(bs, option: str, value: float) -> None:
    """Raise one of its options (``min_rounds``, ``min_time``) to at least ``value``."""
    bs.options[option] = max(bs.options.get(option) or 0, value)


def use_timer(bs, timer: Callable[[], float]) -> None:
    """Its timer for every benchmark from now on."""
    from pytest_benchmark.utils import NameWrapper

    bs.options["timer"] = NameWrapper(timer)


def nothing_saved(config) -> None:
    """Its own saves (--benchmark-save, --benchmark-autosave, --benchmark-json) switched off."""
    bs = session(config)
    if bs is not None:
        bs.save = bs.autosave = bs.json = None


def replace_table(bs, display: Callable[[Any], None]) -> None:
    """Its table at the terminal's summary replaced by ``display(terminalreporter)``."""
    bs.display = display


def table_without(bs, left_out: Callable[[dict], bool], then: Callable[[int, Any], None]) -> None:
    """Its table drawn without the rows (``as_dict`` of each) that ``left_out`` names; ``then``
    is told how many were left out, and the terminal reporter, after the table."""
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
    """pytest-benchmark's own JSON of this session, raw rounds included, with the machine's and
    the commit's identity as its hooks make them (``pytest_benchmark_generate_machine_info``,
    ``..._commit_info``: a suite that overrides them is heard); ``commit``: the commit hook's,
    when it was asked already."""
    return config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=bs.benchmarks,
        include_data=True,
        machine_info=bs.get_machine_info(),
        commit_info=commit if commit is not None else commit_info(config),
    )


def commit_info(config) -> dict:
    """The code under test, from pytest-benchmark's hook (git or mercurial, or a suite's own)."""
    return config.hook.pytest_benchmark_generate_commit_info(config=config)


def code_identity(info: dict) -> dict:
    """A baseline's ``code`` (``{"commit", "dirty"}``, the shape every saved baseline has) from
    pytest-benchmark's commit info; ``{}`` when it knows no commit (no repository, no git)."""
    commit = info.get("id")
    if not commit or commit in ("unversioned", "unknown"):
        return {}
    return {"commit": str(commit), "dirty": bool(info.get("dirty"))}


def version() -> str:
    import pytest_benchmark

    return pytest_benchmark.__version__


def json_text(doc, indent: int) -> str:
    """``doc`` as JSON the way pytest-benchmark writes its files (odd params become text)."""
    from pytest_benchmark.utils import safe_dumps

    return safe_dumps(doc, indent=indent)


def summary_of(samples) -> dict:
    """pytest-benchmark's statistics of ``samples`` (seconds), as its files hold them."""
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for sample in samples:
        stats.update(sample)
    return stats.as_dict()


# -- a record (a session's benchmark, or a fixture's) -----------------------------------------


def recorded(bench) -> bool:
    """Whether a benchmark of the session ran without error and recorded rounds."""
    return (
        not getattr(bench, "has_error", False)
        and bench.stats is not None
        and bool(bench.stats.data)
    )


def ran(bench) -> bool:
    """Whether it ran without error and made its record (its rounds may be none)."""
    return not getattr(bench, "has_error", False) and bench.stats is not None


def rounds(bench) -> list[float]:
    """A session's benchmark's rounds."""
    return list(bench.stats.data) if bench.stats is not None else []


# -- the benchmark fixture ---------------------------------------------------------------------


def is_fixture(obj) -> bool:
    """Whether ``obj`` is pytest-benchmark's ``benchmark`` fixture (not pytest-codspeed's)."""
    from pytest_benchmark.fixture import BenchmarkFixture

    return isinstance(obj, BenchmarkFixture)


def measured(fixture) -> bool:
    """Whether the fixture has made its record (its first round ran)."""
    return getattr(fixture, "stats", None) is not None


def fixture_rounds(fixture) -> list[float]:
    """The fixture's measured rounds (none before its record is made)."""
    meta = getattr(fixture, "stats", None)
    return list(meta.stats.data) if meta is not None else []


def fixture_iterations(fixture) -> int:
    meta = getattr(fixture, "stats", None)
    return meta.iterations if meta is not None else 1


def mode(fixture) -> str | None:
    return fixture._mode


def errored(fixture) -> bool:
    return fixture.has_error


def mark_used(fixture, how: str, has_error: bool | None = None) -> None:
    """Tell pytest-benchmark the fixture was used (``how``: said where it was not used twice)."""
    fixture._mode = how
    if has_error is not None:
        fixture.has_error = has_error


def mark_failed(fixture) -> None:
    """The fixture's test failed in its rounds: pytest-benchmark keeps no record of it."""
    fixture.has_error = True


def runner_factory(fixture) -> Callable:
    """Its runner factory: ``make_runner(function, args, kwargs)`` returns a runner, whose every
    call (calibration's, warm-up's, each round's) runs the function and reads the timer."""
    return fixture._make_runner


def set_runner_factory(fixture, make_runner: Callable) -> None:
    fixture._make_runner = make_runner


def stats_factory(fixture) -> Callable:
    """Its record factory: ``make_stats(iterations)`` makes the record (``Metadata``, added to
    the session's); its ``update(seconds)`` adds a round."""
    return fixture._make_stats


def set_stats_factory(fixture, make_stats: Callable) -> None:
    fixture._make_stats = make_stats


def add_rounds(fixture, iterations: int, per_iteration: list[float]) -> None:
    """A record of rounds already divided by their iterations (``update`` would divide)."""
    meta = fixture._make_stats(iterations)
    for sample in per_iteration:
        meta.stats.update(sample)


def round_limits(fixture) -> tuple[int, float]:
    """Its ``min_rounds`` and ``max_time`` (seconds)."""
    return fixture._min_rounds, fixture._max_time


def calibrate_with(fixture, calibrate, precision, min_rounds: int) -> None:
    """Its calibration (``calibrate(runner)``), its timer's precision (``precision(timer)``) and
    its least rounds replaced."""
    fixture._calibrate_timer = calibrate
    fixture._get_precision = precision
    fixture._min_rounds = min_rounds


def min_rounds(fixture) -> int:
    return fixture._min_rounds


def precision(fixture) -> float:
    """Its timer's precision, as its calibration reads it."""
    return fixture._get_precision(fixture._timer)


def precisions(fixture_class: type) -> dict:
    """Where the fixture's class caches each timer's precision."""
    return fixture_class._precisions  # type: ignore[attr-defined]
