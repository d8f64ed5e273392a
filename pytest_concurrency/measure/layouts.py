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
"""

from statistics import median

#: Strings of several lengths, an odd number of them: each of the allocator's size classes moves by
#: another amount, so the names imported afterwards land at other offsets in their pools.
PAD_OBJECTS = 101


def padding(layout: int) -> str:
    """Python that moves a fresh process to ``layout`` before it imports anything (the launcher's
    ``child_sessions.command`` runs pytest after it)."""
    return f"_pad = [str(k) * (1 + k % 14) for k in range({layout * PAD_OBJECTS})]"


_kept: list = []  # the objects ``pad`` allocated: alive as long as the process


def pad(layout: int) -> None:
    """Move this process's heap to ``layout`` from here on (a process forked for it)."""
    _kept.append([str(k) * (1 + k % 14) for k in range(layout * PAD_OBJECTS)])


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
