"""Registry of concurrency models: names, availability without importing, lazy loading.

A backend spec is ``name`` or ``name[variant]`` (``multiprocessing[fork]``,
``gevent[patched]``). Availability is decided with ``importlib.util.find_spec`` so that
listing the models never imports gevent or eventlet (importing them has side effects).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from .base import AsyncBackend, Backend, ConcurrencyError, SyncBackend, TaskFailed, Unsupported


@dataclass(frozen=True)
class _Entry:
    module: str  # module in this package holding ``Backend``
    requires: tuple[str, ...]  # top-level modules that must be importable
    variants: tuple[str, ...] = ()  # allowed ``[variant]`` values; first is the default
    isolation_only: tuple[str, ...] = ()  # variants that need a worker process of their own
    variant_requires: tuple[
        tuple[str, str], ...
    ] = ()  # (variant, module) it needs besides ``requires``
    native: bool = (
        False  # a program in another language (native/): needs its toolchain, not modules
    )


_REGISTRY: dict[str, _Entry] = {
    "threading": _Entry("_threading", ()),
    "multiprocessing": _Entry("_multiprocessing", (), ("forkserver", "fork", "spawn")),
    "greenlet": _Entry("_greenlet", ("greenlet",)),
    "gevent": _Entry("_gevent", ("gevent",), ("", "patched"), ("patched",)),
    "eventlet": _Entry("_eventlet", ("eventlet",), ("", "patched"), ("patched",)),
    "asyncio": _Entry("_asyncio", ()),
    "uvloop": _Entry("_uvloop", ("uvloop",)),
    "trio": _Entry("_trio", ("trio",)),
    "anyio": _Entry(
        "_anyio",
        ("anyio",),
        ("asyncio", "trio", "uvloop"),
        variant_requires=(("trio", "trio"), ("uvloop", "uvloop")),
    ),
    "go": _Entry("_native", (), native=True),
    "rust": _Entry("_native", (), native=True),
    "kotlin": _Entry("_native", (), native=True),
}

_ALIASES = {"asyncio+uvloop": "uvloop"}

#: The models a run compares when the user selects none.
DEFAULT_SPECS = (
    "threading",
    "multiprocessing[forkserver]",
    "greenlet",
    "gevent",
    "eventlet",
    "asyncio",
    "uvloop",
)

#: Models beyond the seeds' seven, run when selected (``--concurrency-backends``); see the README.
EXTRA_SPECS = ("trio", "anyio[asyncio]", "anyio[trio]", "anyio[uvloop]")

#: The seeds' native systems, reference rows run when selected (``native`` names all three).
NATIVE_SPECS = ("go", "rust", "kotlin")
NATIVE_ALIAS = "native"


class UnknownBackend(ConcurrencyError, ValueError):
    pass


def valid_specs() -> list[str]:
    out: list[str] = []
    for name, entry in _REGISTRY.items():
        out.extend(f"{name}[{v}]" if v else name for v in entry.variants or ("",))
    return out


def canonical(spec: str) -> str:
    """Normalize a user's spec (``multiprocessing`` -> ``multiprocessing[forkserver]``)."""
    name, variant = _split(spec)
    entry = _REGISTRY[name]
    if not variant and entry.variants:
        variant = entry.variants[0]
    return f"{name}[{variant}]" if variant else name


def _split(spec: str) -> tuple[str, str]:
    raw = spec.strip()
    name, _, rest = raw.partition("[")
    variant = rest[:-1] if rest.endswith("]") else rest
    name = _ALIASES.get(name.strip().lower(), name.strip().lower())
    variant = variant.strip().lower()
    entry = _REGISTRY.get(name)
    if (
        entry is None
        or (rest and not raw.endswith("]"))
        or (variant and variant not in entry.variants)
    ):
        raise UnknownBackend(
            f"unknown concurrency backend {spec!r}; valid: {', '.join(valid_specs())}, "
            f"or {NATIVE_ALIAS} (= {','.join(NATIVE_SPECS)})"
        )
    return name, variant


def parse_list(text: str) -> list[str]:
    """``"gevent, asyncio"`` -> canonical specs; raises ``UnknownBackend`` naming the bad one."""
    parts = [
        p
        for part in _split_commas(text)
        for p in (NATIVE_SPECS if part.lower() == NATIVE_ALIAS else (part,))
    ]
    specs = [canonical(part) for part in parts]
    if not specs:
        raise UnknownBackend(f"no backend named; valid: {', '.join(valid_specs())}")
    return list(dict.fromkeys(specs))


def _split_commas(text: str) -> list[str]:
    # commas inside [...] do not occur in variants, so a plain split is enough
    return [p for p in (s.strip() for s in text.split(",")) if p]


def is_native(spec: str) -> bool:
    """Whether ``spec`` is a native reference row (go, rust, kotlin)."""
    return spec in NATIVE_SPECS


def isolation_only(spec: str) -> bool:
    name, variant = _split(spec)
    return variant in _REGISTRY[name].isolation_only


def unavailable_reason(spec: str) -> str | None:
    """Why ``spec`` cannot run here, or ``None`` if its packages are installed."""
    name, variant = _split(canonical(spec))
    entry = _REGISTRY[name]
    if entry.native:
        from . import toolchains

        return toolchains.missing(name)
    for module in entry.requires + tuple(m for v, m in entry.variant_requires if v == variant):
        if importlib.util.find_spec(module) is None:
            return f"{module} not installed (pip install {module})"
    return None


def load(spec: str) -> Backend:
    """Import the model and return a fresh backend instance."""
    name, variant = _split(canonical(spec))
    reason = unavailable_reason(spec)
    if reason:
        raise Unsupported(reason)
    try:
        module = importlib.import_module(f"{__name__}.{_REGISTRY[name].module}")
    except ImportError as exc:  # installed but broken (e.g. a wheel for another Python)
        raise Unsupported(f"{name} is installed but failed to import: {exc}") from exc
    if _REGISTRY[name].native:
        return module.Backend(name)
    return module.Backend(variant) if _REGISTRY[name].variants else module.Backend()


__all__ = [
    "AsyncBackend",
    "Backend",
    "DEFAULT_SPECS",
    "EXTRA_SPECS",
    "NATIVE_SPECS",
    "SyncBackend",
    "TaskFailed",
    "UnknownBackend",
    "Unsupported",
    "canonical",
    "is_native",
    "isolation_only",
    "load",
    "parse_list",
    "unavailable_reason",
    "valid_specs",
]
