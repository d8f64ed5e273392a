#!/usr/bin/env python3
"""Nothing lost at the anchor's price: the counted gate's matrix of issue 64's "Done when".

Every session is a real counted session (``--concurrency-measure=instructions``, the plugin's
defaults: forked layouts, a third only where the first two disagree) in a real suite's directory
(``count_cost.prepared``: the sdist's tests and config, the library from its wheel, this checkout's
plugin), judged against a baseline the part saved first; each judgement writes its verdicts
(``--concurrency-verdicts``) and is a line of ``count_cost/matrix.jsonl`` as it ends, so a stopped
run keeps what it measured. The parts:

  aa-yarl, aa-propcache, aa-multidict
             counted A/As: a save of ``count_cost.SELECTIONS[suite]``, then ``--judgements``
             judgements of the same code against it. A regressed or improved verdict fails the
             judgement; inconclusive ones are counted apart.
  plain      +1% of a plain benchmark's count: yarl's 11 with a copy of yarl first on PYTHONPATH
             whose ``URL.build`` hashes a buffer (``zlib.crc32``, as count_evidence.py injects)
             once every 100 calls: once a call of a ``test_url_build_*`` benchmark (each builds 100
             URLs). The save hashes nothing; the judgements as much as adds +1% to
             ``test_url_build_with_host``'s saved count. That benchmark must read regressed; the
             benchmarks that never build (``test_url_make_*``, join, query, path) unchanged.
             ``--target make``: the copy's ``URL.__new__`` hashes instead, sized to +1% of
             ``test_url_make_with_host_and_path``; the ``test_url_make_*`` benchmarks may move.
             First ``PLAIN_AA`` judgements hash nothing, as the save did: the copy's own A/A
             (``--plain-aa N``: N of them, those after the first ``PLAIN_AA`` each started with
             an environment 1500 B larger than the one before, another start-up).
  ipv6-aa    yarl's ``test_url_make_with_ipv6_address_and_path``, whose count follows the layout
             (docs/shards-and-bisect.md): saved alone, then judged with an unrelated benchmark run
             before it (``test_url_make_with_host*``), or with an 8 KB environment variable, or
             both, in turns. It must never read regressed.
  ipv6-slow  the same benchmark +2%: the copy's ``URL.__new__`` hashes a buffer once every 100
             calls (once a call), saved hashing nothing, judged hashing +2% in the
             same three conditions. It must read regressed or inconclusive, never unchanged.

The part of the buffer hashed is the wanted instructions over ``PER_BYTE`` (callgrind counts 3.98
instructions a byte for ``zlib.crc32(bytes(2876))`` called alone; count_evidence.py 3.85); every
session allocates the same 64 KiB buffer (see ``BURDENS``); the change achieved is the judged
benchmark's count over its saved one, from the verdicts. ``--reuse`` keeps a part's baseline from
an earlier run in the same ``--work`` and goes on numbering its judgements from the rows of
``--out``; ``--judge-layouts-from start`` judges with started layouts (the saves keep forked
ones); ``--plugin DIR`` measures another copy of the plugin (``git archive`` of a commit) in a
``--work`` of its own; ``--threshold PCT`` judges at PCT% rather than the gate's default;
``--target-threshold PCT`` gives plain's target alone a threshold of PCT% (its A/As and its +1%
judgements), as a user gives one test its own in the ini (``concurrency_thresholds``);
``--saves N`` saves each part's baseline N times (each save a session of it, started otherwise). A row
keeps each benchmark's median in each layout (``layouts``). Each part's sessions keep coverage's
data (the suites' addopts) in a file of their own
(``COVERAGE_FILE``). Two runs at once need a ``--work`` each: a run's end removes the copy of
yarl another run's sessions import (they then count yarl's compiled build). Parts run whole, ``--parallel`` of them at a time (counted sessions are
CPU-heavy: 2 at most on 2 cores); ``/proc/loadavg`` is recorded before and after every session.

    python3 evidence/count_matrix.py                                   # every part (about an hour)
    python3 evidence/count_matrix.py --parts ipv6-aa --judgements 4
    python3 evidence/count_matrix.py --table evidence/count_cost/matrix.jsonl   # the docs' table
    python3 evidence/count_matrix.py --smoke      # ipv6-aa, one judgement (minutes; PyPI, valgrind)

It needs PyPI (the sdists, the suites' venvs) and valgrind.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import re
import shutil
import sys
import threading
from pathlib import Path
from statistics import median

# beside this script (python puts its folder first on the import path)
import count_cost
import real_suites
from existing_suites import slowed_copy

OUT = count_cost.OUT.parent / "matrix.jsonl"
IPV6 = "test_url_make_with_ipv6_address_and_path"
#: plain's +1% target (``--target``): its benchmark, the variable that sizes its wrapper's hash,
#: and the prefix of the benchmarks that call the wrapped function (only those may read a change)
TARGETS = {
    # URL.build: its count follows the start-up (its save drew 0.45% high at 9f98ef0)
    "build": ("test_url_build_with_host", "COUNT_MATRIX_BUILD", "test_url_build_"),
    # URL.__new__: one start-up counted test_url_make_* alike to 0.07%
    "make": ("test_url_make_with_host_and_path", "COUNT_MATRIX_NEW", "test_url_make_"),
}
#: instructions a byte of the buffer adds: callgrind counts zlib.crc32(bytes(2876)) alone at 3.98
PER_BYTE = 3.98
#: the judgements' conditions, in turns: what ran before the benchmark, the environment's size
CONDITIONS = ("after-others", "env8k", "after-others-env8k")
PAD = "COUNT_MATRIX_PAD"
#: appended to the copy of yarl/_url.py: the same wrappers in every session, only how much of a
#: buffer they hash differs (their variables always 8 digits long, so the environment keeps its
#: size). The buffer is allocated whole, and the size read as an int above the small ones cached,
#: so that only the hashing differs; yet judgements of the copy hashing nothing read URL.build's
#: benchmarks +2.3% to +3.8% in every forked layout (libpython's dict and type-cache lookups; two
#: saves agree within 0.3%): the judgement's own start-up moves them (docs/gates/instructions.md).
BURDENS = """
import os as _os
import zlib as _zlib


