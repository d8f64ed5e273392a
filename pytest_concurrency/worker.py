"""A worker process that runs one backend's workload cases for the parent session.

    python -m pytest_concurrency.worker SPEC

Protocol: one JSON object per line. The parent writes requests on our stdin; we answer
on the original stdout, which we keep for ourselves: fd 1 is pointed at stderr so that
anything a library prints cannot corrupt the channel. We say ``{"ready": true}`` once
the backend is loaded, ``{"round": true}`` after each round (the parent's deadline is per
round), then ``{"ok": true, "samples": [...], "identity": {...}, "extra": {...}}`` or
``{"ok": false, "error": "..."}``. A request with ``"fork": true`` runs in a child forked
for it, so that every case starts from the same process state (see measure.callgrind); the
child answers on the same channel and exits.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _claim_stdout():
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(reply_fd, "w", buffering=1, encoding="utf-8")


def serve(spec: str, requests, replies) -> None:
    from . import backends, measure, workloads
    from .measure import runner

    def send(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    def run_case(request: dict) -> dict:
        try:
            workload = workloads.get(request["workload"])
            params = request["params"]
            instrument = measure.get(request.get("measure"))
            samples, figures = runner.run_rounds(
                backend, workload, params, request["rounds"], request["warmup"], instrument,
                progress=lambda: send({"round": True}), with_memory=request.get("with_memory", True),
            )
            return {"ok": True, "samples": samples, "extra": figures,
                    "identity": runner.identity(backend, workload, params, instrument)}
        except Exception as exc:  # reported to the parent as this benchmark's failure
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}

    backend = backends.load(spec)
    send({"ready": True})
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("quit"):
            return
        if request.get("fork"):
            _in_child(lambda: send(run_case(request)), send)
        else:
            send(run_case(request))


def _in_child(work, send) -> None:
    """Run ``work`` in a forked child and wait for it; report a child that died without a word."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            work()
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)  # no atexit handlers: what they clean up is the parent's
    _, status = os.waitpid(pid, 0)
    if status:
        send({"ok": False, "error": f"the case's forked process ended with wait status {status} "
                                    "before it answered (see the worker's stderr)"})


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_concurrency.worker SPEC", file=sys.stderr)
        return 2
    replies = _claim_stdout()
    serve(argv[0], sys.stdin, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
