"""Check what a native program reports for a round, as the Python workloads check themselves.

The programs only count (received, checksums, ids, who answered what); the verdict is taken
here, with each workload's own ``check`` where the shapes match, and with figures recomputed
here where they do not (ring's order-weighted sum, spawn's id sums). A wrong result raises
``WorkloadError`` naming the workload, its parameters and what was wrong.
"""

from ..workloads import Outcome, WorkloadError


def verify(workload, params: dict, result: dict) -> Outcome:
    try:
        return _CHECKS[workload.name](workload, params, result)
    except (
        KeyError,
        TypeError,
        ValueError,
    ) as exc:  # a report of the wrong shape is a wrong result too
        raise workload.fail(
            params,
            f"the native program's report is malformed ({type(exc).__name__}: "
            f"{exc}): {result!r:.200}",
        ) from None


def _ring(workload, params, result) -> Outcome:
    m, received, bad = params["m"], result["received"], result["bad"]
    error = f"message #{bad[0]} was {bad[1]}, expected {m - 1 - bad[0]}" if bad else None
    outcome = workload.check(params, (received, error))
    want = sum((k + 1) * (m - 1 - k) for k in range(m))  # message k carries m-1-k
    if result["weighted"] != want:
        raise workload.fail(
            params,
            f"the order-weighted sum of the messages is {result['weighted']}, expected {want}",
        )
    return outcome


def _chain(workload, params, result) -> Outcome:
    tallies = []
    for received, checksum, bad_index, bad_seq in result["receivers"]:
        error = f"event #{bad_index} had sequence number {bad_seq}" if bad_index >= 0 else None
        tallies.append((received, checksum, error))
    if len(tallies) != params["workers"]:
        raise workload.fail(
            params, f"{len(tallies)} receivers reported, expected {params['workers']}"
        )
    return workload.check(params, tallies)


def _switch(workload, params, result) -> Outcome:
    bad = result["bad"]
    return workload.check(params, (tuple(bad) if bad else None, result["answered"]))


def _spawn(workload, params, result) -> Outcome:
    count = params["count"]
    want_sum = count * (count - 1) // 2
    if result["seen"] != count or result["seen_sum"] != want_sum:
        raise workload.fail(
            params,
            f"{result['seen']} distinct tasks of {count} reported alive "
            f"(their ids sum to {result['seen_sum']}, expected {want_sum})",
        )
    if result["returned"] != count or result["wrong"]:
        raise workload.fail(
            params,
            f"{result['wrong']} task(s) returned another id, first "
            f"{result['first_wrong']} (task, returned)",
        )
    return Outcome(ops=count)


def _io(workload, params, result) -> Outcome:
    return workload.check(params, [(job, ns / 1e9) for job, ns in result["replies"]])


_CHECKS = {"ring": _ring, "chain": _chain, "switch": _switch, "spawn": _spawn, "io": _io}
SEEDS = tuple(_CHECKS)  # the workloads the native programs implement

__all__ = ["verify", "WorkloadError"]
