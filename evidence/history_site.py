"""How fast the run log's site is written and drawn with a long history (docs/history.md).

A synthetic run log of RUNS runs x BENCHMARKS benchmarks (time, a run a commit of a git
branch of RUNS commits, a step slower now and then, each step's run carrying the gate's
regressed verdict, the others unchanged ones) is written with the
package's own writer, then drawn as the user does (``python -m pytest_concurrency history DIR
--html SITE``, its wall and CPU seconds), and its index opened in a headless Chromium (Debian's
``chromium`` and ``chromium-driver``, driven by Selenium): the milliseconds from the navigation's
start to the end of the index's script (``window.renderedAt``) and to the load event, the median
of five loads (and the least), with the CPU seconds the browser's processes spent on each (what
a loaded machine does not inflate). With --screenshots DIR, the index and a case page are saved there as PNG.

    python evidence/history_site.py                       # 1,000 x 200: evidence/history/site.json
    python evidence/history_site.py --smoke               # 30 x 12, the same steps
    python evidence/history_site.py --screenshots docs    # and docs/history-index.png, -case.png
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_concurrency.measure.records import Record
from pytest_concurrency.report import runlog

HERE = Path(__file__).resolve().parent
OUT = HERE / "history" / "site.json"
WORKLOADS = ("ring", "chain", "io", "spawn", "switch", "cancel", "rendezvous", "fanout")
MODELS = ("asyncio", "threading", "gevent", "trio", "greenlet")
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


class NoBrowser(RuntimeError):
    """No Chromium and chromedriver here; the message says how to install them."""


def chromium(width: int = 1280, height: int = 900):
    """A headless Chromium under Selenium, its console kept: Debian's browser and driver, never a
    downloaded one (``NoBrowser`` when they are missing)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise NoBrowser("selenium is not installed: pip install selenium") from None
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        raise NoBrowser(
            "no chromium or chromedriver on PATH: apt-get install -y chromium chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def branch(repo: Path, commits: int) -> list[str]:
    """A git repository at ``repo`` whose branch main has ``commits`` empty commits (git
    fast-import: seconds for thousands); their hashes, oldest first."""
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    stream = "".join(
        f"commit refs/heads/main\ncommitter ci <ci@localhost> {1767225600 + 3600 * i} +0000\n"
        f"data {len(str(i))}\n{i}\n"
        for i in range(commits)
    )
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=stream.encode(), check=True)
    done = subprocess.run(
        ["git", "rev-list", "--reverse", "main"], cwd=repo, capture_output=True, text=True
    )
    return done.stdout.split()


