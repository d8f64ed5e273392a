"""The loopback latency server: replies carry their id, after at least the delay; no leaks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

from pytest_concurrency.workloads import latency_server
from pytest_concurrency.workloads.latency_server import ENV, REQUEST

pytestmark = pytest.mark.timeout(60)


def _connect(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=20)  # a hang fails, it does not block CI
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _server_pid() -> int:
    """The pid of the server this process started."""
    assert latency_server._server is not None, "no server started here"
    return latency_server._server.pid


def _recv_reply(sock) -> tuple[int, int]:
    data = b""
    while len(data) < REQUEST.size:
        chunk = sock.recv(REQUEST.size - len(data))
        assert chunk, "server closed the connection"
        data += chunk
    return REQUEST.unpack(data)


def test_replies_carry_the_id_after_at_least_the_delay():
    address = latency_server.shared_address()
    for job, delay in ((7, 0.02), (2**40 + 3, 0.05), (0, 0.0)):
        with _connect(address) as sock:
            start = time.monotonic()
            sock.sendall(REQUEST.pack(job, round(delay * 1e6)))
            reply = _recv_reply(sock)
            waited = time.monotonic() - start
        assert reply == (job, round(delay * 1e6))
        assert waited >= delay


def test_requests_are_in_flight_at_once():
    # A slow request must not hold back a later fast one, on one connection or across many.
    address = latency_server.shared_address()
    with _connect(address) as sock:
        sock.sendall(REQUEST.pack(1, 60_000_000) + REQUEST.pack(2, 0))  # 60 s, then 0 s
        assert _recv_reply(sock) == (2, 0)
    socks = [_connect(address) for _ in range(50)]
    try:
        for job, sock in enumerate(socks):
            sock.sendall(REQUEST.pack(job, 10_000))
        assert [_recv_reply(sock)[0] for sock in socks] == list(range(50))
    finally:
        for sock in socks:
            sock.close()


def test_address_is_shared_through_the_environment_and_loopback_only():
    address = latency_server.shared_address()
    assert os.environ[ENV] == f"127.0.0.1:{address[1]}"
    pid = _server_pid()
    assert latency_server.shared_address() == address  # reused, not restarted
    assert _server_pid() == pid
    listening = [
        c for c in psutil.Process(pid).net_connections("tcp") if c.status == psutil.CONN_LISTEN
    ]
    assert [(c.laddr.ip, c.laddr.port) for c in listening] == [address]


def test_stop_leaves_no_process_and_a_new_one_starts():
    latency_server.shared_address()
    pid = _server_pid()
    latency_server.stop()
    assert not psutil.pid_exists(pid)
    assert ENV not in os.environ
    address = latency_server.shared_address()
    assert _server_pid() != pid
    with _connect(address) as sock:
        sock.sendall(REQUEST.pack(5, 0))
        assert _recv_reply(sock) == (5, 0)


def test_server_exits_when_its_starter_closes_stdin():
    # The backstop for a starter killed before atexit ran: EOF on stdin ends the server.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_concurrency.workloads.latency_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip().isdigit()
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_bad_address_in_the_environment_is_named(monkeypatch):
    monkeypatch.setenv(ENV, "nonsense")
    with pytest.raises(
        ValueError, match="PYTEST_CONCURRENCY_LATENCY_SERVER='nonsense' is not HOST:PORT"
    ):
        latency_server.shared_address()
