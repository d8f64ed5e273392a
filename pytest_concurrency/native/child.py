"""Run one case in a native program and turn its JSON lines into samples and figures.

One child process per benchmark runs the warm-up and measured rounds back to back; round
times are taken inside the child around each round, so process start-up and the JVM's
loading are outside every sample, and warm-up rounds (JIT compilation) are dropped as
Python's are. Every round is checked here, warm-up included (``checks``). A child that goes
quiet for longer than the round timeout is killed with its process group.
"""

import contextlib
import json
import os
import selectors
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from .. import lifetime
from ..backends import toolchains
from ..measure import usage as machine
from ..measure.driver import figures
from ..measure.plan import CasePlan
from ..measure.wallclock import WALLCLOCK
from ..workloads import latency_server
from . import build, checks

STDERR_CHARS = 4000  # of a failed child's stderr, shown in the failure


class NativeFailure(Exception):
    """The program ended without finishing its rounds (it crashed or refused its arguments)."""


class NativeTimeout(Exception):
    """The program reported nothing for longer than the round timeout; it was killed."""


def arguments(workload: str, params: dict, rounds: int, warmup: int) -> list[str]:
    args = [workload, str(rounds), str(warmup)]
    args += [f"{key}={'none' if value is None else value}" for key, value in sorted(params.items())]
    if workload == "io" and params.get("transport") == "tcp":
        host, port = latency_server.shared_address()  # the Python models' own server
        args.append(f"server={host}:{port}")
    return args


def measure(plan: CasePlan, on_round=None) -> tuple[list[float], dict]:
    """(measured round times in seconds, figures for ``extra_info``) of one case, in the program
    of its model's language (``plan.model``).

    Builds the program first if needed (``build.BuildError``); raises ``NativeTimeout``,
    ``NativeFailure`` or the workload's ``WorkloadError``.
    """
    language, workload, params, rounds = plan.model, plan.workload, plan.params, plan.rounds
    command = build.command(language)
    warmup = max(plan.warmup, toolchains.TOOLCHAINS[language].min_warmup)
    said = _Said()
    with contextlib.closing(
        _messages(command + arguments(workload.name, params, rounds, warmup), plan.timeout)
    ) as lines:
        for message in lines:
            _take(message, plan, said, on_round)
    if len(said.samples) != rounds or len(said.usages) != 2:
        raise NativeFailure(
            f"it reported {len(said.samples)} of {rounds} measured rounds and {len(said.usages)} of 2 usage lines"
        )
    return said.samples, {
        **figures(said.samples, said.outcomes, WALLCLOCK, _around(said.usages, said.busy, rounds)),
        **_memory_figures(said.memory, params),
    }


@dataclass
class _Said:
    """What a child said: its measured rounds (seconds, checked outcomes), the usage it read around
    them with how busy the machine was then here, and its memory figures."""

    samples: list[float] = field(default_factory=list)
    outcomes: list = field(default_factory=list)
    usages: list = field(default_factory=list)
    busy: list[tuple[float, float, float]] = field(default_factory=list)
    memory: dict | None = None


def _take(message: dict, plan: CasePlan, said: _Said, on_round) -> None:
    """One line of the child: a round (checked), or the usage read around the measured rounds."""
    said.memory = message.get("memory", said.memory)
    if "round" in message:
        outcome = checks.verify(plan.workload, plan.params, message["result"])
        if not message["warmup"]:
            said.samples.append(message["ns"] / 1e9)
            said.outcomes.append(outcome)
        if on_round is not None:
            on_round()
    elif "usage" in message:
        said.usages.append(message["usage"])
        own = machine.self_usage()  # this process reads and checks every round meanwhile
        busy = machine.machine_busy_s(), time.perf_counter(), own.cpu_user_s + own.cpu_sys_s
        said.busy.append(busy)


def _around(usages: list[dict], busy: list[tuple], rounds: int) -> dict:
    """CPU time and context switches per measured round, the child's peak RSS, and how busy
    other processes kept the machine meanwhile (as ``usage.Window`` reports for Python)."""
    first, last = usages
    user = (last["user_us"] - first["user_us"]) / 1e6
    sys_ = (last["sys_us"] - first["sys_us"]) / 1e6
    (busy0, t0, own0), (busy1, t1, own1) = busy
    return {
        "cpu_user_s": user / rounds,
        "cpu_sys_s": sys_ / rounds,
        "ctx_voluntary": (last["nvcsw"] - first["nvcsw"]) / rounds,
        "ctx_involuntary": (last["nivcsw"] - first["nivcsw"]) / rounds,
        "peak_rss_kib": last["maxrss_kib"],
        "foreign_cpu": machine.foreign_cores(busy1 - busy0, user + sys_ + own1 - own0, t1 - t0),
    }


def _memory_figures(memory: dict | None, params: dict) -> dict:
    """KiB per live task (spawn): the larger of RSS growth and the runtime's own heap growth,
    as the Python models report the larger of RSS and tracemalloc growth."""
    if not memory:
        return {}
    count = params["count"]
    rss = memory["rss_bytes"] / 1024 / count
    heap = memory["heap_bytes"] / 1024 / count if memory.get("heap_bytes") is not None else None
    out = {"kib_per_task": max(rss, heap or 0.0), "rss_kib_per_task": rss}
    if heap is not None:
        out["heap_kib_per_task"] = heap
    return out


def _messages(cmd: list[str], timeout: float | None):
    """The child's JSON lines, each within ``timeout`` of the one before; through its end."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=lifetime.with_parent(),
        )
        try:
            done = False
            for line in _lines(proc, timeout):
                message = json.loads(line)
                done = done or message.get("done", False)
                yield message
            code = proc.wait()
            if code != 0 or not done:
                stderr.seek(0)
                text = (
                    stderr.read()[-STDERR_CHARS:].decode(errors="replace").strip()
                    or "(no output on stderr)"
                )
                raise NativeFailure(
                    f"`{' '.join(cmd)}` ended ({lifetime.how_it_ended(code)}) before it finished; "
                    f"its stderr:\n{text}"
                )
        finally:
            _kill(proc)


def _lines(proc: subprocess.Popen, timeout: float | None):
    assert proc.stdout is not None  # started with stdout=PIPE
    fd, pending = proc.stdout.fileno(), b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            while b"\n" in pending:
                line, _, pending = pending.partition(b"\n")
                yield line
            if not sel.select(timeout):
                raise NativeTimeout(f"it reported nothing for {timeout:g} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            pending += chunk


def _kill(proc: subprocess.Popen) -> None:
    lifetime.kill_group(proc)  # its own group: nothing it started survives
    if proc.stdout is not None:
        proc.stdout.close()
