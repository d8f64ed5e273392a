"""Issue 65 on real suites: where time cannot decide beside a busy loop, the counts decide.

Each suite is its sdist's tree **with** its source, a git repository of one commit, installed
editable (pure Python: the compiled parts switched off by the build's own variable) in a venv of
its own with its test plugins, as a project's CI checkout is: so a stored time baseline's recorded
commit can be installed again and counted (roles/arbiter.py), and ``git:COMMIT`` is the base of a
run against it. Its configuration is as published. Sessions, in order:

  save        a timed session saved (``--concurrency-save-baseline``), given ``--saves`` times, on
              the clean commit (beside ``--busy-saves`` busy loops; default none)
  aa          judged against them, the code unchanged: must not fail
  slow        the suite's hot function given ``--iterations`` loop turns a call more in the working
              tree (uncommitted; CPU-bound): must fail, naming exactly the benchmarks that call it
              (the suite's ``slowed`` pattern) and no other
  io          the same function's wait, committed at 0 ms (``NAP``), made ``--nap-ms`` long
              (I/O-bound: the counts cannot see it): its benchmarks must never read "unchanged";
              undecided is said first
  against-aa  ``--concurrency-against=git:CLEAN``, the code unchanged
  against     the same, with the CPU-bound slowdown in the working tree

The judged sessions run beside ``--busy`` busy loops (killed once the arbiter starts counting: the
loops are the timed part's load), with ``--concurrency-undecided=exit`` so that an undecided run
ends 9, not 0. Every session is a line of ``--out`` (JSONL): its exit status, the first line of the
gate's summary, whether it counted, each benchmark's final status, change and note (from
``--concurrency-verdicts``), which benchmarks should have regressed, the load, the wall seconds.

    python3 evidence/undecided_suites.py --suites fastapi --work /tmp/u65 --sessions save,save,save,aa,slow
    python3 evidence/undecided_suites.py --work /tmp/u65 --sessions aa,slow,io,against-aa,against
    python3 evidence/undecided_suites.py --summary evidence/undecided/suites.jsonl --plugin 1a2b3c4

It needs PyPI (sdists, build backends, the suites' plugins) and valgrind; ``--summary`` needs
nothing: it reads rows and prints the issue's figures (A/As failed, slowdowns caught by name, the
I/O-bound ones' first lines, what counting cost beside the timed part).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

# beside this script (python puts its folder first on the import path)
import codspeed_suite
import existing_suites
import real_suites
import undecided_evidence

REPO = real_suites.REPO
OUT = REPO / "evidence" / "undecided" / "suites.jsonl"
#: A wait in one hot function, committed with the clean tree at 0 ms: the io session changes
#: only ``_EVIDENCE_NAP_MS`` (a longer sleep, which counts cannot see). Added by the io session
#: alone, the wrapper's own instructions were a CPU change: zeroconf's send counted +10.92%.
NAP = """

# --- added by evidence/undecided_suites.py: a wait in one hot function ---
_EVIDENCE_NAP_MS = 0.0


def _slowed(function):
    import functools
    import time

    @functools.wraps(function)
    def slowed(*args, **kwargs):
        time.sleep(_EVIDENCE_NAP_MS / 1000)
        return function(*args, **kwargs)

    return slowed


