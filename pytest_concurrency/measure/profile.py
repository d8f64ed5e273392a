"""Where a counted round's instructions went: by function and by shared object.

A callgrind dump (see callgrind.py) lists each function's own (exclusive) cost under the
object file it ran in: the interpreter (``libpython3.11`` or ``python3.11``), a C extension
(``_greenlet``, ``loop`` for uvloop, ``_gevent_c...``), libc. A record keeps

``profile``          the costliest ``FUNCTIONS`` functions: ``[[function, object, count], ...]``
``profile_objects``  every object's total: ``[[object, count], ...]``, costliest first

and a regression is explained by what grew per op in each (``growth``): the functions name
the code, the objects say whether it was the interpreter, a library's C code or libc.
"""

import os

FUNCTIONS = 40  # the costliest functions of a round kept for "where did it grow"
SHOWN = 3  # functions (and objects) named in an explanation


def read(path: str, top: int = FUNCTIONS) -> dict:
    """The record keys above, from one dump.

    The format compresses names: ``fn=(12) name`` defines id 12, a later ``fn=(12)`` reuses
    it, and the ids are shared with the called-function lines (``cfn=``, ``cob=``). The cost
    line after ``calls=`` is the call's inclusive cost, not the caller's own.
    """
    names: dict[tuple[str, str], str] = {}
    self_cost: dict[tuple[str, str], int] = {}
    current_ob = current_fn = ""
    skip_next = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line[:4]
            if head[:1].isdigit() or head[:1] in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                if len(parts) >= 2:
                    key = (current_ob, current_fn)
                    self_cost[key] = self_cost.get(key, 0) + int(parts[1])
                continue
            kind, sep, value = line.rstrip("\n").partition("=")
            if not sep:
                continue
            if kind in ("ob", "cob", "fn", "cfn"):
                name = _define(names, kind.lstrip("c"), value)
                if kind == "ob":
                    current_ob = name
                elif kind == "fn":
                    current_fn = name
            elif kind == "calls":
                skip_next = True
    objects: dict[str, int] = {}
    for (ob, _), count in self_cost.items():
        objects[_library(ob)] = objects.get(_library(ob), 0) + count
    ranked = sorted(self_cost.items(), key=lambda item: -item[1])[:top]
    return {
        "profile": [[fn, _library(ob), count] for (ob, fn), count in ranked],
        "profile_objects": sorted(
            ([lib, count] for lib, count in objects.items()), key=lambda e: -e[1]
        ),
    }


def _define(names: dict, space: str, value: str) -> str:
    if value.startswith("("):
        ident, _, name = value[1:].partition(")")
        name = name.strip()
        if name:
            names[(space, ident)] = name
            return name
        return names.get((space, ident), f"?{ident}")
    return value


def _library(path: str) -> str:
    """``/x/_greenlet.cpython-311-x86_64-linux-gnu.so`` -> ``_greenlet``."""
    base = os.path.basename(path) or "?"
    for cut in (".cpython-", ".so"):
        if cut in base:
            return base.split(cut)[0]
    return base


def growth(base, current, shown: int = SHOWN) -> str | None:
    """What grew per op from ``base`` to ``current`` (records with a ``profile``):
    ``where: +1,210 instr/hop: g_switch (_greenlet) +640, ...; by object: _greenlet +700, ...``.

    A profile lists only the costliest functions: one new to the list cost at most the
    baseline's last listed function before, so its growth is counted from that, never invented.
    Objects are complete, so theirs is exact.
    """
    before, after = _per_op(base, "profile"), _per_op(current, "profile")
    if not before or not after:
        return None
    floor = min(before.values())
    grown = _largest({key: now - before.get(key, floor) for key, now in after.items()}, shown)
    if not grown:
        return None
    total = current.median / current.ops - base.median / base.ops
    text = f"where: {total:+,.0f} instr/{current.unit}: " + ", ".join(
        f"{_short(fn)} ({lib}) +{g:,.0f}" for g, (fn, lib) in grown
    )
    objects_before, objects_after = (
        _per_op(base, "profile_objects"),
        _per_op(current, "profile_objects"),
    )
    if objects_before and objects_after:
        moved = _largest(
            {lib: now - objects_before.get(lib, 0) for lib, now in objects_after.items()}, shown
        )
        if moved:
            text += "; by object: " + ", ".join(f"{lib} +{g:,.0f}" for g, lib in moved)
    return text


def _largest(growths: dict, shown: int) -> list:
    return sorted(((g, key) for key, g in growths.items() if g > 0), reverse=True)[:shown]


def _per_op(rec, key: str) -> dict:
    entries = rec.extra.get(key) or []
    return {
        tuple(entry[:-1]) if len(entry) > 2 else entry[0]: entry[-1] / rec.ops for entry in entries
    }


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


if __name__ == "__main__":  # callgrind.py ``received_apart``: dumps' paths in, their keys out
    import json
    import sys

    json.dump({path: read(path) for path in json.load(sys.stdin)}, sys.stdout)
