"""The fresh process a stored time gate's suspects are measured again in (roles/remeasure.py)."""

import dataclasses
import json

from .. import benchmark_adapter as adapter
from ..measure import records
from ..store import atomic
from . import crash
from .role import Role
from .session import MeasuringSession, only_these


class Again(MeasuringSession):
    """The fresh process: only the suspects' tests (``role.only``), measured as the session's own
    were; at its end it writes their rounds to ``role.out`` and judges nothing (no baseline is
    on its command line)."""

    without_xdist = True

    def __init__(self, config, settings, role: Role):
        # every round the first session had planned: the gate tests them against the baseline's
        super().__init__(config, dataclasses.replace(settings, all_rounds=True))
        self.role = role
        self.in_progress = crash.Running(role.running)  # a test that ends it is named

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        super().pytest_collection_modifyitems(session, config, items)
        only_these(self.role.need("only"), config, items)

    def finish(self, session, bs):
        atomic.write_text(
            self.role.need("out"), json.dumps(records.document(adapter.benchmarks(bs)))
        )
        return None
