"""Every exit status the package's processes end with, or read from the processes it starts.

A leaf: it imports nothing of the package, so that every layer may name a status.
"""

import enum


class Exit(enum.IntEnum):
    __str__ = int.__repr__  # a status printed reads as its number, on 3.10 too

    # pytest's own (pytest.ExitCode), which a session of ours exits with as pytest does
    OK = 0  # tests passed and the gate passed; a tool did what it was asked
    TESTS_FAILED = 1  # a test failed, or the gate found a regression, a leak or an error
    INTERRUPTED = 2  # Ctrl-C, or a side's crash that the head's session named
    INTERNAL_ERROR = 3  # pytest's internal error
    USAGE_ERROR = 4  # a bad command line or option of a pytest session (ours included)
    NO_TESTS_COLLECTED = 5  # pytest collected nothing
    # (6, once a too noisy baseline's, is retired; pytest 9.2 exits 6 for --max-warnings)
    RERECORD_BASELINE = 7  # the baseline's counts came from another measuring side: record it again
    NOTHING_JUDGED = 8  # a gate was asked for (baseline, save, against) and judged nothing
    #: --concurrency-undecided=exit: what neither time nor counts decided (gate/undecided.py)
    UNDECIDED = 9
    # python -m pytest_concurrency (report, merge, bisect)
    TOOL_USAGE = 2  # (the value of INTERRUPTED, as argparse exits) a bad command line or input file
    MERGE_MISMATCH = 10  # shards from another version, Python, architecture (or machine, for time)
    MERGE_COVERAGE = 11  # shards overlapping, missing or of different splits
    NOTHING_CROSSED = 12  # bisect: the bad end is not regressed against the good end
    END_BROKEN = 13  # bisect: an end does not build, install or collect


#: pytest ended before the session's tests gave anything to read (interrupted, its own or a usage
#: error, nothing collected)
NOT_RUN = (Exit.INTERRUPTED, Exit.INTERNAL_ERROR, Exit.USAGE_ERROR, Exit.NO_TESTS_COLLECTED)

#: What a run of ours ends with once its tests ran: pytest's quiet statuses, and the gate's own
JUDGED = (
    Exit.OK,
    Exit.NO_TESTS_COLLECTED,
    Exit.TESTS_FAILED,
    Exit.RERECORD_BASELINE,
    Exit.NOTHING_JUDGED,
    Exit.UNDECIDED,
)


def gates_failed(gate, memory) -> bool:
    """Whether a judgement fails its run: a gate's regression (``gate.failed``) or a leak
    (``memory.failed``); either may be None, not judged."""
    return bool(gate is not None and gate.failed) or bool(memory is not None and memory.failed)


def of_run(
    given: int,
    *,
    failed: bool = False,
    nothing_judged: bool = False,
    rerecord: bool = False,
    undecided: bool = False,
) -> int:
    """The one rule of what a run exits with. ``given``: pytest's status (a session's), or the
    status of the run whose verdicts these are (a shard, the head's session), itself of this rule;
    the rest, what the gate found. A status of pytest's that says why the tests gave nothing to
    read (interrupted, an internal or usage error) stands; then a failure wins (1), then a gate
    that judged nothing (8), a baseline of another measuring side (7), what neither time nor
    counts decided with --concurrency-undecided=exit (9), else ``given`` (0, or 5: nothing
    collected)."""
    if given not in JUDGED:
        return given
    for found, status in (
        (failed, Exit.TESTS_FAILED),
        (nothing_judged, Exit.NOTHING_JUDGED),
        (rerecord, Exit.RERECORD_BASELINE),
        (undecided, Exit.UNDECIDED),
    ):
        if found or given == status:
            return status
    return given
