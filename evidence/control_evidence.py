"""Time judged over the controls timed beside each round (measure/control.py), against time judged
raw and pytest-benchmark's ``--benchmark-compare-fail=mean:5%``, on the same sessions.

The project: users' plain tests (``benchmark``), each doing ``F`` times its work, where ``F``
(env ``CONTROL_F``) is the condition's factor, so 1.05 is exactly 5% more of the same work:

* ``test_pure``: a pure-Python function;
* ``test_ring[asyncio|gevent|threading]``: a token passed round a ring of 8 tasks over the
  model's channels (``concurrency_backend``);
* ``test_roundtrip``: an asyncio client's round trips to an echo server on loopback, the server's
  event loop in a fixture.

A stored baseline of ``--baseline-sessions`` quiet sessions is saved first (the plugin's
``--concurrency-save-baseline``; the first session's JSON is pytest-benchmark's base for its rule).
Then the conditions (``FACTOR@BUSY``: the factor, busy-loop processes beside) take turns, session
by session, each session writing ``--benchmark-json``. Every session is then judged three ways,
here, on its first rounds (the plugin's second session of a suspect is not part of this):

* ``control``: the plugin's gate as it is (rounds over their controls where they scale);
* ``control 3%``: the same at a threshold of 3% (``--concurrency-threshold=3``);
* ``raw``: the same gate on the same records with their controls taken away (raw time);
* ``pb``: pytest-benchmark's ``mean:5%`` against the base session's means.

A benchmark fails a rule when its verdict is regressed (pb: its mean rose more than 5%); a
session fails when any benchmark does. Per condition and rule: sessions failed, and per
benchmark. Results append to ``evidence/control/results.jsonl`` (one line a session).

    python3 evidence/control_evidence.py --sessions 50
    python3 evidence/control_evidence.py --sessions 10 --conditions 1.0@0,1.05@0
    python3 evidence/control_evidence.py --smoke
    python3 evidence/control_evidence.py --judge-only DIR     # judge a run's sessions again (its
                                                              # directory, printed at its start),
                                                              # also with a second process (TWICE)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from against_evidence import busy_loops  # beside this script
from stored_time_evidence import pytest_args

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "control" / "results.jsonl"
#: control: the gate as it is; control 3%: the same at a 3% threshold; raw: the gate on the
#: records without their controls; pb: pytest-benchmark's mean:5%
RULES = ("control", "control 3%", "raw", "pb")
#: ``--judge-only``: the two control rules again, a suspect's second session being the next session
#: of its condition (another process, as the plugin's second session is: its tests run again)
TWICE = ("control, 2 processes", "control 3%, 2 processes")
MODELS = "asyncio,gevent,threading"  # the ring's
SMOKE = {"sessions": 1, "baseline_sessions": 1, "conditions": "1.0@0,1.10@1"}

TESTS = textwrap.dedent(
    """
    import asyncio, os, threading
    import pytest

    F = float(os.environ.get("CONTROL_F", "1"))


    def work(n):
        total = 0
        for i in range(n):
            total += i * i % 7
        return total


    def test_pure(benchmark):
        n = int(20000 * F)
        assert benchmark(work, n) == work(n)


    def test_ring(benchmark, concurrency_backend):
        b, hops = concurrency_backend, int(400 * F)
        if b.family == "async":
            async def node(inbox, outbox):
                while (token := await inbox.get()) is not None:
                    await outbox.put(token + 1)
                await outbox.put(None)

            async def main():
                chans = [b.channel(1) for _ in range(8)]
                tasks = [b.spawn(node, chans[i], chans[(i + 1) % 8]) for i in range(7)]
                token = 0
                await chans[0].put(0)
                while token < hops:
                    token = await chans[7].get() + 1
                    if token < hops:
                        await chans[0].put(token)
                await chans[0].put(None)
                await chans[7].get()
                for t in tasks:
                    await t.join()
                return token
        else:
            def node(inbox, outbox):
                while (token := inbox.get()) is not None:
                    outbox.put(token + 1)
                outbox.put(None)

            def main():
                chans = [b.channel(1) for _ in range(8)]
                tasks = [b.spawn(node, chans[i], chans[(i + 1) % 8]) for i in range(7)]
                token = 0
                chans[0].put(0)
                while token < hops:
                    token = chans[7].get() + 1
                    if token < hops:
                        chans[0].put(token)
                chans[0].put(None)
                chans[7].get()
                for t in tasks:
                    t.join()
                return token
        assert benchmark(b.run, main) >= hops


    @pytest.fixture
    def echo():
        loop = asyncio.new_event_loop()

        async def serve(reader, writer):
            while data := await reader.read(64):
                writer.write(data)
                await writer.drain()
            writer.close()

        server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        reader, writer = loop.run_until_complete(asyncio.open_connection("127.0.0.1", port))
        yield loop, reader, writer
        writer.close()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


    def test_roundtrip(benchmark, echo):
        loop, reader, writer = echo
        trips = int(30 * F)

        async def trip():
            for _ in range(trips):
                writer.write(b"x" * 64)
                await writer.drain()
                assert len(await reader.readexactly(64)) == 64
            return trips

        assert benchmark(lambda: loop.run_until_complete(trip())) == trips
    """
)


def run(project: Path, args: list[str], factor: float, busy: int) -> tuple[float, str, int, float]:
    """One session: seconds, output, exit status, the machine's load average at its end."""
    with busy_loops(busy):
        start = time.perf_counter()
        done = subprocess.run(
            args,
            cwd=project,
            env={**os.environ, "CONTROL_F": str(factor)},
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - start
    return took, done.stdout + done.stderr, done.returncode, os.getloadavg()[0]


def judge(base_doc: dict, pb_base: dict, session_doc: dict, second_doc: dict | None = None) -> dict:
    """rule -> {benchmark label: verdict} for one session's JSON (``second_doc``: another
    session's, for the ``TWICE`` rules)."""
    from pytest_concurrency.gate import compare
    from pytest_concurrency.measure.records import Document
    from pytest_concurrency.store import baseline
    from pytest_concurrency.store.history import Baseline

    meta = baseline.current_meta({}, None)
    recs = Document.of(session_doc).records
    out: dict = {rule: {} for rule in RULES}
    bare = _without_controls(base_doc), Document.of(_without_controls(session_doc)).records
    for rule, (doc, records, threshold) in {
        "control": (base_doc, recs, None),
        "control 3%": (base_doc, recs, 0.03),
        "raw": (*bare, None),
    }.items():
        settings = compare.GateSettings(threshold=threshold)
        result = compare.compare(Baseline.of(doc), records, meta, settings)
        out[rule] = _verdicts(result)
        if second_doc is not None and rule != "raw":
            suspects = set(compare.suspects(result))
            reruns = {r.key: r for r in Document.of(second_doc).records if r.key in suspects}
            if reruns:
                again = compare.faster_sessions(records, reruns)
                second = compare.compare(Baseline.of(doc), again, meta, settings)
                result = compare.reproduce(result, second, reruns)
            out[f"{rule}, 2 processes"] = _verdicts(result)
    base_means = {b["fullname"]: b["stats"]["mean"] for b in pb_base["benchmarks"]}
    for b in session_doc["benchmarks"]:
        then = base_means.get(b["fullname"])
        if then:
            change = b["stats"]["mean"] / then - 1
            status = "regressed" if change > 0.05 else "unchanged"
            out["pb"][b["name"]] = {"status": status, "change": change}
    cost = [
        b["extra_info"].get("control_cost")
        for b in session_doc["benchmarks"]
        if b["extra_info"].get("control_cost") is not None
    ]
    out["control_cost"] = max(cost) if cost else None
    return out


def _verdicts(result) -> dict:
    return {
        f"{v.key[0]}[{v.key[2]}]": {
            "status": v.status,
            "change": v.change,
            "raw": v.raw_change,
            "by": v.decided_by,
            "why_raw": v.not_divided,
            "interference": bool(v.interference),
        }
        for v in result.verdicts
    }


def _without_controls(doc: dict) -> dict:
    from pytest_concurrency.measure import control

    def strip(extra: dict) -> dict:
        return {k: v for k, v in extra.items() if k not in control.KEYS}

    out = json.loads(json.dumps(doc))
    for b in out.get("benchmarks") or ():
        b["extra_info"] = strip(b.get("extra_info") or {})
    section = out.get("pytest_concurrency") or {}
    for entry in section.get("history") or ():
        entry["benchmarks"] = [strip(b) for b in entry["benchmarks"]]
    return out


def summary(lines: list[dict]) -> str:
    by = collections.defaultdict(list)
    for line in lines:
        by[line["condition"]].append(line)
    out = []
    for cond, runs in by.items():
        factor = float(cond.split("@")[0])
        want = "unchanged" if factor == 1.0 else "regressed"
        out.append(f"{cond} ({len(runs)} sessions; a session fails when any benchmark regressed)")
        for rule in [r for r in (*RULES, *TWICE) if r in runs[0]]:
            failed = sum(any(v["status"] == "regressed" for v in r[rule].values()) for r in runs)
            per = collections.Counter(
                label for r in runs for label, v in r[rule].items() if v["status"] == "regressed"
            )
            what = "failed" if want == "unchanged" else "caught (failed)"
            detail = ", ".join(f"{k} {n}" for k, n in sorted(per.items()))
            out.append(f"  {rule:10s} {what} {failed}/{len(runs)}   regressed: {detail or '-'}")
        costs = [r["control_cost"] for r in runs if r.get("control_cost") is not None]
        if costs:
            out.append(
                f"  controls' cost, the highest benchmark's: median {sorted(costs)[len(costs) // 2]:.1%}"
            )
    return "\n".join(out)


def judge_again(work: Path) -> int:
    """The summary of a run's sessions judged again (the script's run directory, kept in /tmp)."""
    base_doc = json.loads((work / "baseline.json").read_text())
    pb_doc = json.loads((work / "pb-base.json").read_text())
    sessions = collections.defaultdict(list)  # condition -> its sessions' files, in order
    for path in sorted(work.glob("s*-*.json"), key=lambda p: int(p.name[1:].split("-")[0])):
        sessions[path.stem.split("-", 1)[1]].append(path)
    lines = []
    for condition, paths in sessions.items():
        for i, path in enumerate(paths):
            # a suspect's second session: the next session of its condition (the last one's, the
            # one before), another process of the same code
            other = paths[i + 1] if i + 1 < len(paths) else paths[i - 1] if i else None
            second = json.loads(other.read_text()) if other else None
            judged = judge(base_doc, pb_doc, json.loads(path.read_text()), second)
            lines.append({"condition": condition, **judged})
    print(summary(lines))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--baseline-sessions", type=int, default=5)
    ap.add_argument("--conditions", default="1.0@0,1.05@0,1.0@1,1.10@1")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--judge-only", type=Path, help="a run's directory: judge its sessions again")
    args = ap.parse_args()
    if args.judge_only:
        return judge_again(args.judge_only)
    if args.smoke:
        for k, v in SMOKE.items():
            setattr(args, k, v)
    conditions = []
    for spec in args.conditions.split(","):
        factor, _, busy = spec.partition("@")
        conditions.append((spec, float(factor), int(busy or 0)))
    work = Path(tempfile.mkdtemp(prefix="control-evidence-"))
    print(f"the run's directory (its sessions' JSON): {work}", flush=True)
    if args.smoke and args.out == RESULTS:  # a smoke run (the tests') is no evidence: kept apart
        args.out = work / "results.jsonl"
    project = work / "project"
    project.mkdir()
    (project / "test_control.py").write_text(TESTS)
    base, pb_base = work / "baseline.json", work / "pb-base.json"
    for i in range(args.baseline_sessions):
        pb = [f"--benchmark-json={pb_base}"] if i == 0 else []
        took, out, code, load = run(
            project, pytest_args(MODELS, f"--concurrency-save-baseline={base}", *pb), 1.0, 0
        )
        print(f"baseline session {i + 1}: {took:.0f} s, exit {code}, load {load:.1f}", flush=True)
        if code != 0:
            print(out[-3000:])
            return 1
    base_doc, pb_doc = json.loads(base.read_text()), json.loads(pb_base.read_text())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    try:
        for i in range(args.sessions):
            for spec, factor, busy in conditions:
                json_path = work / f"s{i}-{spec}.json"
                took, out, code, load = run(
                    project, pytest_args(MODELS, f"--benchmark-json={json_path}"), factor, busy
                )
                if not json_path.exists():
                    print(f"{spec} session {i + 1}: no JSON (exit {code})\n{out[-2000:]}")
                    continue
                line = {
                    "condition": spec,
                    "session": i + 1,
                    "seconds": round(took, 1),
                    "load": round(load, 2),
                    "python": sys.version.split()[0],
                    **judge(base_doc, pb_doc, json.loads(json_path.read_text())),
                }
                lines.append(line)
                with args.out.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line) + "\n")
                fails = {
                    r: sum(v["status"] == "regressed" for v in line[r].values()) for r in RULES
                }
                print(
                    f"{spec} session {i + 1}: {took:.0f} s, load {load:.1f}, regressed {fails}",
                    flush=True,
                )
    except KeyboardInterrupt:
        print("interrupted: the figures of the sessions that ran")
    print(summary(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