def _burdened(function, variable):
    # the same allocations in every session: only how much of the buffer is hashed differs
    hashed = int(_os.environ.get(variable, "{offset}")) - {offset}  # never a cached small int
    buffer = memoryview(bytes(1 << 16))[:hashed]
    calls = [0]

    def burdened(*args, **kwargs):
        calls[0] += 1
        if calls[0] % 100 == 0:
            _zlib.crc32(buffer)
        return function(*args, **kwargs)

    return burdened


URL.build = classmethod(_burdened(URL.build.__func__, "COUNT_MATRIX_BUILD"))
URL.__new__ = _burdened(URL.__new__, "COUNT_MATRIX_NEW")
"""
OFFSET = 10000  # the variables hold OFFSET + the bytes hashed
PLAIN_AA = 2  # judgements of the copy hashing nothing, as its save did, before the +1% ones
PARTS = ("plain", "aa-yarl", "ipv6-aa", "aa-propcache", "ipv6-slow", "aa-multidict")
SMOKE = {"parts": "ipv6-aa", "judgements": 1}


def stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class Matrix:
    def __init__(self, args):
        self.work = Path(args.work)
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.args = args
        self.checkout = Path(args.plugin) if args.plugin else count_cost.real_suites.REPO
        self.plugin = count_cost.commit(self.checkout) if not args.plugin else args.plugin_label
        # whether its forked layouts draw the type cache anew (``retag`` in measure/layouts.py:
        # tried in 080038d-a69960e, not kept; docs/gates/instructions.md)
        layouts = self.checkout / "pytest_concurrency" / "measure" / "layouts.py"
        self.drawn = "def retag(" in layouts.read_text()
        self.lock = threading.Lock()
        self.rows: list[dict] = []
        self.ready: dict[str, tuple[Path, Path]] = {}

    def prepared(self, dist: str) -> tuple[Path, Path]:
        with self.lock:  # one venv a suite, made once
            if dist not in self.ready:
                self.ready[dist] = count_cost.prepared(dist, self.work, self.checkout)
            return self.ready[dist]

    def copy(self) -> Path:
        """yarl's installed package copied, with BURDENS appended to its _url.py (once)."""
        py, _ = self.prepared("yarl")
        with self.lock:
            root = self.work / "slowed-yarl"
            if not (root / "yarl" / "_url.py").exists():
                code = BURDENS.replace("{offset}", str(OFFSET))
                wrap = real_suites.slowdown("yarl", "", "yarl/_url.py", code, 0)
                slowed_copy(wrap, py, self.work, 0)
            return root

    def session(self, part: str, n: int, kind: str, dist: str, selection: list, env: dict,
                base: Path, condition: str = "") -> dict:  # fmt: skip
        py, run = self.prepared(dist)
        # plain's A/As are numbered apart from its +1% judgements: a file of their own each
        name = f"{part}-{n}-{kind}{'-aa' if condition.startswith('A/A') else ''}"
        # coverage (the suites' addopts) combining its data files while another part's session
        # in the same directory writes its own: an INTERNALERROR, no baseline (exit 3)
        env = {"COVERAGE_FILE": str(self.work / f"{part}.coverage"), **env}
        verdicts = self.work / f"{name}-verdicts.json"
        verdicts.unlink(missing_ok=True)
        gate = (
            [f"--concurrency-save-baseline={base}"]
            if kind == "save"
            else [f"--concurrency-baseline={base}", f"--concurrency-verdicts={verdicts}"]
        )
        if kind == "judge" and self.args.judge_layouts_from:
            gate.append(f"--concurrency-layouts-from={self.args.judge_layouts_from}")
            condition = f"{condition}, {self.args.judge_layouts_from}ed layouts".lstrip(", ")
        if kind == "judge" and part == "plain" and self.args.target_threshold:
            # the +1% target's own threshold, as a user gives one test's (the ini's lines)
            key = f"{selection[0]}::{TARGETS[self.args.target][0]}"
            gate += ["-o", f"concurrency_thresholds={key} = {self.args.target_threshold:g}"]
            condition = f"{condition}, its threshold {self.args.target_threshold:g}%".lstrip(", ")
        if kind == "judge" and self.args.saves > 1:
            condition = f"{condition}, {self.args.saves} saves".lstrip(", ")
        if kind == "judge" and self.args.threshold:
            gate.append(f"--concurrency-threshold={self.args.threshold:g}")
            condition = f"{condition}, judged at {self.args.threshold:g}%".lstrip(", ")
        cmd = [str(py), "-m", "pytest", *selection, *count_cost.COMMON, *count_cost.COUNT, *gate]
        row = {
            "when": stamp(),
            "part": part,
            "n": n,
            "kind": kind,
            "suite": dist,
            "condition": condition,
            "plugin": self.plugin,
            "type_cache_drawn": self.drawn,
            **({"target": TARGETS[self.args.target][0]} if part == "plain" else {}),
            **count_cost.measured(cmd, env, run, self.logs / f"{name}.log"),
            "command": " ".join(
                [*(f"{k}={v[:16]}" for k, v in env.items()), *map(str, cmd)]
            ).replace(str(py), "python"),
        }
        if kind == "judge":
            row.update(judged(verdicts))
        elif base.exists():
            row["layouts"] = saved_layouts(base)
        with self.lock:
            with open(self.args.out, "a") as out:
                out.write(json.dumps(row) + "\n")
            self.rows.append(row)
        print(line(row), flush=True)
        return row

    def saved(self, part: str, dist: str, selection: list, env: dict, base: Path) -> bool:
        """Save the part's baseline; whether it was written (yarl's own coverage threshold fails
        every session of a selection: its exit is 1 with the baseline saved)."""
        if self.args.reuse and base.exists():
            return True
        base.unlink(missing_ok=True)
        for n in range(self.args.saves):  # each a session of the file, started otherwise
            self.session(part, n, "save", dist, selection, env, base)
        return base.exists()

    def tag(self, size: str) -> str:
        """What a judgement's condition holds: the buffer's size, the layouts if not the default."""
        started = self.args.judge_layouts_from
        return f"{size}, {started}ed layouts".lstrip(", ") if started else size

    def judgements(self, part: str, wanted: int, size: str = "") -> range:
        """The part's judgements still to run: numbered on from those in ``--out`` (``--reuse``),
        of a buffer of the same ``size`` where one is given."""
        done = 0
        if self.args.reuse and Path(self.args.out).exists():
            rows = [json.loads(x) for x in Path(self.args.out).read_text().splitlines() if x]
            mine = [r for r in rows if r["part"] == part and r["kind"] == "judge"]
            done = sum(
                size in r["condition"] and ("started" in r["condition"]) == ("started" in size)
                for r in mine
            )
        return range(done, wanted)

    def aa(self, part: str) -> None:
        dist = part.split("-", 1)[1]
        base = self.work / f"{part}.json"
        selection = count_cost.SELECTIONS[dist]
        if not self.saved(part, dist, selection, {}, base):
            return
        for n in self.judgements(part, self.args.judgements):
            self.session(part, n, "judge", dist, selection, {}, base)

    def plain(self) -> None:
        target, variable, _ = TARGETS[self.args.target]
        env = {"PYTHONPATH": str(self.copy()), variable: f"{OFFSET:08d}"}
        base = self.work / "plain.json"
        sel = count_cost.SELECTIONS["yarl"]
        if not self.saved("plain", "yarl", sel, env, base):
            return
        for n in self.judgements("plain", self.args.plain_aa, self.tag("(0 B hashed)")):  # A/A
            # from the third on, each start-up another: an environment n - 1 times 1500 B larger
            pad = {PAD: "x" * 1500 * (n - 1)} if n >= PLAIN_AA else {}
            said = f"A/A (0 B hashed){f', {len(pad[PAD])} B environment' if pad else ''}"
            self.session("plain", n, "judge", "yarl", sel, {**env, **pad}, base, said)
        size = burden(base, target, 0.01)
        wanted = max(self.args.judgements, 10)
        for n in self.judgements("plain", wanted, self.tag(f"({size} B hashed)")):
            burdened = {**env, variable: f"{OFFSET + size:08d}"}
            said = f"+1% ({size} B hashed)"
            self.session("plain", n, "judge", "yarl", sel, burdened, base, said)

    def ipv6(self, part: str) -> None:
        slow = part == "ipv6-slow"
        env = {"PYTHONPATH": str(self.copy()), "COUNT_MATRIX_NEW": f"{OFFSET:08d}"} if slow else {}
        base = self.work / f"{part}.json"
        alone = ["tests/test_url_benchmarks.py", "-k", IPV6]
        after = ["tests/test_url_benchmarks.py", "-k", f"test_url_make_with_host or {IPV6}"]
        if not self.saved(part, "yarl", alone, env, base):
            return
        size = burden(base, IPV6, 0.02) if slow else 0
        judgements = self.args.judgements if slow else max(self.args.judgements, 10)
        if self.args.smoke:
            judgements = 1
        for n in self.judgements(part, judgements, self.tag(f"({size} B hashed)" if slow else "")):
            condition = CONDITIONS[n % len(CONDITIONS)]
            these = {**env, **({"COUNT_MATRIX_NEW": f"{OFFSET + size:08d}"} if slow else {})}
            if "env8k" in condition:
                these[PAD] = "x" * 8192
            sel = after if condition.startswith("after-others") else alone
            said = f"{condition} +2% ({size} B hashed)" if slow else condition
            self.session(part, n, "judge", "yarl", sel, these, base, said)

    def run(self, part: str) -> None:
        if part.startswith("aa-"):
            self.aa(part)
        elif part == "plain":
            self.plain()
        else:
            self.ipv6(part)


