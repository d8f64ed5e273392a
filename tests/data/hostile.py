"""A user's own benchmark tests that misbehave, and two that behave (tests/test_isolation.py,
evidence/hostile_tests_evidence.py): copied into a session's directory as test_hostile.py."""

import ctypes
import os
import sys
import threading
import time

import pytest


def work():
    return sum(range(1000))


def test_fine(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=5)


def test_exits(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=2)
    print("leaving now", file=sys.stderr, flush=True)
    os._exit(3)


def test_segfaults(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(lambda: ctypes.string_at(0),), rounds=1)


def test_never_returns(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=1)
    while True:
        time.sleep(0.05)


def test_leaks_a_thread(benchmark, concurrency_backend):
    threading.Thread(target=threading.Event().wait, name="left-behind").start()
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=3)


def test_allocates_2gb(benchmark, concurrency_backend):
    block = bytearray(2 << 30)
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=3)
    assert len(block) == 2 << 30


def test_prints_100mb(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=3)
    sys.stdout.write("x" * 100_000_000)


def test_fails(benchmark, concurrency_backend):
    benchmark.pedantic(concurrency_backend.run, args=(work,), rounds=2)
    assert work() == 1


def test_skips(benchmark, concurrency_backend):
    pytest.skip("not today")
