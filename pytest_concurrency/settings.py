"""The plugin's settings: every entry of ``options.OPTIONS`` parsed once into a frozen ``Settings``.

The command line wins over the ini file. Every error says what is wrong, where the value came
from (``--concurrency-scale=huge: ...`` or ``ini concurrency_scale = huge (in tox.ini): ...``) and
how to fix it; the plugin turns ``SettingsError`` into pytest's usage error (exit status 4)
before any benchmark runs.

``Settings`` is frozen: a caller that needs other settings makes them with
``dataclasses.replace`` (``with_jobs`` for the lanes of a counted session under ``-n N``).
"""

import dataclasses
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import backends, measure, options, outputs
from .gate import shards
from .gate.compare import GateSettings
from .gate.shards import Shard
from .measure import Instrument
from .store import atomic

_DEFAULTS: dict[str, Any] = {o.field: o.default for o in options.OPTIONS if o.field}


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    backends: list[str] = field(default_factory=lambda: list(_DEFAULTS["backends"]))
    backends_chosen: bool = False  # named by option or ini, rather than the default run
    scale: str = _DEFAULTS["scale"]
    measure: str = _DEFAULTS["measure"]  # the instrument: see measure/
    rounds: int | None = _DEFAULTS["rounds"]
    median_width: float = _DEFAULTS["median_width"]  # a case's rounds stop at it (stopping.py)
    timeout: float | None = None  # None until read: then the given one or the instrument's default
    #: given by option or ini: then it bounds the tests with ``benchmark`` alone too (plain_tests.py)
    timeout_given: bool = False
    isolate: bool = _DEFAULTS["isolate"]
    benchmark_table: bool = _DEFAULTS["benchmark_table"]  # pytest-benchmark's table, cases too
    jobs: int = (
        1  # cases measured at once (instruction counts only: times would disturb each other)
    )
    layouts: int = _DEFAULTS["layouts"]  # layouts a plain test is counted in (measure/layouts.py)
    layouts_from: str = _DEFAULTS["layouts_from"]  # fork: forked from the counted session; start
    kernel_pass: bool = _DEFAULTS["kernel_pass"]  # counted: a pass at full speed for kernel figures
    baseline: Path | None = _DEFAULTS["baseline"]
    save_baseline: Path | None = _DEFAULTS["save_baseline"]
    baseline_sessions: int = _DEFAULTS["baseline_sessions"]  # sessions a saved baseline keeps
    threshold: float | None = _DEFAULTS["threshold"]  # None: each record's instrument's default
    thresholds: dict = field(default_factory=dict)  # "gevent" / "ring" / "ring:gevent" -> fraction
    memory_threshold: float | None = _DEFAULTS["memory_threshold"]  # None: the memory gate's
    memory_plain: bool = _DEFAULTS["memory_plain"]  # users' own benchmark tests get the memory pass
    allow_cross_python: bool = _DEFAULTS["allow_cross_python"]
    gate_native: bool = _DEFAULTS["gate_native"]  # the native rows' verdicts can fail the build
    machine_tolerance: float = _DEFAULTS["machine_tolerance"]
    remeasure: str = _DEFAULTS["remeasure"]  # which benchmarks get a second session (remeasure.py)
    undecided: str = _DEFAULTS["undecided"]  # what neither time nor counts decided ends with
    against: str | None = _DEFAULTS["against"]  # the base side's spec (this session is the head)
    paired: bool = False  # a side's session under --concurrency-against: rounds taken in turns
    all_rounds: bool = False  # a role whose rounds a gate tests (a suspect's second session)
    shard: Shard | None = _DEFAULTS["shard"]  # this run is one shard of the suite
    verdicts: Path | None = _DEFAULTS["verdicts"]  # the verdict file (gate/verdict_file.py)
    report_md: Path | None = _DEFAULTS["report_md"]
    history: Path | None = _DEFAULTS["history"]  # the run log's folder (report/runlog.py)
    plot_dir: Path | None = _DEFAULTS["plot_dir"]
    against_keep: Path | None = _DEFAULTS["against_keep"]  # where each pair's rounds are copied
    #: the node ids this session keeps (a counted run of what time left undecided: arbiter.py)
    only: Path | None = _DEFAULTS["only"]

    @property
    def instrument(self) -> Instrument:
        return measure.instrument(self.measure)

    @property
    def stop_width(self) -> float | None:
        """The width at which a timed workload case's rounds stop (measure/stopping.py), or None:
        every planned round, where a gate tests the rounds (a baseline read or saved, a side of
        an against run, a suspect's second session), where they were given (--concurrency-rounds)
        and where they are counted (exact: a few rounds)."""
        gated = self.baseline or self.save_baseline or self.against or self.paired
        if gated or self.all_rounds or self.rounds or not self.instrument.machine_bound:
            return None
        return self.median_width

    @property
    def gate(self) -> GateSettings:
        """What the gate judges with. A test's own ``@pytest.mark.concurrency(threshold=...)``
        travels in its record (extra ``threshold``)."""
        return GateSettings(
            threshold=self.threshold,
            overrides=self.thresholds,
            allow_cross_python=self.allow_cross_python,
            machine_tolerance=self.machine_tolerance,
            memory_threshold=self.memory_threshold,
        )


