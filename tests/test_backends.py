"""The primitives behave the same on every backend: one body per test, every backend spec.

Sync and async code cannot share a function body, so each test has a sync ``main`` and an
async one with the same steps; ``run_main`` picks by family. Task functions are
module-level so ``multiprocessing`` can pickle them into its children.

Ordering checks are causal, never timed: where a test must show that a ``put`` is still
blocked, a helper task reports "timer" after a short sleep, and a correct backend can
only let the blocked put's own report through after main has read "timer" and then done
the ``get`` that frees it. A broken backend lets it through first.
"""

from __future__ import annotations

import multiprocessing
import os
import socketserver
import subprocess
import sys
import threading
import time

import pytest

from pytest_concurrency import backends
from pytest_concurrency.backends import base

SPECS = backends.DEFAULT_SPECS + backends.EXTRA_SPECS
TIMER_S = 0.3  # how long a blocked put is left blocked before main frees it


def load(spec: str) -> base.Backend:
    reason = backends.unavailable_reason(spec)
    if reason:
        pytest.skip(reason)
    return backends.load(spec)


@pytest.fixture(params=SPECS)
def backend(request) -> base.Backend:
    return load(request.param)


def run_main(backend, sync_main, async_main, *args):
    main = async_main if backend.family == "async" else sync_main
    return backend.run(main, backend, *args)


# --- task functions (module level: multiprocessing pickles them) --------------------------


def square(b, x):
    return x * x


def fail(b, message):
    raise ValueError(message)


def report_then_fail(b, status, message):
    status.put("about to raise")
    raise ValueError(message)


def put_all(b, ch, items, status):
    for i, item in enumerate(items):
        ch.put(item)
        status.put(f"put {i}")
    status.put("all put")
    return len(items)


def report_later(b, status, seconds, word):
    b.sleep(seconds)
    status.put(word)


def fail_after_main_returned(b, status, seconds, message):
    status.put("about to raise")
    busy_until = time.monotonic() + seconds  # still working (not blocked) when main returns
    while time.monotonic() < busy_until:
        pass
    raise ValueError(message)


def block_forever(b, status, ended):
    try:
        status.put("blocked")
        b.channel(None).get()  # nothing will answer
    finally:
        ended.put("finally ran")


def echo_roundtrip(b, host, port, payload):
    conn = b.open_connection(host, port)
    try:
        conn.sendall(payload)
        return conn.recv_exactly(len(payload))
    finally:
        conn.close()


def exit_with(b, code):
    os._exit(code)


class NeedsTwoArgs(Exception):
    def __init__(self, a, b):  # pickles as NeedsTwoArgs(a): unpickling fails
        super().__init__(a)


def raise_unpicklable(b):
    raise NeedsTwoArgs("first", "second")


def burn_cpu(b, n):
    return sum(i * i for i in range(n))


async def a_square(b, x):
    return x * x


async def a_fail(b, message):
    raise ValueError(message)


async def a_report_then_fail(b, status, message):
    await status.put("about to raise")
    raise ValueError(message)


async def a_put_all(b, ch, items, status):
    for i, item in enumerate(items):
        await ch.put(item)
        await status.put(f"put {i}")
    await status.put("all put")
    return len(items)


async def a_report_later(b, status, seconds, word):
    await b.sleep(seconds)
    await status.put(word)


async def a_echo_roundtrip(b, host, port, payload):
    conn = await b.open_connection(host, port)
    try:
        await conn.sendall(payload)
        return await conn.recv_exactly(len(payload))
    finally:
        await conn.close()


# --- tests ---------------------------------------------------------------------------------


def test_run_returns_mains_result(backend):
    def main(b, x):
        return ("main", b.name, x)

    async def a_main(b, x):
        return ("main", b.name, x)

    assert run_main(backend, main, a_main, 7) == ("main", backend.name, 7)


def test_name_is_the_canonical_spec(backend):
    assert backend.name == backends.canonical(backend.name)
    assert backend.family in ("sync", "async")


