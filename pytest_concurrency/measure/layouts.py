"""Layouts: the same code counted with the interpreter's objects landing elsewhere.

A count follows where objects land. CPython caches type attribute lookups by the type's version
and the *address* of the attribute's name, so in some layouts two names a test looks up at every
step share a slot and evict each other (a gevent ring counted 2.8% more with only its directory's
name changed), and pymalloc's pools and libc's free lists follow the layout as well. A change
anywhere in the code moves every object allocated after it, and so does another directory; the
code a test runs has no layout of its own. Counting it in several layouts and taking the median
(gate/stats.py) judges the code rather than where its objects happened to land.

Layout 0 is the process as started. Layout N first allocates ``N * PAD_OBJECTS`` small objects of
mixed sizes, kept alive: either in a process of its own before pytest, the plugins and the code
under test are imported (``padding``), or in a process forked from the counted session after
its collection, before its first round (``pad``): there everything the tests allocate lands
elsewhere, while the start-up's objects stay where the counted session has them.

A forked layout also draws the type cache anew (``retag``). The cache's slot for a lookup is the
type's version tag XOR the name's address, and both were fixed by the start-up: the order its
imports first looked types up in, where they put the names. A judgement starts up otherwise than
its save (another command line, the baseline read before collection), so every layout forked from
it inherited one pattern of colliding lookups, and a benchmark counted +2.3-3.8% against its own
save in each of them alike, where the median over layouts could not help. Fresh tags, a number of
them consumed that differs by layout, make each forked layout another draw of that pattern.
"""

import sys
from statistics import median

#: Strings of several lengths, an odd number of them: each of the allocator's size classes moves by
#: another amount, so the names imported afterwards land at other offsets in their pools.
PAD_OBJECTS = 101


def padding(layout: int) -> str:
    """Python that moves a fresh process to ``layout`` before it imports anything (the launcher's
    ``child_sessions.command`` runs pytest after it)."""
    return f"_pad = [str(k) * (1 + k % 14) for k in range({layout * PAD_OBJECTS})]"


_kept: list = []  # the objects ``pad`` allocated: alive as long as the process
_current = 0  # the layout ``pad`` moved this process to


def pad(layout: int) -> None:
    """Move this process's heap to ``layout`` from here on (a process forked for it)."""
    global _current
    _kept.append(_objects(layout))
    retag(layout)
    _current = layout


#: Version tags a layout consumes more than the one before it: only a tag's low 12 bits pick a slot
#: of the cache's 4096, and this step puts layouts 1, 2, 3... far apart among them.
TAGS_STEP = 1361
#: Tags a throwaway class is given before the next one: 3.12+ stop tagging a class after 1000.
_TAGS_PER_CLASS = 500


def retag(layout: int) -> None:
    """Invalidate every type's version tag, then consume ``layout * TAGS_STEP`` (mod 4096) tags, so
    the types the tests look up next are tagged as this layout's own. On CPython only; 3.11-3.13's
    ``sys._clear_type_cache`` empties the cache but keeps the tags (3.10's also drops them), while
    ``PyType_Modified(object)`` drops them on every version (it walks object's subclasses)."""
    if sys.implementation.name != "cpython":
        return
    import ctypes  # here: no process but a forked layout pays its import

    sys._clear_type_cache()
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(object))
    left = layout * TAGS_STEP % 4096
    while left:
        throwaway = type("_Retag", (), {"a": 0})
        for _ in range(min(left, _TAGS_PER_CLASS)):
            # a set drops its tag; the lookup after it gives it the next one
            throwaway.a = 0  # type: ignore[attr-defined]
            throwaway.a  # type: ignore[attr-defined]  # noqa: B018
        left -= min(left, _TAGS_PER_CLASS)


def forked_to() -> int:
    """The layout this process was forked for and moved to (0: none, or started in it)."""
    return _current


def _objects(layout: int) -> list[str]:
    return [str(k) * (1 + k % 14) for k in range(layout * PAD_OBJECTS)]


#: Two layouts whose medians lie within this fraction of each other agree. The median of three
#: lies between any two of them, so when two agree a third can move it by no more than this: a
#: tenth of the 1% judged over three layouts (gate/stats.py ``SAME_COUNT``). Forked layouts that
#: agree count alike or within 0.05% (9 of yarl's 11 URL benchmarks in a save); those that
#: disagree, by 0.4-0.9% (docs/gates/instructions.md).
AGREE = 0.001
#: The layouts whose median a third is needed for only where the first two disagree.
OF_THREE = 3


def medians_agree(a: list[float], b: list[float]) -> bool:
    """Whether two layouts' rounds have medians within ``AGREE`` of each other."""
    ma, mb = median(a), median(b)
    return abs(ma - mb) <= AGREE * max(abs(ma), abs(mb))


def counted_in(layouts: list[list[float]]) -> int:
    """How many layouts a count stands for: those counted, or three for two that agree (the third,
    not counted, could not have moved their median of three beyond ``AGREE``)."""
    if len(layouts) == OF_THREE - 1 and all(layouts) and medians_agree(*layouts):
        return OF_THREE
    return len(layouts)