def with_jobs(settings: Settings, jobs: int) -> Settings:
    """``settings`` with ``jobs`` cases counted at once (``-n N`` in a counted session: N lanes)."""
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    return dataclasses.replace(settings, jobs=jobs)


# -- reading: one entry of the table at a time ------------------------------------------------


def from_config(config, *, paired: bool = False) -> Settings:
    """Every entry of ``options.OPTIONS``, from the command line or else the ini file, parsed.

    ``paired``: this is a side's session under ``--concurrency-against`` (the caller knows its
    role; the settings do not look it up)."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for o in options.OPTIONS:
        if o.field is None:
            continue  # read by another module (--concurrency-role: roles.py)
        given = _given(config, o)
        if given is None:
            values[o.field] = _default(o)
            continue
        raw, origin = given
        if isinstance(raw, str) and not raw.strip():  # --concurrency-jobs= : the default,
            values[o.field] = _default(o)  # whatever the ini file says
            continue
        origins[o.field] = origin
        values[o.field] = PARSERS[o.kind](raw, origin, o)
    values["backends_chosen"] = "backends" in origins
    values["timeout_given"] = "timeout" in origins
    instrument = measure.instrument(values["measure"])
    if values["timeout"] is None:
        values["timeout"] = instrument.default_timeout
    values["jobs"] = _jobs(values["jobs"], origins.get("jobs", "--concurrency-jobs"), instrument)
    try:
        outputs.check(_paths(values, config))
    except outputs.OutputError as exc:
        raise SettingsError(str(exc)) from None
    return Settings(paired=paired, **values)


def _paths(values: dict, config) -> list[outputs.Named]:
    """The files the session reads and writes, pytest-benchmark's JSON report among them: checked
    together (outputs.py), so that none is written over another or over the baseline."""
    return [
        outputs.Named("--concurrency-baseline", values["baseline"], noun="the baseline"),
        outputs.Named("--concurrency-save-baseline", values["save_baseline"], outputs.BASELINE),
        outputs.Named("--concurrency-verdicts", values["verdicts"], outputs.VERDICTS),
        outputs.Named("--concurrency-report-md", values["report_md"], outputs.MARKDOWN),
        outputs.Named("--concurrency-plot", values["plot_dir"], outputs.DIRECTORY),
        outputs.Named("--concurrency-against-keep", values["against_keep"], outputs.DIRECTORY),
        outputs.Named(
            "--benchmark-json", config.getoption("benchmark_json", None), outputs.BENCHMARK_JSON
        ),
    ]


def _given(config, o: options.Option) -> tuple[Any, str] | None:
    """The entry's raw value and where it came from; None when neither place gives it."""
    if o.flag is not None:
        value = config.getoption(o.dest, None)
        if value is not None:
            return value, o.flag if o.kind == options.SWITCH else f"{o.flag}={value}"
    if o.ini is None:
        return None
    try:
        value = config.getini(o.ini)
    except Exception as exc:  # a bool key pytest could not read: ValueError, or UsageError (9.x)
        raw = _raw_ini(config, o.ini)
        shown = f" = {raw}" if raw is not None else ""
        raise SettingsError(
            f"ini {o.ini}{shown} ({_ini_place(config, o.ini)}): {exc}; write true or false"
        ) from None
    if value in ("", [], None) or (o.kind == options.SWITCH and value is False):
        return None
    if o.kind == options.THRESHOLD_LINES:
        return value, f"ini {o.ini} ({_ini_place(config, o.ini)})"
    return value, f"ini {o.ini} = {value} ({_ini_place(config, o.ini)})"


