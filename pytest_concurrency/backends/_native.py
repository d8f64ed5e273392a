"""The native reference rows (go, rust, kotlin) as backends: a name, a version, a skip reason.

They run no Python code: ``concurrency_benchmark`` hands a seed workload case to the
language's own program (``pytest_concurrency.native``). ``run`` says so to a test that tries.
"""

from __future__ import annotations

from . import toolchains
from .base import Backend as _Backend
from .base import Unsupported


class Backend(_Backend):
    family = "native"
    task_kind = "light"  # goroutines, tokio tasks, coroutines
    native = True

    def __init__(self, language: str):
        self.name = language
        self.library = toolchains.TOOLCHAINS[language].library

    @property
    def version(self) -> str:
        return toolchains.version(self.name)

    def run(self, main, *args):
        raise Unsupported(
            f"{self.name} is a native reference: it runs the seed workloads in its own "
            "program (through concurrency_benchmark), not Python code"
        )

    def unsupported_measure(self, instrument) -> str | None:
        if instrument.kind != "time":
            return (
                f"a native program is outside what --concurrency-measure={instrument.kind} compares "
                "(it counts the Python interpreter's rounds under valgrind); measure it with time"
            )
        return None
