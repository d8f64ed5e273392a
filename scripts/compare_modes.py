"""In-process vs isolated runs of the same suite: per-benchmark median ratio and relative spread.

pytest benchmarks --benchmark-only --benchmark-json=inproc.json
pytest benchmarks --benchmark-only --concurrency-isolate --benchmark-json=isolated.json
python scripts/compare_modes.py inproc.json isolated.json
"""

from __future__ import annotations

import json
import statistics
import sys


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return {
        (
            b["extra_info"]["workload"],
            json.dumps(b["extra_info"]["params"], sort_keys=True),
            b["extra_info"]["backend"],
        ): b["stats"]
        for b in doc["benchmarks"]
    }


def spread(stats: dict) -> float:
    return stats["iqr"] / stats["median"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    local, isolated = load(argv[0]), load(argv[1])
    keys = sorted(local.keys() & isolated.keys())
    ratio = {k: isolated[k]["median"] / local[k]["median"] for k in keys}
    med = statistics.median
    print(f"benchmarks compared: {len(keys)}")
    print(
        f"isolated/in-process median ratio: median {med(ratio.values()):.3f}, "
        f"min {min(ratio.values()):.3f}, max {max(ratio.values()):.3f}"
    )
    print(
        f"relative spread (IQR/median), median over benchmarks: in-process "
        f"{med(spread(local[k]) for k in keys):.3f}, isolated {med(spread(isolated[k]) for k in keys):.3f}"
    )
    for backend in sorted({k[2] for k in keys}):
        mine = [k for k in keys if k[2] == backend]
        print(
            f"  {backend:28} ratio {med(ratio[k] for k in mine):.3f}   spread in-process "
            f"{med(spread(local[k]) for k in mine):.3f}, isolated {med(spread(isolated[k]) for k in mine):.3f}"
        )
    for k in sorted(keys, key=lambda k: abs(ratio[k] - 1), reverse=True)[:5]:
        print(
            f"  farthest: {k[0]} {k[1]} on {k[2]}: ratio {ratio[k]:.3f}, "
            f"spread {spread(local[k]):.3f} -> {spread(isolated[k]):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
