"""The plugin's options, read once from the command line and ini, validated with clear errors.

Every error says what is wrong and how to fix it; the plugin turns ``SettingsError`` into
pytest's usage error (exit status 4) before any benchmark runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import backends, measure
from .gate.compare import DEFAULT_MACHINE_TOLERANCE
from .gate.history import DEFAULT_KEEP
from .workloads import SCALES


class SettingsError(ValueError):
    pass


@dataclass
class Settings:
    backends: list[str] = field(default_factory=lambda: list(backends.DEFAULT_SPECS))
    backends_chosen: bool = False  # named by option or ini, rather than the default run
    scale: str = "default"
    measure: str = "time"  # the instrument: see measure/
    rounds: int | None = None
    timeout: float | None = None  # None until read: then the given one or the instrument's default
    isolate: bool = False
    jobs: int = (
        1  # cases measured at once (instruction counts only: times would disturb each other)
    )
    layouts: int = 3  # layouts a plain test is counted in (measure/layouts.py); time: one process
    baseline: Path | None = None
    save_baseline: Path | None = None
    baseline_sessions: int = DEFAULT_KEEP  # sessions a saved baseline keeps
    threshold: float | None = None  # None: each record's instrument's default
    thresholds: dict = field(default_factory=dict)  # "gevent" / "ring" / "ring:gevent" -> fraction
    memory_threshold: float | None = None  # None: memory_gate.DEFAULT_THRESHOLD
    memory_plain: bool = False  # users' own benchmark tests get the memory pass too
    allow_cross_python: bool = False
    gate_native: bool = False  # the native reference rows get verdicts that can fail the build
    machine_tolerance: float = DEFAULT_MACHINE_TOLERANCE
    against: str | None = (
        None  # --concurrency-against: the base side's spec (this session is the head)
    )
    paired: bool = False  # a side's session under --concurrency-against: rounds are taken in turns
    report_md: Path | None = None
    plot_dir: Path | None = None

    @property
    def instrument(self) -> measure.Instrument:
        return measure.get(self.measure)


def parse_backends(text: str, origin: str) -> list[str]:
    try:
        return backends.parse_list(text)
    except backends.UnknownBackend as exc:
        raise SettingsError(f"{origin}: {exc}") from None


def parse_scale(text: str, origin: str) -> str:
    if text not in SCALES:
        raise SettingsError(f"{origin}: unknown scale {text!r}; use one of {', '.join(SCALES)}")
    return text


def parse_measure(text: str, origin: str) -> str:
    if text not in measure.names():
        raise SettingsError(
            f"{origin}: unknown measure {text!r}; use one of {', '.join(measure.names())}"
        )
    reason = measure.get(text).unavailable_reason()
    if reason:
        raise SettingsError(f"{origin}={text}: {reason}")
    return text


def parse_jobs(text, instrument) -> int:
    """``--concurrency-jobs``: a number, or empty for the default (every core when counting)."""
    if not text:
        return (
            (os.cpu_count() or 1)
            if instrument.fresh_process and not instrument.machine_bound
            else 1
        )
    jobs = parse_positive(text, "--concurrency-jobs", int)
    if jobs > 1 and instrument.machine_bound:
        raise SettingsError(
            f"--concurrency-jobs={jobs}: cases measured at the same time slow each other down, so "
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
    if not 0 < value < 1000:
        raise SettingsError(
            f"{origin}: {text!r} is out of range; a threshold is a percentage above 0, e.g. 10"
        )
    return value / 100


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
        out[key] = parse_percent(value, f"{origin} ({key})")
    return out


def parse_positive(text, origin: str, kind=float):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise SettingsError(f"{origin}: {text!r} is not a number; write e.g. {kind(60)}") from None
    if value <= 0:
        raise SettingsError(f"{origin}: must be above 0, got {text!r}")
    return value


def writable_target(path: str, origin: str) -> Path:
    """Fail before the run, not after it, when a file could not be written."""
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
            f"{origin}: cannot create {path}: {existing} is not a writable directory; choose another path"
        )
    return target


def from_config(config) -> Settings:
    opt = config.getoption
    s = Settings()
    text = opt("concurrency_backends") or config.getini("concurrency_backends")
    if text:
        s.backends = parse_backends(text, "--concurrency-backends")
        s.backends_chosen = True
    s.scale = parse_scale(
        opt("concurrency_scale") or config.getini("concurrency_scale") or "default",
        "--concurrency-scale",
    )
    s.measure = parse_measure(
        opt("concurrency_measure") or config.getini("concurrency_measure") or "time",
        "--concurrency-measure",
    )
    if opt("concurrency_rounds") is not None:
        s.rounds = parse_positive(opt("concurrency_rounds"), "--concurrency-rounds", int)
    timeout = opt("concurrency_timeout") or config.getini("concurrency_timeout")
    s.timeout = (
        parse_positive(timeout, "--concurrency-timeout")
        if timeout
        else s.instrument.default_timeout
    )
    s.isolate = bool(opt("concurrency_isolate") or config.getini("concurrency_isolate"))
    s.jobs = parse_jobs(opt("concurrency_jobs") or config.getini("concurrency_jobs"), s.instrument)
    layouts = opt("concurrency_layouts") or config.getini("concurrency_layouts")
    if layouts:
        s.layouts = parse_positive(layouts, "--concurrency-layouts", int)
    threshold = opt("concurrency_threshold") or config.getini("concurrency_threshold")
    if threshold:
        s.threshold = parse_percent(threshold, "--concurrency-threshold")
    memory_threshold = opt("concurrency_memory_threshold") or config.getini(
        "concurrency_memory_threshold"
    )
    if memory_threshold:
        s.memory_threshold = parse_percent(memory_threshold, "--concurrency-memory-threshold")
    s.memory_plain = bool(opt("concurrency_memory") or config.getini("concurrency_memory"))
    s.thresholds = parse_thresholds(
        config.getini("concurrency_thresholds"), "ini concurrency_thresholds"
    )
    s.allow_cross_python = bool(opt("concurrency_allow_cross_python"))
    s.gate_native = bool(opt("concurrency_gate_native") or config.getini("concurrency_gate_native"))
    tolerance = opt("concurrency_machine_tolerance") or config.getini(
        "concurrency_machine_tolerance"
    )
    if tolerance:
        s.machine_tolerance = parse_percent(tolerance, "--concurrency-machine-tolerance")
    if opt("concurrency_baseline"):
        s.baseline = Path(opt("concurrency_baseline"))
    if opt("concurrency_save_baseline"):
        s.save_baseline = writable_target(
            opt("concurrency_save_baseline"), "--concurrency-save-baseline"
        )
    sessions = opt("concurrency_baseline_sessions") or config.getini(
        "concurrency_baseline_sessions"
    )
    if sessions:
        s.baseline_sessions = parse_positive(sessions, "--concurrency-baseline-sessions", int)
    s.against = opt("concurrency_against")
    s.paired = _side_session()
    if opt("concurrency_report_md"):
        s.report_md = writable_target(opt("concurrency_report_md"), "--concurrency-report-md")
    if opt("concurrency_plot"):
        s.plot_dir = Path(opt("concurrency_plot"))
    return s


def _side_session() -> bool:
    from . import against

    return bool(against.side_session())
