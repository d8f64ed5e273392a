"""``--concurrency-shard=I/N``: this process runs the I-th of N shards of the suite.

Every pytest process of a run (a counted run's probe, passes and counted session, each side
against the base) collects the same suite and keeps the same shard, as each test's shard is a
hash of its node id (gate/shards.py). The other shards' tests are deselected, as ``-k`` would.
"""

from collections.abc import Callable

import pytest

from .gate import shards

NAME = "concurrency-shard"


class Selector:
    def __init__(self, shard: shards.Shard, measures: Callable[[pytest.Item], bool]):
        self.shard = shard
        self.measures = measures  # whether a test is a benchmark test (roles.session.measures)
        self.held: list[int] = [0] * shard.count  # benchmark tests per shard, the whole suite's

    @pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: the shards split what is left
    def pytest_collection_modifyitems(self, config, items) -> None:
        self.held = shards.holds((i.nodeid for i in items if self.measures(i)), self.shard.count)
        mine = [i for i in items if self.shard.holds(i.nodeid)]
        if len(mine) < len(items):
            others = [i for i in items if not self.shard.holds(i.nodeid)]
            config.hook.pytest_deselected(items=others)
            items[:] = mine

    @property
    def empty(self) -> bool:
        """Whether this shard holds none of the suite's benchmark tests."""
        return self.held[self.shard.index - 1] == 0 and any(self.held)

    def section(self) -> dict:
        return shards.section(self.shard, self.held)

    def empty_line(self) -> str:
        return (
            f"shard {self.shard} holds none of the suite's {sum(self.held)} benchmark tests "
            f"(the shards hold {', '.join(map(str, self.held))}): nothing to judge or save here"
        )


def of(config) -> Selector | None:
    """This process's selector, when the run is a shard."""
    return config.pluginmanager.get_plugin(NAME)
