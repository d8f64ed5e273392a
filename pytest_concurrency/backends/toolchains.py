"""What each native language needs on the machine, its version, and the install hint.

A row whose toolchain is missing is skipped with the reason, as an uninstalled Python model is.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import lifetime

SOURCES = Path(__file__).resolve().parent.parent / "native"  # where the programs' sources ship


@dataclass(frozen=True)
class Toolchain:
    language: str  # the backend spec: go, rust, kotlin
    library: str  # what runs the tasks, for the records
    tools: tuple[str, ...]  # executables that must be on PATH
    hint: str  # how to install them
    min_warmup: int  # warm-up rounds at least (the Kotlin program also warms up for 2 s: the JIT)


TOOLCHAINS = {
    "go": Toolchain(
        "go",
        "goroutines + channels",
        ("go",),
        "install Go 1.21 or later: https://go.dev/doc/install",
        0,
    ),
    "rust": Toolchain(
        "rust",
        "tokio tasks + tokio::sync channels",
        ("cargo", "rustc"),
        "install Rust with cargo: https://rustup.rs",
        0,
    ),
    "kotlin": Toolchain(
        "kotlin",
        "kotlinx.coroutines + Channel",
        ("mvn", "java"),
        "install Maven and a JDK 11 or later, e.g. apt-get install maven openjdk-17-jdk-headless",
        1,
    ),
}


def missing(language: str) -> str | None:
    """Why ``language``'s row cannot run here (a tool not on PATH, with the fix), or ``None``."""
    chain = TOOLCHAINS[language]
    absent = [tool for tool in chain.tools if shutil.which(tool) is None]
    if absent:
        return f"{' and '.join(absent)} not found on PATH ({chain.hint})"
    return None


def _first_line(cmd: list[str]) -> str:
    try:
        run = lifetime.run(cmd, capture_output=True, text=True, timeout=60)  # mvn -v: a JVM
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cmd[0]} unknown ({exc})"
    text = (run.stdout or run.stderr).strip()  # java -version writes to stderr
    return text.splitlines()[0] if text else f"{cmd[0]} unknown"


def _pinned(path: Path, pattern: str) -> str:
    found = re.search(pattern, path.read_text(encoding="utf-8"))
    return found.group(1) if found else "unknown"


@functools.cache
def version(language: str) -> str:
    """The toolchain and library versions behind the row (recorded; part of the build's cache key)."""
    if language == "go":
        return _first_line(["go", "version"]).replace("go version ", "")
    if language == "rust":
        tokio = _pinned(SOURCES / "rust" / "Cargo.lock", r'name = "tokio"\nversion = "([^"]+)"')
        return f"{_first_line(['rustc', '--version'])}, tokio {tokio}"
    pom = SOURCES / "kotlin" / "pom.xml"
    return (
        f"kotlin {_pinned(pom, r'<kotlin.version>([^<]+)<')}, "
        f"kotlinx-coroutines {_pinned(pom, r'<coroutines.version>([^<]+)<')}, {_first_line(['java', '-version'])}"
    )
