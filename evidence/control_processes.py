"""How many processes a side the time gate would need to catch a small change here (issue 52).

Reads a ``control_evidence.py`` run (its JSON lines: each session's verdicts, the change of each
benchmark over its controls against one baseline) and, for each benchmark judged over its
controls, takes from the unchanged sessions how far one process reads from another (a robust
standard deviation of log(1 + change): 1.4826 x the median absolute deviation) and from the
changed sessions how far the change moved the median. With both sides the mean of ``k``
processes, a one-sided test at ``--alpha`` that catches the change with ``--power`` needs

    k = 2 * ((z(1 - alpha) + z(power)) * sd / shift) ** 2

processes a side. The baseline's own offset (a side of few processes lands off the code's
centre) is part of why: with ``k`` on the current side alone it would stay.

The same question tried on the sessions themselves: ``--draws`` times, ``k`` unchanged sessions
drawn as the baseline and ``k`` others (unchanged, or slowed) as the current side, judged by
Welch's one-sided test on their log changes at ``--alpha`` and a mean change beyond
``--threshold``: how often an A/A fails and how often the slowdown is caught.

    python3 evidence/control_processes.py evidence/control/results-second-process.jsonl
    python3 evidence/control_processes.py --smoke   # the recorded quiet run, 20 draws (seconds)
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import statistics
from pathlib import Path

RECORDED = Path(__file__).parent / "control" / "results-second-process.jsonl"


def spread(changes: list[float]) -> float:
    logs = [math.log1p(c) for c in changes]
    centre = statistics.median(logs)
    return 1.4826 * statistics.median(abs(x - centre) for x in logs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="?", default=RECORDED)
    parser.add_argument("--smoke", action="store_true", help="the recorded quiet run, 20 draws")
    parser.add_argument("--unchanged", default="1.0@0", help="the A/A condition's name")
    parser.add_argument("--changed", default="1.05@0", help="the slowed condition's name")
    parser.add_argument("--alpha", type=float, default=0.01, help="false alarms a comparison")
    parser.add_argument("--power", type=float, default=0.9, help="changes caught")
    parser.add_argument("--threshold", type=float, default=0.03, help="the least change failed")
    parser.add_argument("--draws", type=int, default=2000, help="resamplings for each k")
    args = parser.parse_args()
    if args.smoke:
        args.draws = 20
    changes: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in args.results.read_text().splitlines():
        row = json.loads(line)
        for bench, verdict in row["control"].items():
            if verdict["by"] == "control":  # judged over its controls (threading is judged raw)
                changes[row["condition"]][bench].append(verdict["change"])
    z = statistics.NormalDist().inv_cdf
    need = z(1 - args.alpha) + z(args.power)
    print(
        "| benchmark | sessions | A/A median | sd a process | shift measured | processes a side |"
    )
    print("|---|---|---|---|---|---|")
    for bench, same in sorted(changes[args.unchanged].items()):
        moved = changes[args.changed].get(bench)
        if not moved:
            continue
        sd = spread(same)
        shift = math.log1p(statistics.median(moved)) - math.log1p(statistics.median(same))
        k = 2 * (need * sd / shift) ** 2 if shift > 0 else math.inf
        print(
            f"| {bench} | {len(same)} + {len(moved)} | {statistics.median(same):+.1%} | "
            f"{sd:.1%} | {shift:+.1%} | {math.ceil(k) if k < math.inf else 'never'} |"
        )
    print(f"\n| benchmark | k a side | A/A failed | slowdown caught |  (of {args.draws} draws)")
    print("|---|---|---|---|")
    for bench, same in sorted(changes[args.unchanged].items()):
        moved = changes[args.changed].get(bench)
        for k in (2, 5, 10, 15) if moved else ():
            failed, caught = drawn(same, moved, k, args)
            print(f"| {bench} | {k} | {failed:.1%} | {caught:.1%} |")


def drawn(same: list[float], moved: list[float], k: int, args) -> tuple[float, float]:
    """How often ``k`` processes a side fail an A/A, and catch the slowdown."""
    from scipy import stats

    rng = random.Random(52)
    same_logs, moved_logs = [math.log1p(c) for c in same], [math.log1p(c) for c in moved]

    def fails(base: list[float], now: list[float]) -> bool:
        beyond = statistics.fmean(now) - statistics.fmean(base) > math.log1p(args.threshold)
        test = stats.ttest_ind(now, base, equal_var=False, alternative="greater")
        return beyond and test.pvalue < args.alpha

    failed = caught = 0
    for _ in range(args.draws):
        drawn_ = rng.sample(same_logs, 2 * k)
        failed += fails(drawn_[:k], drawn_[k:])
        caught += fails(drawn_[:k], rng.sample(moved_logs, k))
    return failed / args.draws, caught / args.draws


if __name__ == "__main__":
    main()
