"""Run each backend's cases in a fresh worker process of its own (pyperf's model).

Why: gevent and eventlet hubs, monkey-patching and fork state are process-global, and a
deadlocked model can only be stopped for certain by killing its process. One worker per
backend spec is started on first use and reused for that backend's cases; a worker that
times out or dies is replaced. An instrument whose figures depend on what the process did
before (``fresh_process``: instruction counts) has a worker that is a fork server: it
forks a new process for every case, from the state it had right after loading the backend
(see worker.py). Workers run in their own process group, so killing one also kills the
task processes it started.
"""

import collections
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

import pytest

from .. import benchmark_adapter as adapter
from .. import lifetime, measure
from ..measure import callgrind, driver
from ..measure.plan import CasePlan
from .worker import FORK_EACH, PLAIN

STDERR_LINES = 20  # how much of a dead worker's stderr the failure shows
STARTUP_TIMEOUT_S = 60.0  # interpreter start + imports, on a loaded 2-core CI machine


class WorkerFailure(Exception):
    pass


class Worker:
    def __init__(self, spec: str, fork_each: bool = False, instrument=None):
        """A worker for ``spec``; a fork server (``fork_each``) measures with ``instrument``,
        started in its command (``Instrument.worker_command``)."""
        self.spec = spec
        argv = [
            sys.executable,
            "-m",
            "pytest_concurrency.runner.worker",
            FORK_EACH if fork_each else PLAIN,
            spec,
        ]
        env = _worker_env()
        if fork_each and instrument is not None:
            argv, env = instrument.worker_command(argv, env)
        else:  # a plain worker runs with the user's allocator, even started from a counted process
            env = callgrind.users_allocator(env)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
            bufsize=0,
            # SIGTERM, not SIGKILL: the worker takes its process group along (worker.py), the cases
            # it forked and their task processes included
            preexec_fn=lifetime.with_parent(signal.SIGTERM),
        )
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr  # all three are pipes
        self.stdin, self.stdout, self.stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        self._pending = b""  # bytes read from stdout past the last complete line
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        # Drain stderr continuously: a chatty worker must never block on a full pipe.
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        self._ready = False

    def _read_stderr(self):
        for line in self.stderr:
            self.stderr_tail.append(line.decode(errors="replace").rstrip("\n"))

    def request(self, payload: dict, round_timeout: float | None, on_round=None) -> dict:
        """Send one case; wait at most ``round_timeout`` for each round to report.

        ``on_round()`` is called as each round (and the memory step) reports."""
        if not self._ready:
            started = self._receive(STARTUP_TIMEOUT_S, "did not start")
            if not started.get(
                "ready"
            ):  # a fork server's first child failed: taken for a reply, it shifted them all
                raise WorkerFailure(
                    f"worker for {self.spec} did not start: {started.get('error')}; last stderr "
                    "lines:\n" + ("\n".join(self.stderr_tail) or "(none)")
                )
            self._ready = True
        try:
            self.stdin.write((json.dumps(payload) + "\n").encode())
        except (BrokenPipeError, OSError):
            raise WorkerFailure(self._death("could not receive the case")) from None
        while True:
            message = self._receive(round_timeout, "ended without a reply")
            if "round" not in message:
                return message
            if on_round is not None:
                on_round()

    def _receive(self, timeout: float | None, death: str) -> dict:
        line = self._read_line(timeout)
        if not line:
            raise WorkerFailure(self._death(death))
        return json.loads(line)

    def _read_line(self, timeout: float | None) -> bytes:
        """The next line, or b"" at EOF. Unbuffered reads, so select() sees every byte."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not sel.select(left):
                    self.kill()
                    raise TimeoutError
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b""
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line + b"\n"

    def _death(self, what: str) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        self._drain.join(timeout=2)
        status = lifetime.how_it_ended(code)
        tail = "\n".join(self.stderr_tail) or "(no output on stderr)"
        return f"worker for {self.spec} {what}: {status}; last stderr lines:\n{tail}"

    def kill(self) -> None:
        lifetime.kill_group(self.proc)
        self._close_pipes()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.stdin.write(b'{"quit": true}\n')
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def _close_pipes(self):
        for pipe in (self.stdin, self.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._drain.join(timeout=2)
        self.stderr.close()


def _worker_env() -> dict:
    # The worker must import what this session imports (a user's own workload module too).
    # Not the test's name: its length would move the stack, and so a counted round's work.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class WorkerPool:
    """Workers by backend spec (and whether they fork each case: the payload's ``fork``),
    several per spec when cases run ahead in parallel (``Ahead``)."""

    def __init__(self):
        self._idle: dict[tuple[str, bool], list[Worker]] = {}
        self._all: list[Worker] = []
        self._lock = threading.Lock()

    def run_case(self, spec: str, payload: dict, timeout: float | None, on_round=None) -> dict:
        """A case's reply, finished in this process (``Instrument.received``), with its memory
        pass and kernel figures run in a plain worker when the instrument wants them apart
        (``memory_apart``)."""
        instrument = measure.instrument(payload.get("measure"))
        apart = instrument.memory_apart and payload.get("with_memory")
        reply = self.run(
            spec,
            {**payload, "with_memory": payload.get("with_memory") and not apart},
            timeout,
            on_round,
        )
        if not reply.get("ok"):
            return reply
        reply["extra"] = instrument.received(reply["extra"])
        if apart:
            memory = self.run(
                spec,
                {
                    "workload": payload["workload"],
                    "params": payload["params"],
                    "apart": True,
                    "fork": False,
                },
                timeout,
                on_round,
            )
            if not memory.get("ok"):
                return {**memory, "error": f"the memory pass and kernel figures: {memory['error']}"}
            reply["extra"].update(memory["extra"])
        return reply

    def run(self, spec: str, payload: dict, timeout: float | None, on_round=None) -> dict:
        """One request to a worker of ``spec`` (a fork server when the payload says ``fork``)."""
        kind = (spec, bool(payload.get("fork")))
        worker = self._take(kind, payload.get("measure"))
        try:
            reply = worker.request(payload, timeout, on_round)
        except (TimeoutError, WorkerFailure):
            worker.kill()
            raise
        if not reply.get("ok"):
            reply["stderr"] = list(worker.stderr_tail)
        with self._lock:
            self._idle.setdefault(kind, []).append(worker)
        return reply

    def _take(self, kind: tuple[str, bool], measure_kind: str | None) -> Worker:
        with self._lock:
            idle = self._idle.setdefault(kind, [])
            while idle:
                worker = idle.pop()
                if worker.proc.poll() is None:
                    return worker
            worker = Worker(*kind, measure.instrument(measure_kind))
            self._all.append(worker)
            return worker

    def close(self, now: bool = False) -> None:
        """Ask each worker to quit, or kill them ``now`` (a Ctrl-C: one busy counting a case took
        10 s, its grace, to be killed anyway)."""
        with self._lock:
            workers, self._all, self._idle = self._all, [], {}
        for worker in workers:
            if now:
                worker.kill()
            else:
                worker.close()


class Ahead:
    """Cases measured ahead of their tests, ``jobs`` at a time, for an instrument whose
    processes do not disturb each other's figures (instruction counts): each case runs in a
    process of its own, so the session uses every core while pytest runs tests one by one.

    Each of the ``jobs`` lanes keeps to one model while it has cases left, so that a model's
    worker starts once, not once per lane: a fork server's start under valgrind takes 3-5 s
    (10-20 s where it cannot start uninstrumented: measure/client_request.py), as long as
    several cases. A lane out of cases takes the model with the most left that no
    lane is on, else helps the one with the most left."""

    def __init__(self, workers: WorkerPool, jobs: int):
        self._workers = workers
        self._jobs = jobs
        self._queues: dict[
            str, collections.deque
        ] = {}  # spec -> (future, payload, timeout), in test order
        self._futures: dict[tuple, Future] = {}
        self._lanes: dict[int, str] = {}  # lane -> the spec it is on
        self._lock = threading.Lock()
        self._closed = False
        self._ended = threading.Event()

    def submit(self, key: tuple, spec: str, payload: dict, timeout: float | None) -> None:
        future = self._futures[key] = Future()
        self._queues.setdefault(spec, collections.deque()).append((future, payload, timeout))

    def start(self) -> None:
        """Start the lanes, once every case is submitted."""
        for lane in range(min(self._jobs, sum(map(len, self._queues.values())))):
            threading.Thread(
                target=self._run_lane,
                args=(lane,),
                daemon=True,
                name=f"pytest-concurrency-ahead-{lane}",
            ).start()

    def _next(self, lane: int):
        with self._lock:
            if self._closed:
                return None
            spec = self._lanes.get(lane)
            if spec is None or not self._queues.get(spec):
                left = {s: len(q) for s, q in self._queues.items() if q}
                free = {s: n for s, n in left.items() if s not in self._lanes.values()}
                choices = free or left
                if not choices:
                    return None
                spec = self._lanes[lane] = max(choices, key=lambda s: choices[s])
            return (spec, *self._queues[spec].popleft())

    def _run_lane(self, lane: int) -> None:
        while (job := self._next(lane)) is not None:
            spec, future, payload, timeout = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._workers.run_case(spec, payload, timeout))
            except BaseException as exc:  # the test that takes it reports it
                future.set_exception(exc)
        # A worker gets its parent's death signal when the *thread* that started it ends, and
        # another lane may be using a worker this one started: lanes end with the session.
        self._ended.wait()

    def take(self, key: tuple):
        """The future reply for ``key``, or ``None`` when it was not run ahead."""
        return self._futures.pop(key, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._ended.set()
        for future in self._futures.values():
            future.cancel()


def request(plan: CasePlan, with_memory: bool = True) -> dict:
    """What a worker is sent to measure one case (its own deadline is the parent's to watch)."""
    return {
        "workload": plan.reference,
        "params": plan.params,
        "rounds": plan.rounds,
        "warmup": plan.warmup,
        "stop_width": plan.stop_width,
        "with_memory": with_memory,
        "measure": plan.instrument.kind,
        "fork": plan.instrument.fresh_process,
    }


def run_rounds(pool: WorkerPool, plan: CasePlan, with_memory: bool = True, on_round=None) -> dict:
    """Rounds of a case in its model's worker: its reply (``ok``, ``samples``, ...).

    Raises ``TimeoutError`` (the worker was killed) or ``WorkerFailure`` (it died).
    """
    return pool.run_case(plan.model, request(plan, with_memory), plan.timeout, on_round)


def bench(pool: WorkerPool, benchmark, plan: CasePlan, on_round=None, measured=None) -> None:
    """Run the case in its model's worker and record it as if measured here. ``measured``: its
    reply's future when it ran ahead (``Ahead``)."""
    what, timeout = plan.label, plan.timeout
    started = time.monotonic()
    try:
        if measured is not None:
            reply = measured.result()
        else:
            reply = run_rounds(pool, plan, on_round=on_round)
    except TimeoutError:
        pytest.fail(
            f"{what}: a round did not finish within {timeout:g} s; the worker and "
            "its task processes were killed. Deadlock or stall? Raise --concurrency-timeout "
            "if the workload is just slow.",
            pytrace=False,
        )
    except WorkerFailure as exc:
        pytest.fail(f"{what}: {exc}", pytrace=False)
    if not reply["ok"]:
        stderr = "\n".join(reply.get("stderr") or ())
        pytest.fail(
            f"{what} failed in its worker: {reply['error']}\n{reply.get('traceback', '')}"
            + (f"\nthe worker's last stderr lines:\n{stderr}" if stderr else ""),
            pytrace=False,
        )
    adapter.mark_used(benchmark, "pytest-concurrency isolated worker")
    driver.record_external(benchmark, reply["identity"], reply["samples"], reply["extra"])
    benchmark.extra_info["isolated"] = True
    benchmark.extra_info["worker_wall_s"] = time.monotonic() - started
