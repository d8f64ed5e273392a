"""Shards: one suite run as N parts, each on a machine of its own, and merged afterwards.

A test belongs to shard ``crc32(node id) % N + 1``: it depends on the test's own node id alone,
so adding a test moves no other test to another shard (pytest-split's groups, cut by stored
durations, reshuffle when the suite grows) and nothing needs to be stored beforehand. The cost
is balance: shards hold N parts of the suite only on average (a suite of a few hundred
benchmarks splits within a few percent).

A shard's baseline and verdict file record ``{"index": I, "count": N, "holds": [...]}`` (the
benchmark tests each shard holds, as every shard counts them in the whole collection), so a
merge knows which shards must be there and that they ran the same suite. Judging a shard, the
baseline's benchmarks of the other shards are left out, not reported missing.
"""

import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..measure.records import params_id
from ..store import history, shape

MAX_COUNT = shape.MAX_SHARDS
_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


class ShardError(ValueError):
    """A shard spec that cannot be used; the message names it and the fix."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, nodeid: str) -> bool:
        return of(nodeid, self.count) == self.index


def parse(text: str) -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)``: the second of four shards."""
    m = _SPEC.fullmatch(str(text))
    if not m:
        raise ShardError(f"{text!r} is not a shard; write I/N, e.g. 2/4 (the second of 4)")
    index, count = int(m[1]), int(m[2])
    if not 1 <= count <= MAX_COUNT:
        raise ShardError(f"{text!r}: the number of shards must be 1 to {MAX_COUNT}")
    if not 1 <= index <= count:
        raise ShardError(f"{text!r}: the shard must be 1 to {count}, e.g. 1/{count}")
    return Shard(index, count)


def of(nodeid: str, count: int) -> int:
    """The shard (1..count) a test belongs to, by its node id."""
    return zlib.crc32(nodeid.encode("utf-8", "surrogatepass")) % count + 1


def holds(nodeids: Iterable[str], count: int) -> list[int]:
    """How many of ``nodeids`` each shard holds: ``[shard 1's, shard 2's, ...]``."""
    out = [0] * count
    for nodeid in nodeids:
        out[of(nodeid, count) - 1] += 1
    return out


def section(shard: Shard, held: list[int]) -> dict:
    """What a shard's files record of it (``shard`` in the ``pytest_concurrency`` section)."""
    return {"index": shard.index, "count": shard.count, "holds": list(held)}


def from_section(value, where: str) -> Shard | None:
    """The shard a file's ``shard`` section names (None: an unsharded run); ``ShardError`` for a
    damaged one."""
    if value is None:
        return None
    wrong = shape.shard(value)
    if wrong:
        raise ShardError(f"{where}: its shard section is damaged: shard{wrong}")
    return Shard(int(value["index"]), int(value["count"]))


def home(bench: Mapping, count: int) -> int:
    """The shard a baseline entry is judged in. Without a node id (a file not written by a
    pytest session) it is shard 1's, so that exactly one shard reports it, as one run would."""
    nodeid = bench.get("fullname")  # pytest-benchmark's, when it is one
    return of(nodeid, count) if isinstance(nodeid, str) and "::" in nodeid else 1


def mine(base: history.Baseline, shard: Shard) -> tuple[history.Baseline, int]:
    """The baseline with only this shard's benchmarks, and how many were left out.

    Its earlier sessions (``history``) keep a benchmark's entries where its latest session's
    entry is this shard's; an entry only they hold has no node id and is shard 1's. Chosen by
    each entry's node id, which its record does not keep, then parsed."""
    if shard.count == 1:
        return base, 0
    doc, kept, left = base.doc, [], 0
    placed: dict[tuple, int] = {}
    for bench in doc.get("benchmarks") or ():
        extra = bench.get("extra_info") or {}
        key = (extra.get("workload"), params_id(extra.get("params") or {}), extra.get("backend"))
        placed[key] = home(bench, shard.count)
        if placed[key] == shard.index:
            kept.append(bench)
        else:
            left += 1
    meta = dict(doc[history.SECTION])
    sessions = []
    for entry in meta.get("history") or ():
        benchmarks = [
            b
            for b in entry["benchmarks"]
            if placed.get((b["workload"], params_id(b["params"]), b["backend"]), 1) == shard.index
        ]
        sessions.append({**entry, "benchmarks": benchmarks})
    if "history" in meta:
        meta["history"] = sessions
    return history.Baseline.of({**doc, "benchmarks": kept, history.SECTION: meta}), left


def left_out_line(left: int, shard: Shard) -> str:
    """The one line a shard says of the baseline's benchmarks it does not judge."""
    return (
        f"shard {shard}: {left} benchmark{'s' * (left != 1)} of the baseline belong to other "
        "shards and are judged there, not here"
    )


def identity(cpu_model: str | None = None) -> dict:
    """What measured a run, for a merge to refuse shards that do not belong together: this
    plugin (version, the hash of its measuring code, the Python build), the architecture, and
    for time the machine itself (a time baseline from N machines does not compare)."""
    import os
    import platform

    from .. import measure
    from ..store.baseline import cpu_model as read_cpu_model

    return {
        **measure.measuring_side(),
        "machine": platform.machine(),
        "node": platform.node(),
        "cpu_model": cpu_model or read_cpu_model(),
        "cpu_count": os.cpu_count(),
    }