{wrap}
"""
NAP_LINE = "_EVIDENCE_NAP_MS = 0.0"


@dataclasses.dataclass(frozen=True)
class FromSource:
    suite: real_suites.RealSuite  # its release, deps, selection, slowdown and ``slowed`` pattern
    build_env: dict  # what makes its build pure Python
    args: tuple = ()  # what its benchmarks need on the command line
    iterations: int = 0  # the CPU-bound slowdown's loop turns a call (about +10% of a benchmark)
    select: tuple = ()  # instead of the suite's counted selection
    slowed: str = ""  # instead of the suite's pattern of the benchmarks the slowdown must regress


SUITES = {
    # its modules skip themselves unless --codspeed is given (docs/existing-suite.md)
    # 1500 turns: +7.8% counted in one of its four request benchmarks, one read -0.5% in time
    "fastapi": FromSource(codspeed_suite.SUITE, {}, ("--codspeed",), 3000),
    # built pure Python, its C implementation's ids fail: the pure one's (by node id: ``-k py``
    # matches the module's name too), an insert (slowed: item assignment) and a lookup (not)
    "multidict": FromSource(
        real_suites.SUITES["multidict"],
        {"MULTIDICT_NO_EXTENSIONS": "1"},
        # 2 turns: the case-sensitive insert +10.3% counted, the case-insensitive one less
        iterations=6,
        select=tuple(
            f"tests/test_multidict_benchmarks.py::test_multidict_{test}[{cls}-py]"
            for test in ("insert_str", "get_hit")
            for cls in ("cs", "ci")
        ),
        slowed=r"^test_multidict_insert_str",
    ),
    # 600 turns made its send +637% (counted); the wrapper alone, +12.3%, is nearest the +10% asked
    "zeroconf": FromSource(real_suites.SUITES["zeroconf"], {"SKIP_CYTHON": "1"}, (), 0),
}


def sh(cmd: list, log, env=None) -> None:
    subprocess.run([str(c) for c in cmd], check=True, stdout=log, stderr=log, env=env)


def git(run: Path, *args: str) -> str:
    who = ["-c", "user.name=evidence", "-c", "user.email=evidence@localhost"]
    done = subprocess.run(["git", *who, "-C", str(run), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} in {run}: {done.stderr.strip()}")
    return done.stdout.strip()


def prepare(s: FromSource, work: Path, log) -> tuple[Path, Path, str]:
    """The suite's venv, its checkout (the whole sdist, one commit) installed editable, and that
    commit."""
    suite = s.suite
    run = work / f"src-{suite.dist}"
    if not run.exists():
        sdists = work / "sdists"
        sdists.mkdir(parents=True, exist_ok=True)
        name = f"{suite.dist}-{suite.version}"
        if not list(sdists.glob(f"{name}.tar.gz")):
            sh([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                suite.dist, f"{suite.dist}=={suite.version}", "-d", sdists], log)  # fmt: skip
        (tarball,) = sdists.glob(f"{name}.tar.gz")
        with tarfile.open(tarball) as tar:
            tar.extractall(sdists, filter="data")
        shutil.copytree(sdists / name, run)
        with open(_hot_module(s, run), "a") as fh:
            fh.write(NAP.format(wrap=suite.slowdown.wrap))
        git(run, "init", "-q")
        git(run, "add", "-A")
        git(run, "commit", "-q", "-m", name)
    venv = work / f"venv-src-{suite.dist}"
    py = venv / "bin" / "python"
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not py.exists():
        env = {**os.environ, **s.build_env}
        sh([uv, "venv", "-q", "--seed", "--python", sys.executable, venv], log)
        reqs = [REPO, *real_suites.BASE_DEPS, *suite.deps]
        sh([uv, "pip", "install", "-q", "--python", py, *reqs, "-e", run], log, env)
    # this checkout's plugin, whatever an earlier run of the same --work installed (its rows
    # name this commit)
    sh([uv, "pip", "install", "-q", "--python", py, "--no-deps", "--reinstall", REPO], log)
    return py, run, git(run, "rev-parse", "HEAD")


def slowed(s: FromSource, run: Path, how: str, args) -> None:
    """The working tree's hot function slowed (``cpu``: loop turns; ``io``: a sleep), uncommitted."""
    git(run, "checkout", "-q", "--", ".")
    if how == "clean":
        return
    module = _hot_module(s, run)
    text = module.read_text()
    if how == "io":
        if NAP_LINE not in text:
            raise SystemExit(
                f"{module} has no {NAP_LINE!r} (a --work made before it): use a new --work"
            )
        module.write_text(text.replace(NAP_LINE, f"_EVIDENCE_NAP_MS = {float(args.nap_ms)}"))
        return
    iterations = args.iterations or s.iterations
    module.write_text(
        text + existing_suites.SLOWDOWN.format(iterations=iterations, wrap=s.suite.slowdown.wrap)
    )


def _hot_module(s: FromSource, run: Path) -> Path:
    """The module of the suite's slowed function, in its checkout (a src/ layout or not)."""
    module = run / s.suite.slowdown.module
    return module if module.exists() else run / "src" / s.suite.slowdown.module