def burden(base: Path, name: str, share: float) -> int:
    """The buffer's bytes whose hash adds ``share`` of ``name``'s saved count a call: of the
    median over its saved layouts, as the gate judges it (until c960763, of its first layout's
    median: a save whose first layout counted 0.2% under the others read +1% as +0.8%)."""
    doc = json.loads(base.read_text())
    (bench,) = (b for b in doc["benchmarks"] if b["name"] == name)
    rounds = [bench["stats"]["data"], *bench["extra_info"].get("layouts", [])]
    return round(share * median(median(r) for r in rounds) / PER_BYTE)


def saved_layouts(base: Path) -> dict:
    """Each benchmark's median in each layout a baseline counted it in (as ``judged`` says)."""
    doc = json.loads(base.read_text())
    return {
        short([b["fullname"], ""]): [
            median(rounds) for rounds in [b["stats"]["data"], *b["extra_info"].get("layouts", [])]
        ]
        for b in doc["benchmarks"]
    }


def short(key: list) -> str:
    """A verdict's benchmark: its test's name, with its parameters' id."""
    name = key[0].rpartition("::")[2]
    return f"{name}[{key[1]}]" if key[1] else name


def judged(path: Path) -> dict:
    """A judgement's verdicts: each benchmark's status and change, the largest change."""
    if not path.exists():
        return {"verdicts": {}, "layouts": {}, "largest": None, "largest_benchmark": None}
    doc = json.loads(path.read_text())
    verdicts = {
        short(v["key"]): {
            "status": v["status"],
            "change": v["change"],
        }
        for v in (doc.get("gate") or {}).get("verdicts", [])
    }
    # each benchmark's median in each layout counted (the third only where the first two disagree)
    layouts = {short([r["fullname"], ""]): r.get("medians") for r in doc.get("records", [])}
    changes = {k: v["change"] for k, v in verdicts.items() if v["change"] is not None}
    largest = max(changes, key=lambda k: abs(changes[k]), default=None)
    return {
        "verdicts": verdicts,
        "layouts": layouts,
        "largest": changes.get(largest) if largest else None,
        "largest_benchmark": largest,
    }


