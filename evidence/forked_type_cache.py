#!/usr/bin/env python3
"""Do forked layouts draw the type-attribute cache anew? Counted by callgrind, outside pytest.

A process started under callgrind (``--instr-atstart=no``) with yarl's wrapper copy first on its
path (count_matrix.py's ``plain`` part: ``URL.build`` goes through a small Python function) imports
yarl, then forks one child per layout and mode, as a counted session forks its layouts: each
child allocates its layout's objects (``layouts.pad``, as a forked layout does), in mode
``retag`` also drops every type's version tag and consumes ``layout * 1361 % 4096`` fresh ones
(``RETAG``: tried as forked layouts' behaviour in 080038d-a69960e, not kept; ``kept``: the
start-up's tags, as forked layouts have them), calls
``URL.build(host="domain")`` 300 times unread, then 300 times with instrumentation on, and exits.
Its count a call is its callgrind file's total over 300. The process is started ``--startups``
times, start-up k allocating ``layouts.padding(k)``'s objects before it imports anything (as a
started layout k does): its imports' objects, yarl's names among them, land elsewhere. Kept tags:
a start-up's layouts inherit one collision pattern. Retagged: each layout draws its own.

    python3 evidence/forked_type_cache.py --work /tmp/count_matrix   # after count_matrix.py's plain
    python3 evidence/forked_type_cache.py --work W --out evidence/count_cost/type_cache.jsonl

It needs valgrind and a ``--work`` where count_matrix.py made yarl's venv and its wrapper copy
(``slowed-yarl``, which count_matrix.py removes as it ends: run this beside its plain part).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_concurrency.measure.layouts import padding

CALLS = 300
LAYOUTS = (1, 2, 3)
MODES = ("kept", "retag")
#: run in the started process: fork a child per mode and layout, each counting CALLS calls
#: what a forked layout would do to draw the type cache anew: ``sys._clear_type_cache`` empties
#: the cache but keeps every tag on 3.11-3.13 (3.10's drops them); ``PyType_Modified(object)``
#: drops them on all (it walks object's subclasses). A class is re-tagged at most 1000 times on
#: 3.12+: a fresh throwaway class every 500 tags.
RETAG = """
def retag(layout):
    import ctypes
    sys._clear_type_cache()
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(object))
    left = layout * 1361 % 4096
    while left:
        throwaway = type("_Retag", (), {"a": 0})
        for _ in range(min(left, 500)):
            throwaway.a = 0  # drops its tag; the lookup after it gives it the next one
            throwaway.a
        left -= min(left, 500)
"""
CHILDREN = f"""
import os, sys
from yarl import URL
from pytest_concurrency.measure import client_request, layouts
{RETAG}

for mode in {MODES!r}:
    for layout in {LAYOUTS!r}:
        pid = os.fork()
        if pid == 0:
            layouts.pad(layout)
            if mode == "retag":
                retag(layout)
            for _ in range({CALLS}):
                URL.build(host="domain")
            client_request.start_instrumentation()
            for _ in range({CALLS}):
                URL.build(host="domain")
            client_request.stop_instrumentation()
            print(mode, layout, os.getpid(), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
"""


def total(path: Path) -> int:
    """A callgrind file's instructions (its ``totals:`` line; ``summary:`` reads 0 with
    instrumentation switched on late)."""
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"{path}: no totals line")


def startup(py: str, copy: str, k: int, out: Path) -> list[dict]:
    """One started process's children: mode, layout, count a call."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": copy}
    cmd = [
        "valgrind", "--tool=callgrind", "-q", "--instr-atstart=no",
        f"--callgrind-out-file={out}/callgrind.%p", py, "-c", f"{padding(k)}\n{CHILDREN}",
    ]  # fmt: skip
    said = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in said.splitlines():
        mode, layout, pid = line.split()
        count = total(out / f"callgrind.{pid}")
        rows.append({"startup": k, "mode": mode, "layout": int(layout), "per_call": count / CALLS})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="count_matrix.py's --work")
    parser.add_argument("--startups", type=int, default=5)
    parser.add_argument("--out", help="append the rows here (JSONL)")
    args = parser.parse_args()
    work = Path(args.work)
    py, copy = str(work / "venv-yarl" / "bin" / "python"), str(work / "slowed-yarl")
    rows = []
    for k in range(args.startups):
        with tempfile.TemporaryDirectory() as tmp:
            these = startup(py, copy, k, Path(tmp))
        for mode in MODES:
            counts = [r["per_call"] for r in these if r["mode"] == mode]
            print(f"start-up {k} {mode:6s}", *(f"{c:,.0f}" for c in counts), flush=True)
        rows += these
    if args.out:
        with open(args.out, "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
