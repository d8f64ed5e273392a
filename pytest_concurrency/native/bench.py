"""A native reference row as a pytest-benchmark record, beside the Python models' rows."""

import pytest

from .. import benchmark_adapter as adapter
from .. import workloads
from ..measure import driver
from ..measure.plan import CasePlan
from ..measure.wallclock import WALLCLOCK
from . import build, checks, child

REFERENCE = "native"  # extra_info["reference"]: the reports label the row, the gate sets it aside


def unsupported(workload_ref: str) -> str | None:
    """Why a native program cannot run this workload: only the seed workloads are written in it."""
    if workload_ref not in checks.SEEDS:
        return f"a native reference runs the seed workloads only ({', '.join(checks.SEEDS)}), not {workload_ref}"
    return None


def identity(backend, workload, params: dict) -> dict:
    return {**driver.identity(backend, workload, params, WALLCLOCK), "reference": REFERENCE}


def bench(benchmark, backend, plan: CasePlan, on_round=None) -> None:
    """Build if needed, run the case in the language's program, check it, record it."""
    what = plan.label
    try:
        samples, extra = child.measure(plan, on_round)
    except build.BuildError as exc:
        pytest.fail(f"{what}: {exc}", pytrace=False)
    except child.NativeTimeout as exc:
        pytest.fail(
            f"{what}: {exc}, so it was killed. Deadlock or stall? Raise --concurrency-timeout "
            "if the workload is just slow.",
            pytrace=False,
        )
    except child.NativeFailure as exc:
        pytest.fail(f"{what}: the native program failed: {exc}", pytrace=False)
    except workloads.WorkloadError as exc:
        pytest.fail(f"{what}: {exc}", pytrace=False)
    adapter.mark_used(benchmark, "pytest-concurrency native program")
    driver.record_external(benchmark, identity(backend, plan.workload, plan.params), samples, extra)
