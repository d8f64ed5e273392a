"""The process a stored counted gate's moved counts are counted again in (roles/remeasure.py).

A count follows the process's start-up: where the interpreter's own objects land (the command
line's bytes, the environment's) decides which of the names a test looks up share a slot of
CPython's type-attribute cache. Two sessions of one command line count alike to the instruction;
a save and its judgement, whose command lines always differ, each draw their own: yarl's
``test_url_build_with_host_and_port`` counted 0.155% apart for two bytes of a file's name, and a
wrapped ``URL.build`` +3.8% in every judgement's layouts, nothing changed (docs/gates/
instructions.md). Forked layouts share their session's start-up, so they cannot show it; a
second session started otherwise can. This one is the counted session again (its layouts forked
after its collection, as the user's): its benchmark tests in their order (a count also follows
what ran before it), a longer environment (argv.py ``started_otherwise``) and another command
line; it writes their rounds and judges nothing.
"""

import json

from .. import benchmark_adapter as adapter
from ..measure import PROFILE_NONE, records
from ..store import atomic
from .counting import Counted
from .session import only_these


class Recount(Counted):
    """The first session's benchmark tests (``role.only``) counted again under valgrind, in as many
    layouts; at its end it writes their records to ``role.out``."""

    profiles = PROFILE_NONE  # only the first session's are read and saved
    memory_pass = False  # its memory figures are the first session's
    recounts = False  # it judges nothing: no baseline on its command line
    without_xdist = True

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        super().pytest_collection_modifyitems(session, config, items)
        only_these(self.role.need("only"), config, items)

    def finish(self, session, bs):
        if self.may_save() is None:  # its launcher, the first session, still waits for it
            doc = records.document(adapter.benchmarks(bs))
            atomic.write_text(self.role.need("out"), json.dumps(doc))
        return None