def test_join_returns_results(backend):
    def main(b):
        tasks = [b.spawn(square, b, x) for x in range(4)]
        return [t.join() for t in tasks]

    async def a_main(b):
        tasks = [b.spawn(a_square, b, x) for x in range(4)]
        return [await t.join() for t in tasks]

    assert run_main(backend, main, a_main) == [0, 1, 4, 9]


@pytest.mark.parametrize("capacity", [0, 3, None])
def test_fifo_order(backend, capacity):
    items = list(range(20))

    def main(b):
        ch, status = b.channel(capacity), b.channel(None)
        producer = b.spawn(put_all, b, ch, items, status)
        got = [ch.get() for _ in items]
        return got, producer.join()

    async def a_main(b):
        ch, status = b.channel(capacity), b.channel(None)
        producer = b.spawn(a_put_all, b, ch, items, status)
        got = [await ch.get() for _ in items]
        return got, await producer.join()

    assert run_main(backend, main, a_main) == (items, len(items))


def test_rendezvous_put_waits_for_a_get(backend):
    def main(b):
        ch, status = b.channel(0), b.channel(None)
        producer = b.spawn(put_all, b, ch, ["x"], status)
        b.spawn(report_later, b, status, TIMER_S, "timer")
        first = status.get()  # the producer is stuck in put: only the timer can report
        item = ch.get()
        return [first, item, status.get(), status.get(), producer.join()]

    async def a_main(b):
        ch, status = b.channel(0), b.channel(None)
        producer = b.spawn(a_put_all, b, ch, ["x"], status)
        b.spawn(a_report_later, b, status, TIMER_S, "timer")
        first = await status.get()
        item = await ch.get()
        return [first, item, await status.get(), await status.get(), await producer.join()]

    assert run_main(backend, main, a_main) == ["timer", "x", "put 0", "all put", 1]


def test_bounded_put_blocks_when_full(backend):
    capacity = 3
    items = list(range(capacity + 1))

    def main(b):
        ch, status = b.channel(capacity), b.channel(None)
        producer = b.spawn(put_all, b, ch, items, status)
        log = [status.get() for _ in range(capacity)]  # the first N puts need no get
        b.spawn(report_later, b, status, TIMER_S, "timer")
        log.append(status.get())  # put N+1 is blocked: the timer reports first
        log.append(ch.get())
        log += [status.get(), status.get()]
        log += [ch.get() for _ in range(capacity)]
        return log, producer.join()

    async def a_main(b):
        ch, status = b.channel(capacity), b.channel(None)
        producer = b.spawn(a_put_all, b, ch, items, status)
        log = [await status.get() for _ in range(capacity)]
        b.spawn(a_report_later, b, status, TIMER_S, "timer")
        log.append(await status.get())
        log.append(await ch.get())
        log += [await status.get(), await status.get()]
        log += [await ch.get() for _ in range(capacity)]
        return log, await producer.join()

    log, count = run_main(backend, main, a_main)
    assert log == ["put 0", "put 1", "put 2", "timer", 0, "put 3", "all put", 1, 2, 3]
    assert count == len(items)


def test_unbounded_put_never_blocks(backend):
    n = 200  # no task ever gets until every put returned

    def main(b):
        ch = b.channel(None)
        for i in range(n):
            ch.put(i)
        return [ch.get() for _ in range(n)]

    async def a_main(b):
        ch = b.channel(None)
        for i in range(n):
            await ch.put(i)
        return [await ch.get() for _ in range(n)]

    assert run_main(backend, main, a_main) == list(range(n))


def test_sleeping_task_lets_others_run(backend):
    def main(b):
        status = b.channel(None)
        b.spawn(report_later, b, status, 0.5, "sleeper")  # spawned first, runs first
        b.spawn(report_later, b, status, 0, "quick")
        return [status.get(), status.get()]

    async def a_main(b):
        status = b.channel(None)
        b.spawn(a_report_later, b, status, 0.5, "sleeper")
        b.spawn(a_report_later, b, status, 0, "quick")
        return [await status.get(), await status.get()]

    assert run_main(backend, main, a_main) == ["quick", "sleeper"]