def failed(row: dict) -> str:
    """Why a judgement fails its part's rule ("" when it holds)."""
    status = {k.rpartition("::")[2]: v["status"] for k, v in row["verdicts"].items()}
    if not status:
        return f"no verdicts (exit {row['exit']})"
    if row["part"].startswith("aa-") or row["part"] == "ipv6-aa":
        judged_here = status if row["part"].startswith("aa-") else {IPV6: status.get(IPV6)}
        # what fails a session (or asks for a new baseline); inconclusive is counted apart
        wrong = {k: s for k, s in judged_here.items() if s in ("regressed", "improved")}
        if row["part"] == "ipv6-aa":  # the rule: never regressed
            wrong = {k: s for k, s in wrong.items() if s == "regressed"}
        return ", ".join(f"{k} {s}" for k, s in wrong.items())
    if row["part"] == "plain" and row["condition"].startswith("A/A"):
        wrong = {k: s for k, s in status.items() if s in ("regressed", "improved")}
        return ", ".join(f"{k} {s}" for k, s in wrong.items())
    if row["part"] == "plain":
        target = row.get("target", TARGETS["build"][0])
        (calling,) = (prefix for name, _, prefix in TARGETS.values() if name == target)
        building = {k: s for k, s in status.items() if k.startswith(calling)}
        others = {k: s for k, s in status.items() if k not in building and s != "unchanged"}
        missed = "" if status.get(target) == "regressed" else f"{target} missed"
        return ", ".join([missed, *(f"{k} {s}" for k, s in others.items())]).strip(", ")
    return "" if status.get(IPV6) in ("regressed", "inconclusive") else f"{IPV6} unchanged"


