"""Whether a counted baseline was measured by the same measuring side as this run.

Instruction counts repeat to the instruction, so anything on the measuring side that moves
them is read as the user's change: another version of this plugin (its backends, workloads,
instruments and workers run inside the counted process; two versions moved some cases ~9%),
another interpreter build, another valgrind. When one of these differs the gate gives no
verdict at all, neither a pass nor a regression, and asks for the baseline to be recorded
again, naming what changed. The user's own packages (and the concurrency libraries) are
what the gate is for: they never trigger it, they are named beside a verdict instead.
"""

from collections.abc import Mapping

#: What is compared, and how it is called in the message.
PARTS = (
    ("plugin", "pytest-concurrency"),
    ("code", "its measuring code"),
    ("python_build", "the Python build"),
    ("valgrind", "valgrind"),
)


def rerecord_reason(base_meta: Mapping, current_meta: Mapping, save_flag: str) -> str | None:
    """Why the baseline must be recorded again before counts compare, or ``None``."""
    now = current_meta.get("measuring")
    if not now:
        return None  # not an exact instrument: time is judged with its own guards
    then = base_meta.get("measuring")
    if not then:
        return (
            f"the baseline does not say what measured it (recorded by an earlier version of "
            f"pytest-concurrency): record it again with this version ({save_flag}) before "
            f"its counts can be compared"
        )
    changed = [
        f"{name} {then.get(key, '?')} -> {now.get(key, '?')}"
        for key, name in PARTS
        if then.get(key) != now.get(key)
    ]
    if not changed:
        return None
    return (
        f"the measuring side changed since the baseline ({'; '.join(changed)}): counts would move "
        f"with it, not with your code; record the baseline again ({save_flag}) with the new "
        f"measuring side, from the code the baseline measured"
    )


def layout_note(base_meta: Mapping, current_meta: Mapping) -> str | None:
    """A counted baseline recorded in another working directory: said beside the verdicts.

    Where the interpreter's objects land follows everything a process did before the rounds,
    down to the length of its directory's name, and counts follow where they land: CPython
    3.11's type-attribute cache is indexed by the names' addresses, and a gevent ring counted
    2.8% more with only its directory's name changed (evidence/count_layouts.py). Not a reason
    to refuse: most directories move counts by less than 0.3%; a reason to know."""
    then, now = base_meta.get("directory"), current_meta.get("directory")
    if not isinstance(then, str) or not isinstance(now, str) or then == now:
        return None
    # repr: the baseline's string is shown as data (a control character in it is escaped)
    return (
        f"counted in another directory than the baseline ({then!r} -> {now!r}): counts follow where "
        f"the interpreter's objects land, which follows the directory's name (a gevent ring moved "
        f"2.8% with only that changed); record the baseline in the directory it is judged in, "
        f"as the same CI job does"
    )
