"""trio: tasks in one nursery per run, memory channels, trio's own sockets (see ``_structured``)."""

from __future__ import annotations

import trio

from . import _structured


class Backend(_structured.StructuredBackend):
    name = "trio"
    library = "trio"

    def _start(self, entry, *args):
        return trio.run(entry, *args)

    def _task_group(self):
        return trio.open_nursery()

    def _event(self):
        return trio.Event()

    def _cancel_scope(self):
        return trio.CancelScope()

    def _memory_channel(self, size):
        return trio.open_memory_channel(size)

    def _call_soon_signal_safe(self):
        # TrioToken.run_sync_soon is the one trio call documented as safe in a signal handler.
        return trio.lowlevel.current_trio_token().run_sync_soon

    def _name_current_task(self, name):
        _structured.name_trio_task(name)

    def _task_lister(self):
        return _structured.trio_tasks_blocked

    async def sleep(self, seconds):
        await trio.sleep(seconds)

    async def _connect(self, host, port):
        stream = await trio.open_tcp_stream(host, port)  # TCP_NODELAY is trio's default
        return _structured.ByteStream(stream.send_all, stream.receive_some, stream.aclose)
