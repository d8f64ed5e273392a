"""Build a native program from the package's sources on first use, and cache the result.

The cache is ``$XDG_CACHE_HOME/pytest-concurrency/native/LANGUAGE-KEY`` (``~/.cache`` without
XDG_CACHE_HOME), KEY a hash of the sources and the toolchain's version, so an edited source or
an upgraded compiler builds again and nothing else does. A build runs in a scratch directory
beside the cache entry and the finished entry appears with one ``rename``: a build killed half
way leaves only scratch, never an entry that would be reused. A lock per entry keeps two
sessions from building the same thing at once.

What the package managers fetch while building (nothing is fetched when running): Go, nothing
(the program uses the standard library only); cargo, the crates pinned in ``rust/Cargo.lock``
(tokio, libc and their dependencies) from crates.io; Maven, the Kotlin compiler plugin,
kotlin-stdlib, kotlinx-coroutines-core and Maven's own build plugins from Maven Central
(into ``~/.m2``). Later builds reuse those downloads.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import lifetime
from ..backends import toolchains

BUILD_TIMEOUT_S = 1800  # a first cargo or Maven build downloads and compiles for minutes
OUTPUT_LINES = 40  # of a failed build's output, shown in the failure


class BuildError(Exception):
    """A native build failed: names the tool, shows its output. Shown without a traceback."""


@dataclass(frozen=True)
class Recipe:
    sources: tuple[str, ...]  # globs under the language's source directory
    command: tuple[str, ...]  # run in a copy of the sources
    artifact: str  # what the command produces, relative to that copy
    launcher: tuple[str, ...] = ()  # what runs the artifact (the JVM for a jar)
    env: dict = field(default_factory=dict)


RECIPES = {
    # GOTOOLCHAIN=local: an older go must fail with its message, not download a newer toolchain.
    "go": Recipe(
        ("go.mod", "*.go"),
        ("go", "build", "-trimpath", "-o", "prog", "."),
        "prog",
        env={"GOTOOLCHAIN": "local"},
    ),
    "rust": Recipe(
        ("Cargo.toml", "Cargo.lock", "src/*.rs"),
        ("cargo", "build", "--release", "--locked"),
        "target/release/pytest-concurrency-native",
        env={"CARGO_TARGET_DIR": "target"},
    ),
    "kotlin": Recipe(
        ("pom.xml", "src/main/kotlin/*.kt"),
        ("mvn", "-B", "-q", "package", "-Dmaven.test.skip=true"),
        "target/native.jar",
        launcher=("java", "-jar"),
    ),
}

_failed: dict[str, BuildError] = {}  # a failed build is not retried by every test of the session


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = (
        Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    )  # the spec ignores relative paths
    return root / "pytest-concurrency" / "native"


def _source_files(language: str) -> list[Path]:
    top = toolchains.SOURCES / language
    return sorted(
        {p for pattern in RECIPES[language].sources for p in top.glob(pattern) if p.is_file()}
    )


def cache_key(language: str) -> str:
    digest = hashlib.sha256(toolchains.version(language).encode())
    top = toolchains.SOURCES / language
    for path in _source_files(language):
        digest.update(str(path.relative_to(top)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def entry(language: str) -> Path:
    """The cache directory of this language's current build (it may not exist yet)."""
    return cache_root() / f"{language}-{cache_key(language)}"


def command(language: str) -> list[str]:
    """The command line that runs the built program, building it first if the cache lacks it."""
    if language in _failed:
        raise _failed[language]
    recipe = RECIPES[language]
    final = entry(language)
    program = final / Path(recipe.artifact).name
    if not program.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        with _locked(final.parent / f"{final.name}.lock"):
            if not program.exists():  # another session may have built it while we waited
                try:
                    _build(language, recipe, final)
                except BuildError as exc:
                    _failed[language] = exc
                    raise
    return [*recipe.launcher, str(program)]


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(language: str, recipe: Recipe, final: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        src = scratch / "src"
        top = toolchains.SOURCES / language
        for path in _source_files(language):
            target = src / path.relative_to(top)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        _run(language, recipe, src)
        built = src / recipe.artifact
        if not built.is_file():
            raise BuildError(
                f"building the {language} native reference: `{' '.join(recipe.command)}` "
                f"succeeded but did not produce {recipe.artifact}"
            )
        out = scratch / "out"
        out.mkdir()
        shutil.copy2(built, out / built.name)
        (out / "toolchain.txt").write_text(toolchains.version(language) + "\n", encoding="utf-8")
        try:
            out.rename(final)  # atomic: the entry exists complete or not at all
        except OSError:
            if not (final / built.name).exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(language: str, recipe: Recipe, src: Path) -> None:
    env = {**os.environ, **recipe.env}
    shown = " ".join(recipe.command)
    try:
        run = lifetime.run(  # go's compiler, cargo's rustc, maven's JVM die with this process
            recipe.command,
            cwd=src,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"building the {language} native reference: `{shown}` did not finish within "
            f"{BUILD_TIMEOUT_S} s (in {src})"
        ) from None
    except OSError as exc:
        raise BuildError(
            f"building the {language} native reference: could not run `{shown}`: {exc}"
        ) from None
    if run.returncode != 0:
        tail = "\n".join(run.stdout.splitlines()[-OUTPUT_LINES:]) or "(no output)"
        raise BuildError(
            f"building the {language} native reference failed: `{shown}` exited with status "
            f"{run.returncode} (in {src}); its last output lines:\n{tail}"
        )
