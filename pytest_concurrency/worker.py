"""A worker process that runs one backend's workload cases for the parent session.

    python -m pytest_concurrency.worker SPEC

Protocol: one JSON object per line. The parent writes requests on our stdin; we answer
on the original stdout, which we keep for ourselves: fd 1 is pointed at stderr so that
anything a library prints cannot corrupt the channel. We say ``{"ready": true}`` once
the backend is loaded, ``{"round": true}`` after each round (the parent's deadline is per
round), then ``{"ok": true, "samples": [...], "identity": {...}, "extra": {...}}`` or
``{"ok": false, "error": "..."}``.
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

    def send(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    backend = backends.load(spec)
    send({"ready": True})
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("quit"):
            return
        try:
            workload = workloads.get(request["workload"])
            params = request["params"]
            samples, figures = measure.run_rounds(
                backend, workload, params, request["rounds"], request["warmup"],
                progress=lambda: send({"round": True}), with_memory=request.get("with_memory", True),
            )
            reply = {"ok": True, "samples": samples, "identity": measure.identity(backend, workload, params), "extra": figures}
        except Exception as exc:  # reported to the parent as this benchmark's failure
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        send(reply)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_concurrency.worker SPEC", file=sys.stderr)
        return 2
    replies = _claim_stdout()
    serve(argv[0], sys.stdin, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
