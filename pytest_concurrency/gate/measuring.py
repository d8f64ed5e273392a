"""Whether a counted baseline was measured by the same measuring side as this run.

Instruction counts repeat to the instruction, so anything on the measuring side that moves
them is read as the user's change: another version of this plugin (its backends, workloads,
instruments and workers run inside the counted process; two versions moved some cases ~9%),
another interpreter build, another valgrind. When one of these differs the gate gives no
verdict at all, neither a pass nor a regression, and asks for the baseline to be recorded
again, naming what changed. The user's own packages (and the concurrency libraries) are
what the gate is for: they never trigger it, they are named beside a verdict instead.
"""

from __future__ import annotations

from typing import Mapping

#: What is compared, and how it is called in the message.
PARTS = (("plugin", "pytest-concurrency"), ("code", "its measuring code"),
         ("python_build", "the Python build"), ("valgrind", "valgrind"))


def rerecord_reason(base_meta: Mapping, current_meta: Mapping, save_flag: str) -> str | None:
    """Why the baseline must be recorded again before counts compare, or ``None``."""
    now = current_meta.get("measuring")
    if not now:
        return None  # not an exact instrument: time is judged with its own guards
    then = base_meta.get("measuring")
    if not then:
        return (f"the baseline does not say what measured it (recorded by an earlier version of "
                f"pytest-concurrency): record it again with this version ({save_flag}) before "
                f"its counts can be compared")
    changed = [f"{name} {then.get(key, '?')} -> {now.get(key, '?')}"
               for key, name in PARTS if then.get(key) != now.get(key)]
    if not changed:
        return None
    return (f"the measuring side changed since the baseline ({'; '.join(changed)}): counts would move "
            f"with it, not with your code; record the baseline again ({save_flag}) with the new "
            f"measuring side, from the code the baseline measured")
