"""A baseline document from ``Record``s, built here rather than by a session: for the evidence
scripts and the tests that judge synthetic records (setup.cfg puts this folder on the tests'
path). Not a script: nothing to run.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from collections.abc import Iterable, Mapping

import pytest_benchmark
from pytest_benchmark.stats import Stats

from pytest_concurrency.measure.records import SCHEMA, Record
from pytest_concurrency.store import baseline


def document_from_records(
    records: Iterable[Record],
    meta: Mapping,
    machine_info: Mapping | None = None,
    commit_info: Mapping | None = None,
) -> dict:
    """A baseline document from ``Record``s (stats computed the way pytest-benchmark does)."""
    benchmarks = []
    for rec in records:
        extra = dict(rec.extra)
        extra.update(
            workload=rec.workload,
            params=dict(rec.params),
            backend=rec.backend,
            backend_version=rec.backend_version,
            ops=rec.ops,
            unit=rec.unit,
            concurrency_schema=SCHEMA,
        )
        name = rec.name or rec.label
        benchmarks.append(
            {
                "group": rec.group,
                "name": name,
                "fullname": name,
                "params": None,
                "param": None,
                "extra_info": extra,
                "options": {},
                "stats": {
                    **_summary(rec.samples),
                    "data": list(rec.samples),
                    "iterations": 1,
                },
            }
        )
    return {
        "machine_info": dict(machine_info) if machine_info else _machine_info(),
        "commit_info": dict(commit_info) if commit_info else {},
        "benchmarks": benchmarks,
        "datetime": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "version": pytest_benchmark.__version__,
        baseline.SECTION: dict(meta),
    }


def _machine_info() -> dict:
    uname = platform.uname()
    return {
        "node": uname.node,
        "processor": uname.processor,
        "machine": uname.machine,
        "python_implementation": platform.python_implementation(),
        "python_version": platform.python_version(),
        "release": uname.release,
        "system": uname.system,
        "cpu": {"count": os.cpu_count()},
    }


def _summary(samples) -> dict:
    """pytest-benchmark's statistics of ``samples``, as its files hold them."""
    stats = Stats()
    for sample in samples:
        stats.update(sample)
    return stats.as_dict()
