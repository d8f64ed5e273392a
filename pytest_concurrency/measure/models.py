"""The model of a suite's own benchmark test: what its parametrization names, else none.

A library's existing benchmark tests take pytest-benchmark's ``benchmark`` and often run on the
library's own event-loop fixture, parametrized by loop: aiohttp's ``loop`` fixture has the ids
``pyloop`` and ``uvloop``, others name ``asyncio``, ``trio`` or ``threading``. Such an id (or a
string parameter's value) naming a model is the record's model, and leaves the parameters; a
test whose parametrization names none has no model (``backend`` is ``""``), and the tables and
messages name it by itself. Nothing is guessed from what the test imports.
"""

import re
from typing import Any

from .. import backends

#: Ids that name a model without being its spec.
ALIASES = {"pyloop": "asyncio", "asyncio_loop": "asyncio", "uv": "uvloop", "threads": "threading"}
NO_MODEL = ""


def _spec(text: str) -> str | None:
    name = ALIASES.get(text.lower(), text.lower())
    try:
        (spec,) = backends.parse_list(name)
    except (backends.UnknownBackend, ValueError):
        return None
    return spec


def of_parametrization(params: dict[str, Any], callspec_id: str) -> tuple[dict, dict]:
    """(the record's model keys, the params left) for a test parametrized with ``params`` and the
    id ``callspec_id`` (``"uvloop-10"``)."""
    named = {k: _spec(v) for k, v in params.items() if isinstance(v, str)}
    by_param = [(k, spec) for k, spec in named.items() if spec]
    by_id = [s for s in map(_spec, re.split(r"[-_]", callspec_id) if callspec_id else ()) if s]
    if by_param:
        key, spec = by_param[0]
        params = {k: v for k, v in params.items() if k != key}
    elif by_id:
        spec = by_id[0]
    else:
        return {"backend": NO_MODEL, "backend_version": ""}, params
    try:
        backend = backends.load(spec)
    except backends.Unsupported:
        return {"backend": spec, "backend_version": ""}, params
    return {
        "backend": spec,
        "backend_version": backend.version,
        "task_kind": backend.task_kind,
    }, params