def session(s: FromSource, py: Path, run: Path, name: str, args: list, busy: int, logs: Path):
    verdicts = logs / f"{name}.verdicts.json"
    verdicts.unlink(missing_ok=True)
    argv = [str(py), "-m", "pytest", "--benchmark-only", "-p", "no:cacheprovider", *s.args, *args]
    if not any(a.startswith("--concurrency-against") for a in args):
        argv.append(f"--concurrency-verdicts={verdicts}")
    argv += s.select or s.suite.count_select
    env = {**os.environ, **s.build_env, "COLUMNS": "200"}
    before, started = existing_suites.loadavg(), time.monotonic()
    out_file, err_file = logs / f"{name}.out", logs / f"{name}.err"
    code, timed, cpu = undecided_evidence.beside_busy_loops(
        argv, run, env, busy, out_file, err_file
    )
    out, err = out_file.read_text(errors="replace"), err_file.read_text(errors="replace")
    said = ("UNDECIDED", "Gate:", "against the base FAILED", "against the base passed")
    first = next((x for x in out.splitlines() if x.startswith(said)), "")
    found = {}
    if verdicts.exists():
        found = stored_verdicts(verdicts)
    else:  # against the base in time, which writes no verdict file yet: its terminal section
        found = paired_verdicts(out)
    return {
        "exit": code,
        "wall_s": round(time.monotonic() - started, 1),
        "timed_s": round(timed, 1) if timed is not None else None,
        **cpu,
        "busy_loops": busy,
        "load_before": before,
        "load_after": existing_suites.loadavg(),
        "counted": undecided_evidence.ARBITER_SAYS in err,
        "first_line": first,
        "summary": codspeed_suite.summary(out),
        "regressed": codspeed_suite.regressed(out),
        "verdicts": found,
        "command": " ".join(argv[1:]).replace(str(logs) + "/", ""),
    }


def stored_verdicts(path: Path) -> dict:
    """Each test's verdict in a ``--concurrency-verdicts`` file: its status, change and note, by
    its name and parametrization (multidict's ``[...cs-py]`` and ``[...ci-py]`` are two)."""
    found = {}
    for v in (json.loads(path.read_text()).get("gate") or {}).get("verdicts", []):
        test, pid = str(v["key"][0]).split("::")[-1], v["key"][1]
        found[f"{test}[{pid}]" if pid else test] = {
            k: v.get(k) for k in ("status", "change", "decided_by", "note")
        }
    return found


#: a time verdict against the base, as report/terminal.py prints it (gate/paired.line)
PAIRED = re.compile(
    r"(?P<label>\S+?)(?: on \S+)?: (?:(?P<change>[+-][\d.]+)% \(.*?threshold \d+%\): )?"
    r"(?P<status>regressed|improved|unchanged|inconclusive|missing|new)\b[;:]? ?(?P<note>.*)"
)


def paired_verdicts(out: str) -> dict:
    """Each test's time verdict against the base, read from the run's section of them: its status,
    change and note (a kernel figure's line names its figure after the test, and is left out)."""
    section = out.partition(" against the base side (paired rounds) ")[2].splitlines()[1:]
    entries: list[str] = []
    for line in section:
        if line.startswith("against the base "):
            break
        if line.startswith("    ") and entries:
            entries[-1] += " " + line.strip()
        elif line.startswith("  ") or line.startswith(("UNDECIDED", "Sides:")):
            entries.append(line.strip())
    found = {}
    for entry in entries:
        m = PAIRED.fullmatch(entry)
        if m and "::" in m["label"]:
            name = m["label"].split("::")[-1]
            change = float(m["change"]) / 100 if m["change"] else None
            found[name] = {"status": m["status"], "change": change, "note": m["note"].strip("()")}
    return found


def plan(kind: str, base: Path, clean: str) -> tuple[str, list]:
    """A session kind's working tree (clean, cpu, io) and arguments."""
    stored = [f"--concurrency-baseline={base}", "--concurrency-undecided=exit"]
    against = [f"--concurrency-against=git:{clean}", "--concurrency-undecided=exit"]
    return {
        "save": ("clean", [f"--concurrency-save-baseline={base}"]),
        "aa": ("clean", stored),
        "slow": ("cpu", stored),
        "io": ("io", stored),
        "against-aa": ("clean", against),
        "against": ("cpu", against),
    }[kind]


def summary(rows: list[dict]) -> str:
    """The issue's figures from ``rows``, a line a session kind of each suite."""
    lines = []
    for suite in dict.fromkeys(r["suite"] for r in rows):
        for kind in ("aa", "against-aa", "slow", "against", "io", "save"):
            them = [r for r in rows if r["suite"] == suite and r["session"] == kind]
            if them:
                lines.append(f"{suite} {kind}: {_kind_summary(kind, them)}")
    return "\n".join(lines)