def test_joined_task_exception_names_the_backend(backend):
    def main(b):
        try:
            b.spawn(fail, b, "boom-joined").join()
        except base.TaskFailed as exc:
            return exc
        return None

    async def a_main(b):
        try:
            await b.spawn(a_fail, b, "boom-joined").join()
        except base.TaskFailed as exc:
            return exc
        return None

    error = run_main(backend, main, a_main)  # joined: run itself does not raise
    assert isinstance(error, base.TaskFailed)
    assert f"[{backend.name}]" in str(error) and "boom-joined" in str(error)
    assert isinstance(error.__cause__, ValueError)


def test_unjoined_task_exception_fails_run(backend):
    def main(b):
        status = b.channel(None)
        b.spawn(report_then_fail, b, status, "boom-unjoined")
        status.get()
        b.sleep(0.2)  # let the task reach its raise
        return "main done"

    async def a_main(b):
        status = b.channel(None)
        b.spawn(a_report_then_fail, b, status, "boom-unjoined")
        await status.get()
        await b.sleep(0.2)
        return "main done"

    with pytest.raises(base.TaskFailed) as info:
        run_main(backend, main, a_main)
    assert f"[{backend.name}]" in str(info.value) and "boom-unjoined" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture(scope="module")
def echo_server():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address
    server.shutdown()
    server.server_close()


def test_open_connection_echoes(backend, echo_server):
    host, port = echo_server
    payloads = [bytes([i]) * (1000 + i) for i in range(3)]

    def main(b):
        tasks = [b.spawn(echo_roundtrip, b, host, port, p) for p in payloads]
        return [t.join() for t in tasks]

    async def a_main(b):
        tasks = [b.spawn(a_echo_roundtrip, b, host, port, p) for p in payloads]
        return [await t.join() for t in tasks]

    if backend.name == "greenlet":
        with pytest.raises(base.TaskFailed) as info:
            run_main(backend, main, a_main)
        assert isinstance(info.value.__cause__, base.Unsupported)
        assert "greenlet has no sockets" in str(info.value)
        return
    assert run_main(backend, main, a_main) == payloads


@pytest.mark.parametrize("spec", ["greenlet", "gevent"])
def test_deadlock_raises_instead_of_hanging(spec):
    b = load(spec)

    def main(b):
        ch = b.channel(0)
        b.spawn(square, b, 2)
        return ch.get()  # nobody will ever put

    with pytest.raises(base.Deadlock, match=rf"\[{spec}\] deadlock"):
        b.run(main, b)


def test_multiprocessing_child_exit_code_fails_join():
    b = load("multiprocessing[forkserver]")

    def main(b):
        b.spawn(exit_with, b, 3).join()

    with pytest.raises(base.TaskFailed, match="exit code 3") as info:
        b.run(main, b)
    assert "[multiprocessing[forkserver]]" in str(info.value)


def test_multiprocessing_error_that_cannot_be_unpickled_still_fails_join():
    b = load("multiprocessing[forkserver]")

    with pytest.raises(base.TaskFailed, match="cannot be unpickled in the parent"):
        b.run(lambda: b.spawn(raise_unpicklable, b).join())


