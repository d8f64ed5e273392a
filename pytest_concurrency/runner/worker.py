"""A worker process that runs one backend's workload cases for the parent session.

    python -m pytest_concurrency.runner.worker --fork-each|--plain SPEC

Protocol: one JSON object per line. The parent writes requests on our stdin; we answer
on the original stdout, which we keep for ourselves: fd 1 is pointed at stderr so that
anything a library prints cannot corrupt the channel. We say ``{"ready": true}`` once
the backend is loaded, ``{"round": true}`` after each round (the parent's deadline is per
round), then ``{"ok": true, "samples": [...], "identity": {...}, "extra": {...}}`` or
``{"ok": false, "error": "..."}``. A request with ``"apart": true`` runs only what a counted
case measures apart from its counted rounds, the memory pass (``driver.memory_figures``) and
the kernel figures (``driver.kernel_figures_apart``), and answers ``{"ok": true, "extra": {...}}``.

``--fork-each`` makes the worker a fork server, for instruments whose figures depend on
what the process did before (instruction counts, see measure.callgrind): after loading
the backend it only forks, and each child reads one request, answers it and exits. The
server itself never reads a request, so every case starts from the same process state
whichever server runs it and whatever it ran before. Reading requests in the server and
forking after each one left traces that moved counts: type attribute lookups are cached
by the address of the name and the type's version tag, and eventlet's switch counted
1.7% more in a session whose case landed on a server that had parsed fewer requests.
``--plain`` answers every request itself; under a counted session valgrind does not trace it
(see measure/callgrind.py).
"""

import gc
import json
import os
import signal
import sys
import traceback

from ..exit_codes import Exit
from ..measure import callgrind


def _claim_stdout():
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(reply_fd, "w", buffering=1, encoding="utf-8")


QUIT = 3  # a forked child's exit status when its request was to quit
FORK_EACH, PLAIN = (
    "--fork-each",
    callgrind.UNTRACED_FLAG,
)  # how the worker answers: in a child per request, or itself


def serve(spec: str, requests, replies, fork_each: bool = False) -> None:
    from .. import backends, measure, workloads
    from ..measure import driver
    from ..measure.plan import CasePlan

    def send(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    def run_case(request: dict) -> dict:
        try:
            workload = workloads.get(request["workload"])
            params = request["params"]
            if request.get("apart"):
                workloads.prepare(workload, params)
                extra = driver.memory_figures(workload, backend, params)
                extra.update(driver.kernel_figures_apart(workload, backend, params))
                return {"ok": True, "extra": extra}
            instrument = measure.instrument(request.get("measure"))
            plan = CasePlan(
                spec,
                workload,
                params,
                request["rounds"],
                request["warmup"],
                instrument,
                stop_width=request.get("stop_width"),
            )
            samples, figures = driver.run_rounds(
                backend,
                plan,
                progress=lambda: send({"round": True}),
                with_memory=request.get("with_memory", True),
                in_worker=True,
            )
            return {
                "ok": True,
                "samples": samples,
                "extra": figures,
                "identity": driver.identity(backend, workload, params, instrument),
            }
        except Exception as exc:  # reported to the parent as this benchmark's failure
            return {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }

    def answer(line: str) -> bool:
        """Answer one request line; ``False`` when it asks us to quit."""
        request = json.loads(line)
        if request.get("quit"):
            return False
        send(run_case(request))
        return True

    backend = backends.load(spec)
    if fork_each:
        for name in workloads.names():  # imported once here, not in every child
            workloads.get(name)
        _ = backend.version  # read once here, not in every child (it imports importlib.metadata)
        # Every object made so far outlives the server: out of the collector's reach, the
        # collection before each counted round (Callgrind.before_round) walks only what the case
        # made. Under valgrind a walk of everything took 0.1 s, six times a case.
        gc.freeze()
        _fork_server(answer, send)
        return
    send({"ready": True})
    for line in requests:
        if line.strip() and not answer(line):
            return


def _fork_server(answer, send) -> None:
    """Fork a child per request; the child reads it (from fd 0, unbuffered), answers, exits."""
    _forked(lambda: QUIT, send)  # once before "ready": the loop's first fork then repeats it
    send({"ready": True})
    while _forked(lambda: 0 if answer(_read_line(0)) else QUIT, send) != QUIT:
        pass


def _forked(work, send) -> int:
    """Run ``work`` in a forked child and return its exit status; report a child that died
    without a word."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = work()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)  # no atexit handlers: what they clean up is the server's
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, QUIT):
        send(
            {
                "ok": False,
                "error": f"the case's forked process ended with status {code} "
                "before it answered (see the worker's stderr)",
            }
        )
    return code


def _read_line(fd: int) -> str:
    """One line, read a byte at a time so that nothing past it is taken from the server's
    other children; EOF reads as a request to quit."""
    data = bytearray()
    while not data.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return '{"quit": true}'
        data += byte
    return data.decode()


def _go_with_group(worker: int):
    """SIGTERM to the worker (its parent's death signal, see isolate.py) kills its whole process
    group: a forked case and its task processes would live on otherwise. A process forked from
    the worker that is sent SIGTERM (multiprocessing's terminate) just ends, as by default."""

    def on_term(signum, frame):
        if os.getpid() == worker:
            os.killpg(0, signal.SIGKILL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    return on_term


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in (FORK_EACH, PLAIN):
        print(
            f"usage: python -m pytest_concurrency.runner.worker {FORK_EACH}|{PLAIN} SPEC",
            file=sys.stderr,
        )
        return Exit.TOOL_USAGE
    if os.getpgid(0) == os.getpid():  # a group of its own, as isolate.py starts it: not a shell's
        signal.signal(signal.SIGTERM, _go_with_group(os.getpid()))
    fork_each, args = argv[0] == FORK_EACH, argv[1:]
    replies = _claim_stdout()
    serve(args[0], sys.stdin, replies, fork_each)
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
