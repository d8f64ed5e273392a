"""asyncio with uvloop's libuv-based event loop: same primitives, a faster loop underneath."""

from __future__ import annotations

import asyncio

import uvloop

from . import _asyncio


class Backend(_asyncio.Backend):
    name = "uvloop"
    library = "uvloop"

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return uvloop.new_event_loop()