def test_multiprocessing_queues_made_in_a_run_end_their_feeder_threads_with_it():
    b = load("multiprocessing[fork]")
    kept = b.channel(4)  # made before the run: the caller's, still usable after it

    def main():
        ch = b.channel(4)
        task = b.spawn(put_all, b, ch, [1, 2, 3], kept)
        got = [ch.get() for _ in range(3)]
        task.join()
        ch.put("left in the queue")  # the parent's own put: its feeder thread
        return got

    before = threading.active_count()
    assert b.run(main) == [1, 2, 3]
    assert (
        threading.active_count() == before
    )  # no feeder thread outlives the run (the memory pass counts threads)
    assert [kept.get(timeout=5) for _ in range(4)] == ["put 0", "put 1", "put 2", "all put"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_multiprocessing_feeder_threads_have_left_the_os_when_a_run_returns():
    """A joined thread still frees its state for a moment, under tracemalloc holding its lock: a
    fork then made a child blocked forever (CPython 3.11). Right after ``join`` the OS thread was
    still there in 38% of 200 tries; 30 runs here, ~0.3 s."""
    b = load("multiprocessing[fork]")

    def main():
        ch = b.channel(None)
        ch.put("the parent's own put: its feeder thread")
        return ch.get()

    before = set(os.listdir("/proc/self/task"))
    for _ in range(30):
        b.run(main)
        assert set(os.listdir("/proc/self/task")) <= before


def test_multiprocessing_reports_child_cpu_and_resets():
    b = load("multiprocessing[forkserver]")
    b.take_child_usage()
    assert b.run(lambda: b.spawn(burn_cpu, b, 300_000).join()) == burn_cpu(b, 300_000)
    usage = b.take_child_usage()
    assert set(usage) == {"cpu_user_s", "cpu_sys_s", "ctx_voluntary", "ctx_involuntary"}
    assert usage["cpu_user_s"] > 0
    assert b.take_child_usage() == dict.fromkeys(usage, 0)


def test_multiprocessing_terminates_children_when_main_raises():
    b = load("multiprocessing[forkserver]")
    started = []

    def main():
        started.append(b.spawn(report_later, b, b.channel(None), 60, "never"))
        raise RuntimeError("main failed")

    with pytest.raises(RuntimeError, match="main failed"):
        b.run(main)
    assert not started[0].process.is_alive()
    assert started[0].process not in multiprocessing.active_children()


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_start_method_is_explicit(method):
    b = load(f"multiprocessing[{method}]")
    assert b.name == f"multiprocessing[{method}]"
    assert b._ctx.get_start_method() == method
    assert b.run(lambda: b.spawn(square, b, 5).join()) == 25


def test_multiprocessing_fork_works_under_warnings_as_errors(pytester):
    # Forking a process that imported eventlet, or (3.12+) that runs threads, warns; with
    # -W error that failed every [fork] benchmark after an eventlet one.
    pytester.makepyfile(
        test_fork="""
        import threading
        import pytest
        from pytest_concurrency import backends

        if backends.unavailable_reason("eventlet") is None:
            backends.load("eventlet")  # as after an eventlet benchmark: its at-fork hook warns

        def square(b, x):
            return x * x

        @pytest.mark.concurrency(backends=["multiprocessing[fork]"])
        def test_fork(concurrency_backend):
            ready, stop = threading.Event(), threading.Event()
            thread = threading.Thread(target=lambda: (ready.set(), stop.wait()), daemon=True)
            thread.start()  # a multi-threaded process, as in a real session
            ready.wait()
            b = concurrency_backend
            try:
                assert b.run(lambda: b.spawn(square, b, 7).join()) == 49
            finally:
                stop.set()
    """
    )
    result = pytester.runpytest_subprocess(
        "-W", "error", "-p", "no:cacheprovider", "--concurrency-backends=multiprocessing[fork]"
    )
    result.assert_outcomes(passed=1)


def test_gevent_and_eventlet_share_a_process():
    gevent_b, eventlet_b = load("gevent"), load("eventlet")

    def main(b):
        ch = b.channel(0)
        producer = b.spawn(put_all, b, ch, [1, 2, 3], b.channel(None))
        return [ch.get() for _ in range(3)], producer.join()

    for b in (gevent_b, eventlet_b, gevent_b, eventlet_b):
        assert b.run(main, b) == ([1, 2, 3], 3), b.name


@pytest.mark.parametrize("outer,inner", [("gevent", "eventlet"), ("eventlet", "gevent")])
def test_run_refuses_to_nest_green_hubs(outer, inner):
    outer_b, inner_b = load(outer), load(inner)

    def nested(b):
        return inner_b.run(lambda: None)

    with pytest.raises(base.TaskFailed, match="main greenlet") as info:
        outer_b.run(lambda: outer_b.spawn(nested, outer_b).join())
    assert isinstance(info.value.__cause__, base.ConcurrencyError)


def test_eventlet_import_survives_warnings_as_errors():
    if backends.unavailable_reason("eventlet"):
        pytest.skip(backends.unavailable_reason("eventlet"))
    code = "from pytest_concurrency import backends; print(backends.load('eventlet').name)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-W", "error::Warning", "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "eventlet"


PATCHED_SCRIPT = """
import socket, sys
from pytest_concurrency import backends

b = backends.load(sys.argv[1])
assert b.isolation_only

def serve_once(b, listener):
    conn, _ = listener.accept()
    with conn:
        conn.sendall(conn.recv(100))

def main(b):
    listener = socket.create_server(("127.0.0.1", 0))  # patched: green after run() began
    server = b.spawn(serve_once, b, listener)
    conn = b.open_connection(*listener.getsockname())
    conn.sendall(b"ping")
    reply = conn.recv_exactly(4)
    conn.close()
    server.join()
    return reply

print(b.run(main, b).decode(), socket.socket.__module__)
"""


@pytest.mark.parametrize("spec", ["gevent[patched]", "eventlet[patched]"])
def test_patched_variant_runs_in_a_fresh_process(spec):
    if backends.unavailable_reason(spec):
        pytest.skip(backends.unavailable_reason(spec))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", PATCHED_SCRIPT, spec],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    reply, socket_module = proc.stdout.split()
    assert reply == "ping"
    assert socket_module.split(".")[0] == spec.split("[")[0]  # the stdlib name is green now


@pytest.mark.parametrize("spec", ["greenlet", "gevent"])
def test_deadlock_after_a_crash_names_the_crashed_task(spec):
    b = load(spec)

    def main(b):
        b.spawn(fail, b, "worker crashed")
        return b.channel(0).get()  # the crashed worker was to put here

    with pytest.raises(base.TaskFailed, match="worker crashed") as info:
        b.run(main, b)
    assert isinstance(info.value.__context__, base.Deadlock)


def test_greenlet_many_tasks_blocking_at_once_do_not_nest_stacks():
    # Regression: tasks started from inside other tasks nested their stacks until RecursionError.
    if backends.unavailable_reason("greenlet"):
        pytest.skip("greenlet not installed")
    b = backends.load("greenlet")

    def task(i, ready, release):
        ready.put(i)
        release.get()
        return i

    def main():
        ready, release = b.channel(None), b.channel(None)
        tasks = [b.spawn(task, i, ready, release) for i in range(5000)]
        seen = sorted(ready.get() for _ in tasks)
        for _ in tasks:
            release.put(None)
        return seen == list(range(5000)) and [t.join() for t in tasks] == list(range(5000))

    assert b.run(main) is True


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_multiprocessing_task_that_cannot_be_pickled_names_the_fix(method):
    b = load(f"multiprocessing[{method}]")

    def main(b):
        def local_task(b):
            return 1

        return b.spawn(local_task, b).join()

    with pytest.raises(TypeError) as info:  # NotPicklable, a TypeError like pickle's own
        b.run(main, b)
    message = str(info.value)
    assert message.startswith(
        f"[multiprocessing[{method}]] spawn(test_multiprocessing_task_that_cannot_be_pickled"
    )
    assert "local_task" in message and "Define the task function at module level" in message


@pytest.mark.parametrize("spec", ["threading", "multiprocessing[forkserver]"])
def test_task_failing_just_after_main_returned_still_fails_run(spec):
    # Tasks of OS threads and processes outlive main; one that raises a moment later must be
    # reported, not lost because run() happened to return first.
    b = load(spec)

    def main(b):
        status = b.channel(None)
        b.spawn(fail_after_main_returned, b, status, 0.2, "boom-late")
        return status.get()

    with pytest.raises(base.TaskFailed, match="boom-late"):
        b.run(main, b)


def test_a_blocked_task_left_running_is_ended_without_waiting_out_the_grace(monkeypatch):
    # A task blocked for good when main returns (a cancel workload's abandon end) waited the
    # whole 1 s grace, every round, to be terminated after it anyway. Here the grace is a
    # minute: run returning within half of it means the grace ended once the task was seen
    # blocked. Two task processes: ~0.5 s.
    from pytest_concurrency.backends import _multiprocessing

    monkeypatch.setattr(_multiprocessing, "EXIT_GRACE_S", 60.0)
    b = load("multiprocessing[forkserver]")
    ended = b.channel(None)  # made before run: it outlives the run's own channels

    def main(b):
        status = b.channel(None)
        for _ in range(2):
            b.spawn(block_forever, b, status, ended)
        return [status.get(), status.get()]

    started = time.monotonic()
    assert b.run(main, b) == ["blocked", "blocked"]
    assert time.monotonic() - started < 30
    assert [ended.get(timeout=5), ended.get(timeout=5)] == ["finally ran"] * 2  # torn down


def test_fork_server_preloads_the_workloads_and_keeps_what_was_asked(monkeypatch):
    # a task process imported its workload's module itself (and psutil): ~100 ms of CPU a task
    from multiprocessing import forkserver

    from pytest_concurrency import workloads

    monkeypatch.setattr(forkserver._forkserver, "_preload_modules", ["__main__", "users_app"])
    load("multiprocessing[forkserver]")
    preloaded = forkserver._forkserver._preload_modules
    assert preloaded[:2] == ["__main__", "users_app"]
    assert "pytest_concurrency.backends._multiprocessing" in preloaded
    assert "pytest_concurrency.backends._fork_server_main" in preloaded  # __main__ was asked
    assert len(preloaded) == len(set(preloaded))
    # what the server imports, in a fresh interpreter (~0.5 s), brings every seed workload's
    # module (its task functions) with it
    imported = subprocess.run(
        [sys.executable, "-c", IMPORTS_OF, *preloaded[2:]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in workloads.names():
        assert type(workloads.get(name)).__module__ in imported


#: A script that starts tasks from a fork server, as the ``pytest`` console script does: each task
#: reports the pid of the process that ran the script's body, and its own.
WHERE_MAIN_RAN = """
import os
from pytest_concurrency.backends import load

RAN_IN = os.getpid()

def where_main_ran():
    return RAN_IN, os.getpid()

if __name__ == "__main__":
    b = load("multiprocessing[forkserver]")
    for ran_in, task in b.run(lambda: [b.spawn(where_main_ran).join() for _ in range(2)]):
        print(ran_in, task, os.getpid())
"""


def test_fork_server_runs_the_main_script_once_not_each_task(tmp_path):
    # Started from a script (as the pytest console script starts a session) rather than with -m,
    # each task process ran the script again itself: under pytest's, it imported pytest (~0.3 s
    # of CPU a task), as CPython's fork server does not preload __main__ before 3.13.8. One fresh
    # interpreter, its fork server and two tasks: ~1 s.
    script = tmp_path / "where_main_ran.py"
    script.write_text(WHERE_MAIN_RAN)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split("\n")
    rows = [tuple(map(int, line.split())) for line in out if line]
    assert len(rows) == 2
    servers = {ran_in for ran_in, _, _ in rows}
    assert len(servers) == 1, f"the script ran in each task process: {rows}"
    for ran_in, task, parent in rows:
        assert ran_in not in (task, parent), rows  # the fork server's own pid


IMPORTS_OF = (
    "import importlib, sys\n"
    "for name in sys.argv[1:]: importlib.import_module(name)\n"
    "print(*sys.modules)"
)
