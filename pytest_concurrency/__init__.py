"""pytest-concurrency: concurrency regression testing for pytest.

Public API for users' own benchmarks: the ``concurrency_backend`` fixture hands a test a
``Backend`` (see ``pytest_concurrency.backends.base`` for the primitives), and the seed
workloads are importable from ``pytest_concurrency.workloads``.
"""

from .backends import DEFAULT_SPECS
from .backends import load as load_backend
from .backends.base import (
    AsyncBackend,
    Backend,
    ConcurrencyError,
    Deadlock,
    SyncBackend,
    TaskFailed,
    Unsupported,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncBackend",
    "Backend",
    "ConcurrencyError",
    "DEFAULT_SPECS",
    "Deadlock",
    "SyncBackend",
    "TaskFailed",
    "Unsupported",
    "load_backend",
]