def _ini_place(config, key: str) -> str:
    """Where an ini key's value came from: ``-o key=...`` or the ini file."""
    for override in getattr(config.option, "override_ini", None) or ():
        if override.partition("=")[0].strip() == key:
            return "from -o/--override-ini"
    return f"in {config.inipath}"


def _raw_ini(config, key: str) -> object:
    """The ini file's text for ``key``, for an error message (best effort: pytest's own store)."""
    try:
        store = getattr(config, "_inicfg", None)
        if store is None:
            store = config.inicfg  # pytest < 9: plain strings
        value = store.get(key)
        return getattr(value, "value", value)
    except Exception:
        return None


def _default(o: options.Option) -> Any:
    """A fresh copy of a mutable default: no two Settings share one list or dict."""
    if isinstance(o.default, (list, tuple)):
        return list(o.default)
    if isinstance(o.default, dict):
        return dict(o.default)
    return o.default


# -- the parsers, one per kind of entry (options.KINDS) ------------------------------------------


def parse_backends(text: str, origin: str) -> list[str]:
    try:
        return backends.parse_list(text)
    except backends.UnknownBackend as exc:
        raise SettingsError(f"{origin}: {exc}") from None


def parse_choice(text: str, origin: str, choices: Iterable[str], noun: str) -> str:
    choices = list(choices)
    if text not in choices:
        raise SettingsError(f"{origin}: unknown {noun} {text!r}; use one of {', '.join(choices)}")
    return text


def parse_measure(text: str, origin: str) -> str:
    """An instrument's name; one this machine cannot use (valgrind missing) is an error too."""
    parse_choice(text, origin, measure.names(), "measure")
    reason = measure.instrument(text).unavailable_reason()
    if reason:
        raise SettingsError(f"{origin}: {reason}")
    return text


def _jobs(jobs: int | None, origin: str, instrument) -> int:
    if jobs is None:
        return (
            (os.cpu_count() or 1)
            if instrument.fresh_process and not instrument.machine_bound
            else 1
        )
    if jobs > 1 and instrument.machine_bound:
        raise SettingsError(
            f"{origin}: cases measured at the same time slow each other down, so "
            f"{instrument.kind} measured that way would be wrong; use it with "
            "--concurrency-measure=instructions, whose counts do not move"
        )
    return jobs


def parse_percent(text, origin: str) -> float:
    """``"10"``, ``"10%"`` or ``10`` -> 0.10."""
    raw = str(text).strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(
            f"{origin}: {text!r} is not a percentage; write e.g. 10 or 10%"
        ) from None
    if not 0 < value < 1000:  # NaN too: no comparison holds
        raise SettingsError(
            f"{origin}: {text!r} is {_outside(value)}; allowed: a percentage above 0 and below "
            "1000, e.g. 10"
        )
    return value / 100