def line(row: dict) -> str:
    said = (
        f"{row['part']} {row['kind']} {row['n']} {row['condition']}: exit {row['exit']}, "
        f"{row['cpu_s']} s CPU, {row['wall_s']} s wall (load {row['load_before']})"
    )
    if row["kind"] == "judge":
        largest = row["largest"]
        said += (
            f"; largest {largest:+.3%} ({row['largest_benchmark']})"
            if largest is not None
            else "; no change read"
        )
        said += f"; {failed(row) or 'as it should'}"
    return said


def table(rows: list[dict]) -> str:
    """The docs' table: a row a part (a slowdown's, a row a buffer size)."""
    lines = [
        "| what | judgements | failed | inconclusive | largest change (benchmark) | CPU s each |",
        "|---|---:|---:|---:|---|---|",
    ]
    what = {
        "aa-yarl": "A/A, yarl's 11",
        "aa-propcache": "A/A, propcache's 4",
        "aa-multidict": "A/A, multidict's insert_str (4)",
        "plain": "work sized {size} in `{target}` (yarl's 11): caught, no other flagged",
        "ipv6-aa": "A/A of yarl's ipv6 benchmark, after others / 8 KB environment: never regressed",
        "ipv6-slow": "work sized {size} in yarl's ipv6 benchmark: regressed or inconclusive",
    }
    judgements = [r for r in rows if r["kind"] == "judge"]
    groups: dict[tuple, list[dict]] = {}
    for r in judgements:
        size = re.search(r"\+\d+% \(\d+ B( hashed)?\)", r["condition"])
        aa = r["condition"].startswith("A/A")
        started = "started" in r["condition"]
        drawn = r.get("type_cache_drawn", False)
        own = re.search(r"its threshold [\d.]+%|judged at [\d.]+%", r["condition"])
        saves = re.search(r"\d+ saves", r["condition"])
        key = (
            r["part"],
            size.group() if size else "",
            aa,
            started,
            drawn,
            own.group() if own else "",
            saves.group() if saves else "",
            r.get("target", TARGETS["build"][0]) if r["part"] == "plain" else "",
        )
        groups.setdefault(key, []).append(r)
    for (part, size, aa, started, drawn, own, saves, target), these in groups.items():
        bad = [r for r in these if failed(r)]
        unsure = [
            r for r in these if "inconclusive" in {v["status"] for v in r["verdicts"].values()}
        ]
        known = [r for r in these if r["largest"] is not None]
        top = max(known, key=lambda r: abs(r["largest"]), default=None)
        name = top["largest_benchmark"].rpartition("::")[2] if top else ""
        largest = f"{top['largest']:+.2%} (`{name}`)" if top else "-"
        cpu = ", ".join(f"{r['cpu_s']:.0f}" for r in these)
        said = what.get(part, part).format(size=size, target=target)
        if aa:
            wrapped = "URL.build" if target == TARGETS["build"][0] else "URL.__new__"
            said = f"A/A of yarl's 11 with the copy's `{wrapped}` (nothing hashed)"
        if started:
            said += ", judged with started layouts"
        if drawn:
            said += ", forked layouts drawing the type cache anew"
        if saves:
            said += f", a baseline of {saves}"
        if own.startswith("judged"):
            said += f", every benchmark {own}"
        elif own:
            said += f", {own.replace('its', f'`{target}`' + chr(39) + 's')}"
        lines.append(f"| {said} | {len(these)} | {len(bad)} | {len(unsure)} | {largest} | {cpu} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument(
        "--judgements",
        type=int,
        default=7,
        help="a part's judgements (plain, ipv6-aa: 10 at least)",
    )
    parser.add_argument(
        "--plain-aa",
        type=int,
        default=PLAIN_AA,
        help=f"plain's A/A judgements (the first {PLAIN_AA} as the save started, then each "
        "with another environment's size)",
    )
    parser.add_argument(
        "--plugin", help="the plugin's checkout to measure (default this one: a copy of another)"
    )
    parser.add_argument("--plugin-label", default="", help="a row's plugin, with --plugin")
    parser.add_argument("--parallel", type=int, default=2, help="parts run at a time")
    parser.add_argument(
        "--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "count_matrix")
    )
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument(
        "--reuse", action="store_true", help="keep the parts' baselines of an earlier run"
    )
    parser.add_argument(
        "--judge-layouts-from",
        choices=("fork", "start"),
        help="judge with --concurrency-layouts-from (the saves keep the default, fork)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="PCT",
        help="judge at this threshold (--concurrency-threshold) rather than the gate's default",
    )
    parser.add_argument(
        "--saves",
        type=int,
        default=1,
        help="saves into each part's baseline (each a session of it, started otherwise)",
    )
    parser.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="build",
        help="plain's +1%% target: URL.build's test_url_build_with_host, or URL.__new__'s "
        "test_url_make_with_host_and_path",
    )
    parser.add_argument(
        "--target-threshold",
        type=float,
        metavar="PCT",
        help="plain's judgements give its target this threshold (the ini's "
        "concurrency_thresholds, as a user gives one test's), the others the gate's",
    )
    parser.add_argument(
        "--table", metavar="JSONL", nargs="+", help="print the table of results files"
    )
    parser.add_argument("--smoke", action="store_true", help=f"the smallest run: {SMOKE}")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    if args.table:
        rows = [
            json.loads(x) for path in args.table for x in Path(path).read_text().splitlines() if x
        ]
        print(table(rows))
        return 0
    if args.smoke:  # a smoke run is no evidence: its rows go beside its work
        args.out = str(Path(args.work) / "matrix.jsonl")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    matrix = Matrix(args)
    parts: queue.Queue = queue.Queue()
    for part in args.parts.split(","):
        parts.put(part)

    def worker() -> None:
        while True:
            try:
                part = parts.get_nowait()
            except queue.Empty:
                return
            matrix.run(part)

    threads = [threading.Thread(target=worker) for _ in range(args.parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(matrix.work / "slowed-yarl", ignore_errors=True)
    print(table(matrix.rows))
    judgements = [r for r in matrix.rows if r["kind"] == "judge"]
    return 1 if not judgements or any(failed(r) for r in judgements) else 0


if __name__ == "__main__":
    sys.exit(main())
