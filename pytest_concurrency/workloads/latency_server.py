"""A loopback TCP server that answers each request after the delay the request names.

It stands in for seed 004's ``select sleep(0.1)`` database: the IO workload's tasks each
connect, send one request and wait for the reply. It runs in a process of its own so that
its work does not share the GIL with the model being measured.

Protocol: a request is ``REQUEST`` (request id, delay in microseconds), 16 bytes; the
reply is the same 16 bytes, sent once the delay has passed. Requests are independent:
many can be in flight at once, on one connection or many.

``shared_address()`` starts one server per test session lazily and reuses it; it exports
the address in ``child_env.LATENCY_SERVER`` so that worker processes reuse it
too, and stops it at exit. The server also exits when its stdin closes, so it cannot
outlive the process that started it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import struct
import subprocess
import sys
import threading

from ..backends import child_env

ENV = child_env.LATENCY_SERVER
HOST = "127.0.0.1"
REQUEST = struct.Struct("!QQ")  # request id, delay in microseconds; the reply echoes it

_lock = threading.Lock()
_server: subprocess.Popen | None = None
_owner_pid = 0


# -- server side ---------------------------------------------------------------------


async def serve(host: str = HOST, port: int = 0) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readexactly(REQUEST.size)
                _, delay_us = REQUEST.unpack(request)
                loop.call_later(delay_us / 1e6, _reply, writer, request)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    # A large backlog: 500 clients connect at the same instant (seed 004).
    server = await asyncio.start_server(handle, host, port, backlog=4096)
    stdin = sys.stdin.fileno()
    loop.add_reader(stdin, _on_stdin, stdin, done)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await done


def _reply(writer: asyncio.StreamWriter, request: bytes) -> None:
    if not writer.is_closing():
        writer.write(request)


def _on_stdin(fd: int, done: asyncio.Future) -> None:
    if not os.read(fd, 4096) and not done.done():  # EOF: whoever started us is gone
        done.set_result(None)


# -- client side ---------------------------------------------------------------------


def shared_address() -> tuple[str, int]:
    """The running server's ``(host, port)``, starting it on first use."""
    with _lock:
        value = child_env.get(ENV)
        if value:
            return parse_address(value)
        return _start()


def parse_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{ENV}={value!r} is not HOST:PORT; unset it to start a server")
    return host, int(port)


def _start() -> tuple[str, int]:
    global _server, _owner_pid
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", __name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None  # both are pipes
    line = proc.stdout.readline().strip()
    if not line.isdigit():
        proc.kill()
        proc.wait()
        raise RuntimeError(
            f"latency server did not start (exit code {proc.returncode}, printed {line!r}); "
            f"run `{sys.executable} -m {__name__}` to see why"
        )
    _server, _owner_pid = proc, os.getpid()
    os.environ[ENV] = f"{HOST}:{line}"
    atexit.register(stop)
    return HOST, int(line)


def stop() -> None:
    """Stop the server this process started, if any, and forget its address."""
    global _server
    with _lock:
        proc, _server = _server, None
        if proc is None or os.getpid() != _owner_pid:  # a forked child does not own it
            return
        os.environ.pop(ENV, None)
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        proc.stdin.close()  # the server exits on EOF
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