def parse_shard(text, origin: str) -> Shard:
    try:
        return shards.parse(text)
    except shards.ShardError as exc:
        raise SettingsError(f"{origin}: {exc}") from None


def parse_thresholds(lines, origin: str) -> dict:
    """ini lines ``KEY = PCT``: KEY is a backend, a workload, or ``workload:backend``."""
    out = {}
    for line in lines or ():
        key, sep, value = str(line).partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingsError(
                f"{origin}: {line!r} should read KEY = PCT, e.g. 'gevent = 15' or 'ring:uvloop = 20'"
            )
        out[key] = parse_percent(value.strip(), f"{origin}, line {str(line).strip()!r}")
    return out


def parse_number(text, origin: str, kind, bounds: tuple[float, float]):
    """A number of ``kind`` (int or float) from ``bounds[0]`` to ``bounds[1]``; NaN and the
    infinities are refused (Python reads them, and no comparison would catch NaN)."""
    try:
        value = kind(text)
    except (TypeError, ValueError, OverflowError):
        raise SettingsError(f"{origin}: {text!r} is not a number; write e.g. {kind(60)}") from None
    low, high = bounds
    if not low <= value <= high:
        raise SettingsError(
            f"{origin}: {text!r} is {_outside(value)}; allowed: {_shown(low)} to {_shown(high)}"
        )
    return value


def _outside(value: float) -> str:
    return "out of range" if math.isfinite(value) else "not a finite number"


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if bound == int(bound) else f"{bound:g}"


def writable_target(path: str, origin: str) -> Path:
    """Fail before the run, not after it, when a file could not be written."""
    link = atomic.link_problem(path)
    if link:
        raise SettingsError(f"{origin}: {link}")
    target = Path(path)
    if target.is_dir():
        raise SettingsError(
            f"{origin}: {path} is a directory; give a file path, e.g. {target / 'baseline.json'}"
        )
    if target.exists() and not os.access(target, os.W_OK):
        raise SettingsError(
            f"{origin}: {path} is read-only, so it is left as it is; make it writable "
            f"(chmod u+w {path}) or give another path"
        )
    existing = target.absolute().parent
    while not existing.exists():  # missing directories are created when the file is written
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise SettingsError(
            f"{origin}: cannot create {path}: {existing} is not a writable directory; choose "
            "another path"
        )
    return target


def _bounded(raw, origin: str, o: options.Option, kind):
    assert o.bounds is not None  # every count and seconds entry has them (Option.__post_init__)
    return parse_number(_text(raw), origin, kind, o.bounds)


def _text(raw) -> str:
    return str(raw).strip()


#: kind -> parser(raw value, origin, entry); every kind of options.KINDS has one.
PARSERS: dict[str, Callable[[Any, str, options.Option], Any]] = {
    options.TEXT: lambda raw, origin, o: _text(raw) or None,
    options.CHOICE: lambda raw, origin, o: parse_choice(
        _text(raw), origin, o.choices, o.field or o.kind
    ),
    options.MEASURE: lambda raw, origin, o: parse_measure(_text(raw), origin),
    options.BACKENDS: lambda raw, origin, o: parse_backends(_text(raw), origin),
    options.COUNT: lambda raw, origin, o: _bounded(raw, origin, o, int),
    options.SECONDS: lambda raw, origin, o: _bounded(raw, origin, o, float),
    options.PERCENT: lambda raw, origin, o: parse_percent(raw, origin),
    options.PATH: lambda raw, origin, o: Path(_text(raw)),
    options.NEW_FILE: lambda raw, origin, o: writable_target(_text(raw), origin),
    options.SWITCH: lambda raw, origin, o: bool(raw),
    options.THRESHOLD_LINES: lambda raw, origin, o: parse_thresholds(raw, origin),
    options.SHARD: lambda raw, origin, o: parse_shard(_text(raw), origin),
}
assert set(PARSERS) == set(options.KINDS), "every kind of options.KINDS needs a parser here"
