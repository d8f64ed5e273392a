"""The plugin's command-line options and ini keys, in one place (``settings`` reads them)."""

from __future__ import annotations

from . import backends, workloads
from .gate import memory as memory_gate
from .gate.history import DEFAULT_KEEP


def add(parser) -> None:
    """Every option and ini key of the plugin (``settings`` reads and checks them)."""
    group = parser.getgroup("concurrency", "concurrency models (pytest-concurrency-bench)")
    add = group.addoption
    add(
        "--concurrency-backends",
        metavar="LIST",
        help="comma-separated models to run, e.g. gevent,asyncio,multiprocessing[fork] "
        f"(default: {','.join(backends.DEFAULT_SPECS)})",
    )
    add(
        "--concurrency-scale",
        metavar="SCALE",
        help=f"workload sizes: {', '.join(workloads.SCALES)} (default: default)",
    )
    add(
        "--concurrency-measure",
        metavar="MEASURE",
        help="what a round's sample is: time (wall-clock seconds, the default) or instructions "
        "(CPU instructions counted under valgrind: exact, and blind to the machine's speed and load)",
    )
    add(
        "--concurrency-rounds",
        metavar="N",
        help="measured rounds per benchmark (default: the workload's per scale when timing, 3 when counting)",
    )
    add(
        "--concurrency-timeout",
        metavar="SECONDS",
        help="longest a round may take before it fails as stalled (default: 120; 1200 when counting)",
    )
    add(
        "--concurrency-jobs",
        metavar="N",
        help="with --concurrency-measure=instructions: cases counted at once, each in a process "
        "of its own (default: one per core)",
    )
    add(
        "--concurrency-layouts",
        metavar="N",
        help="with --concurrency-measure=instructions: count your own benchmark tests in N layouts (the "
        "interpreter's objects landing elsewhere; N-1 counted passes first) and judge the median (default: 3)",
    )
    add(
        "--concurrency-isolate",
        action="store_true",
        default=None,
        help="run each model's workloads in a fresh worker process of its own, and each of your own "
        "benchmark tests' call in a child forked for it (a crash, a hang or a leaked thread fails that test alone)",
    )
    add(
        "--concurrency-save-baseline",
        metavar="PATH",
        help="after the run, write a baseline with raw samples (atomically)",
    )
    add(
        "--concurrency-baseline-sessions",
        metavar="K",
        help="sessions a saved baseline keeps: saving to an existing baseline adds this run's session "
        f"and drops the oldest beyond K; 1 replaces it (default: {DEFAULT_KEEP})",
    )
    add(
        "--concurrency-baseline",
        metavar="PATH",
        help="compare against this baseline; a regression fails the session",
    )
    add(
        "--concurrency-threshold",
        metavar="PCT",
        help="practical threshold for a regression, percent (default: 7 for time, 2 for instructions, "
        "1 for your own tests counted in 3 layouts or more, and counts of workloads that wait, such as "
        "IO, judged beyond 10; against the base: 3, "
        "5 for threads and processes)",
    )
    add(
        "--concurrency-memory-threshold",
        metavar="PCT",
        help="how far a memory figure (per task, peak heap) may grow over the baseline's, percent "
        f"(default: {memory_gate.DEFAULT_THRESHOLD * 100:.0f}); a leak fails without a baseline too",
    )
    add(
        "--concurrency-memory",
        action="store_true",
        default=None,
        help="give users' own benchmark tests the memory pass too (the built-in workloads always have "
        "it): after its rounds, the test's function runs 6 more times and a leak in the Python heap, "
        "the C heap, threads or greenlets fails the session; one test: @pytest.mark.concurrency(memory=True)",
    )
    add(
        "--concurrency-machine-tolerance",
        metavar="PCT",
        help="judge times normalized by the machine-speed calibration only when this machine's speed "
        "differs from the baseline's by more than PCT (default: 10; a large value never normalizes)",
    )
    add(
        "--concurrency-allow-cross-python",
        action="store_true",
        default=False,
        help="compare against a baseline recorded on another Python version (normally refused)",
    )
    add(
        "--concurrency-gate-native",
        action="store_true",
        default=None,
        help="judge the native reference rows (go, rust, kotlin) in the gate like the Python models "
        "(by default they are shown and compared, never failing the build)",
    )
    add(
        "--concurrency-against",
        metavar="SPEC",
        help="also run every benchmark on a base version of the code, round for round in turns with "
        "this one, and judge the change on the paired ratios: git:REF of this repository, a path "
        "(project, wheel, sdist) or a pip requirement (mylib==1.4.2); installed apart with pip --target",
    )
    add(
        "--concurrency-report-md",
        metavar="PATH",
        help="write the comparison tables as markdown (CI job summary)",
    )
    add(
        "--concurrency-plot",
        metavar="DIR",
        help="write charts per workload into DIR (needs matplotlib)",
    )
    parser.addini("concurrency_backends", "comma-separated models to run", default="")
    parser.addini("concurrency_scale", "workload sizes: smoke, default or seed", default="")
    parser.addini(
        "concurrency_measure", "what a round's sample is: time or instructions", default=""
    )
    parser.addini("concurrency_timeout", "longest a round may take, seconds", default="")
    parser.addini(
        "concurrency_isolate", "run each model in a worker process", type="bool", default=False
    )
    parser.addini("concurrency_jobs", "cases counted at once (instructions only)", default="")
    parser.addini(
        "concurrency_layouts",
        "layouts your own tests are counted in (instructions only)",
        default="",
    )
    parser.addini("concurrency_threshold", "practical regression threshold, percent", default="")
    parser.addini(
        "concurrency_gate_native",
        "judge the native reference rows in the gate",
        type="bool",
        default=False,
    )
    parser.addini(
        "concurrency_memory_threshold", "memory regression threshold, percent", default=""
    )
    parser.addini(
        "concurrency_memory",
        "the memory pass for users' own benchmark tests too",
        type="bool",
        default=False,
    )
    parser.addini(
        "concurrency_machine_tolerance",
        "normalize only beyond this machine-speed difference, percent",
        default="",
    )
    parser.addini("concurrency_baseline_sessions", "sessions a saved baseline keeps", default="")
    parser.addini(
        "concurrency_thresholds",
        "overrides, one per line: KEY = PCT with KEY a backend, a workload or workload:backend",
        type="linelist",
        default=[],
    )