def synthetic(directory: Path, commits: list[str], benchmarks: int) -> None:
    """A run file for each of ``commits`` of ``benchmarks`` time benchmarks, written with
    runlog.write: every benchmark's verdict in every run, as a run judged against a baseline has."""
    per_size = len(MODELS) * len(WORKLOADS)
    cases = [
        (WORKLOADS[i // len(MODELS) % len(WORKLOADS)], i // per_size, MODELS[i % len(MODELS)])
        for i in range(benchmarks)
    ]
    for r, commit in enumerate(commits):
        recs, regressed = [], []
        for k, (workload, size, model) in enumerate(cases):
            step = 1 + 0.2 * ((r + 7 * k) // 250)  # 20% slower every 250 runs, staggered
            noise = 1 + 0.02 * (((r * 31 + k * 17) % 13) / 6 - 1)
            base = 1e-6 * (1 + k % 7) * step * noise
            samples = [base * (1 + 0.01 * (j % 5 - 2)) for j in range(9)]
            recs.append(
                Record(workload, {"n": 10 * (size + 1)}, model, samples, ops=10, unit="hop")
            )
            if r and (r + 7 * k) % 250 == 0:
                regressed.append(recs[-1].label)
        doc = runlog.run_document(
            recs,
            code=runlog.Code(commit, False, "main"),
            measure="time",
            date=START + dt.timedelta(hours=r),
            machine={"node": "synthetic"},
            libraries={},
        )
        doc["verdicts"] = [
            {
                "id": rec.label,
                "figure": "time",
                "status": "regressed" if rec.label in regressed else "unchanged",
                "change": 0.2 if rec.label in regressed else 0.0,
                "words": f"{rec.label}: {'+20.0%' if rec.label in regressed else '+0.0%'}, p=0.0001, "
                "threshold 10% (synthetic)",
            }
            for rec in recs
        ]
        runlog.write(directory, doc)


def write_site(folder: Path, site: Path, *extra: str) -> dict:
    """``history FOLDER --html SITE`` as the user runs it: its wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest_concurrency", "history", str(folder), "--html", str(site)]
        + list(extra),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def browser_cpu_s(driver) -> float:
    """CPU seconds (user + system) of every process of the browser so far: what drawing costs it,
    which a loaded machine does not inflate as it does wall time."""
    import psutil

    tree = psutil.Process(driver.service.process.pid).children(recursive=True)
    total = 0.0
    for proc in tree:
        try:
            times = proc.cpu_times()
        except psutil.Error:  # a process of the browser's that ended meanwhile
            continue
        total += times.user + times.system
    return total


def render_ms(driver, page: Path) -> dict:
    """Milliseconds from the navigation's start to the index's script's end and to the load
    event, and the CPU seconds the browser's processes spent on the load."""
    before = browser_cpu_s(driver)
    driver.get(page.as_uri())
    cpu = browser_cpu_s(driver) - before
    rendered = driver.execute_script("return window.renderedAt")
    loaded = driver.execute_script(
        "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd"
    )
    return {"rendered_ms": rendered, "loaded_ms": loaded, "browser_cpu_s": round(cpu, 3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--benchmarks", type=int, default=200)
    p.add_argument("--smoke", action="store_true", help="30 runs x 12 benchmarks")
    p.add_argument("--screenshots", metavar="DIR", help="save the index and a case page there")
    p.add_argument("--out", metavar="JSON", default=None, help=f"default: {OUT} (not --smoke)")
    p.add_argument("--no-browser", action="store_true", help="time the writing only")
    args = p.parse_args(argv)
    runs, benchmarks = (30, 12) if args.smoke else (args.runs, args.benchmarks)
    with tempfile.TemporaryDirectory() as tmp:
        folder, site, repo = Path(tmp) / "runs", Path(tmp) / "site", Path(tmp) / "repo"
        started = time.perf_counter()
        synthetic(folder, branch(repo, runs), benchmarks)
        made = time.perf_counter() - started
        result = {
            "runs": runs,
            "benchmarks": benchmarks,
            "run_files_mib": round(sum(f.stat().st_size for f in folder.iterdir()) / 2**20, 1),
            "synthetic_written_s": round(made, 1),
            "site": write_site(folder, site, "--repo", str(repo)),
            "site_mib": round(sum(f.stat().st_size for f in site.rglob("*.html")) / 2**20, 1),
            "index_kib": round((site / "index.html").stat().st_size / 1024),
            "load": os.getloadavg()[0],
            "python": sys.version.split()[0],
        }
        if not args.no_browser:
            driver = chromium()
            try:
                loads = [render_ms(driver, site / "index.html") for _ in range(5)]
                result["browser"] = driver.capabilities.get("browserVersion")
                for key in ("rendered_ms", "loaded_ms", "browser_cpu_s"):
                    result[f"index_{key}"] = statistics.median(x[key] for x in loads)
                    result[f"index_{key}_least"] = min(x[key] for x in loads)
                result["loads"] = loads
                if args.screenshots:
                    shots = Path(args.screenshots)
                    driver.get((site / "index.html").as_uri())
                    driver.save_screenshot(str(shots / "history-index.png"))
                    page = sorted((site / "c").iterdir())[0]
                    driver.get(page.as_uri())
                    driver.save_screenshot(str(shots / "history-case.png"))
            finally:
                driver.quit()
    print(json.dumps(result, indent=1))
    out = Path(args.out) if args.out else (None if args.smoke else OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"site of {runs} runs x {benchmarks} benchmarks written in {result['site']['wall_s']} s"
        + (
            f", index rendered in {result['index_rendered_ms']:.0f} ms "
            f"({result['index_browser_cpu_s']:.2f} CPU s of the browser)"
            if "index_rendered_ms" in result
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