def _kind_summary(kind: str, rows: list[dict]) -> str:
    n = len(rows)
    exits = ", ".join(str(r["exit"]) for r in rows)
    counted = sum(bool(r["counted"]) for r in rows)
    cost = [
        f"{r['timed_cpu_s']}+{round(r['cpu_s'] - r['timed_cpu_s'], 1)}"
        for r in rows
        if r.get("timed_cpu_s") is not None and r.get("cpu_s") is not None
    ]
    spent = f"; CPU s timed+counted {', '.join(cost)}" if cost else ""
    if kind in ("aa", "against-aa", "save"):
        failed = [name for r in rows for name in r["regressed"]]
        named = f" ({', '.join(failed)})" if failed else ""
        return (
            f"{n} sessions, exits {exits}, {sum(r['exit'] == 1 for r in rows)} failed{named}, "
            f"{counted} counted{spent}"
        )
    if kind == "io":
        said = sum(r["first_line"].startswith("UNDECIDED") for r in rows)
        unchanged = [
            k
            for r in rows
            for k, v in r["verdicts"].items()
            if v["status"] == "unchanged" and _slowed_in(r, k)
        ]
        return f"{n} sessions, exits {exits}, undecided said first in {said}, read unchanged {unchanged}"
    caught = sum(
        bool(r["should_regress"])
        and sorted(k for k, v in r["verdicts"].items() if v["status"] == "regressed")
        == sorted(r["should_regress"])
        for r in rows
    )
    changes = [
        f"{k} {v['status']} (counted {_counted(v['note'])})"
        for r in rows
        for k, v in r["verdicts"].items()
        if k in r["should_regress"]
    ]
    return (
        f"{n} sessions, exits {exits}, caught exactly {caught} of {n}; {', '.join(changes)}{spent}"
    )


def _counted(note: str) -> str:
    """The counted change a verdict's note says (``instructions +12.32% against ...``)."""
    found = re.search(r"instructions (?:unchanged \()?([+-][\d.]+%)", note or "")
    return found[1] if found else "nothing"


def _slowed_in(row: dict, name: str) -> bool:
    suite = SUITES[row["suite"].split()[0]]
    return re.search(suite.slowed or suite.suite.slowed, name) is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", default=",".join(SUITES), help=f"of {', '.join(SUITES)}")
    ap.add_argument("--sessions", default="save,save,save,aa,slow,io,against-aa,against")
    ap.add_argument("--work", type=Path, help="venvs, checkouts, baselines, logs")
    ap.add_argument("--busy", type=int, default=2, help="busy loops beside the judged sessions")
    ap.add_argument("--busy-saves", type=int, default=0, help="busy loops beside the saves")
    ap.add_argument("--iterations", type=int, help="the CPU-bound slowdown (default: the suite's)")
    ap.add_argument("--nap-ms", type=float, default=1.0, help="the I/O-bound slowdown's sleep")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summary", type=Path, help="print the figures of a results file, and stop")
    ap.add_argument("--plugin", help="with --summary: only the rows of this plugin commit")
    ap.add_argument("--smoke", action="store_true", help="--summary of the recorded results")
    args = ap.parse_args()
    if args.smoke:
        args.summary = args.summary or OUT
    if args.summary:
        rows = [json.loads(x) for x in args.summary.read_text().splitlines() if x.strip()]
        print(summary([r for r in rows if args.plugin in (None, r["plugin"])]))
        return 0
    if args.work is None:
        ap.error("--work is required to run sessions")
    work = args.work.resolve()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    plugin = git(REPO, "rev-parse", "--short", "HEAD")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for dist in args.suites.split(","):
        s = SUITES[dist]
        with open(logs / f"setup-{dist}.log", "a") as log:
            py, run, clean = prepare(s, work, log)
        base = work / f"{dist}-time.json"
        for n, kind in enumerate(args.sessions.split(",")):
            tree, extra = plan(kind, base, clean)
            slowed(s, run, tree, args)
            busy = args.busy_saves if kind == "save" else args.busy
            name = f"{dist}-{kind}-{time.strftime('%H%M%S')}-{n}"
            row = session(s, py, run, name, extra, busy, logs)
            slowed(s, run, "clean", args)
            row.update(
                suite=f"{dist} {s.suite.version}",
                session=kind,
                tree=tree,
                iterations=(args.iterations or s.iterations) if tree == "cpu" else None,
                nap_ms=args.nap_ms if tree == "io" else None,
                should_regress=sorted(
                    k for k in row["verdicts"] if re.search(s.slowed or s.suite.slowed, k)
                )
                if tree == "cpu"
                else [],
                plugin=plugin,
                stamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            with open(args.out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"{dist} {kind}: exit {row['exit']}, {row['wall_s']} s, counted {row['counted']}")
            print(f"   {row['first_line'] or row['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
