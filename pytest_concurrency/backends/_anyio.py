"""anyio on one of its backends: ``anyio[asyncio]``, ``anyio[trio]``, ``anyio[uvloop]``.

The variant is anyio's ``backend`` argument to ``anyio.run`` (uvloop is its asyncio backend
with ``use_uvloop=True``). Everything the workloads call goes through anyio's API (task
groups, ``Event``, memory object streams, ``connect_tcp``), so the difference to the raw
``asyncio``/``trio``/``uvloop`` models is the cost of the abstraction.
"""

from __future__ import annotations

import asyncio

import anyio

from . import _structured

_OPTIONS = {  # variant -> (anyio backend, backend_options)
    "asyncio": ("asyncio", {}),
    "trio": ("trio", {}),
    "uvloop": ("asyncio", {"use_uvloop": True}),
}


class Backend(_structured.StructuredBackend):
    library = "anyio"

    def __init__(self, variant: str = "asyncio"):
        self.name = f"anyio[{variant}]"
        self.variant = variant
        self._anyio_backend, self._options = _OPTIONS[variant]
        super().__init__()

    def _start(self, entry, *args):
        return anyio.run(entry, *args, backend=self._anyio_backend, backend_options=self._options)

    def _task_group(self):
        return anyio.create_task_group()

    def _event(self):
        return anyio.Event()

    def _cancel_scope(self):
        return anyio.CancelScope()

    def _memory_channel(self, size):
        return anyio.create_memory_object_stream(size)

    def _call_soon_signal_safe(self):
        if self._anyio_backend == "trio":
            import trio

            return trio.lowlevel.current_trio_token().run_sync_soon
        return asyncio.get_running_loop().call_soon_threadsafe

    def _name_current_task(self, name):
        if self._anyio_backend == "trio":
            _structured.name_trio_task(name)
        else:
            _structured.name_asyncio_task(name)

    def _task_lister(self):
        # On asyncio the watchdog lists the running loop's tasks itself.
        return _structured.trio_tasks_blocked if self._anyio_backend == "trio" else None

    async def sleep(self, seconds):
        await anyio.sleep(seconds)

    async def _connect(self, host, port):
        stream = await anyio.connect_tcp(host, port)  # sets TCP_NODELAY
        return _structured.ByteStream(stream.send, stream.receive, stream.aclose, anyio.EndOfStream)
