"""A blocking TCP stream over any socket module (stdlib, gevent's, eventlet's green one)."""

from __future__ import annotations


class SocketStream:
    def __init__(self, sock):
        self._sock = sock

    @classmethod
    def connect(cls, socket_module, host: str, port: int) -> SocketStream:
        sock = socket_module.create_connection((host, port))
        sock.setsockopt(socket_module.IPPROTO_TCP, socket_module.TCP_NODELAY, 1)
        return cls(sock)

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)

    def recv_exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if not k:
                raise ConnectionError(f"peer closed after {got} of {n} bytes")
            got += k
        return bytes(buf)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
