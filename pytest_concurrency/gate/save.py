"""The save step at a session's end: the session written to ``--concurrency-save-baseline`` in
front of the sessions already there, under the file's lock, as the file is now (another session
may have saved to it since this one started); or why it is not (``refusal``)."""

import sys
from collections.abc import Callable

from ..backends import watchdog
from ..measure.records import Record
from ..store import baseline, history
from . import compare
from .compare import GateSettings


def refusal(failed: list[str]) -> str | None:
    """Why a session whose benchmark tests failed saves no baseline: without their rounds it would
    drop their entries (or keep a session that measured something else)."""
    if not failed:
        return None
    named = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    return (
        f"{len(failed)} benchmark test{'s' * (len(failed) != 1)} failed ({named}), and a "
        "baseline without their rounds would lose them; the file is left as it was: fix them, or "
        "deselect them (-k, --deselect) to save the others"
    )


def store(
    path,
    doc: dict,
    recs: list[Record],
    settings: GateSettings,
    keep: int,
    wrote: Callable,
    say_where: bool = True,
) -> list[str]:
    """Write one session's document ``doc`` (its records ``recs``) to ``path``
    (``--concurrency-save-baseline``) in front of the sessions already there, ``keep`` at most;
    what the save did (messages; where it was written only if ``say_where``). ``wrote(line)`` is
    told once the file is written: a Ctrl-C after that says so. A ``BaselineError``: nothing
    written."""
    said: list[str] = []
    doc, recs = _judgeable(path, doc, recs, said)
    with baseline.locked(path, lambda: _waiting(path)):
        # the file as it is now, not as at start-up: another session may have saved to it since
        previous = baseline.load_previous(path)
        if previous is not None:
            reason = history.incompatible(previous, doc[history.SECTION])
            if reason:
                said.append(f"{path}: earlier sessions dropped: {reason}")
                previous = None
        doc, kept = compare.add_session(doc, previous, recs, settings, keep)
        said.extend(kept)
        with watchdog.ctrl_c_after():  # saved, and known to be, or neither
            baseline.save(path, doc)
            wrote(f"the baseline was saved to {path}")
    if say_where:
        said.append(
            f"baseline with {len(recs)} benchmarks written to {path} "
            f"({history.count(doc)} session(s), at most {keep} kept)"
        )
    return said


def _judgeable(path, doc: dict, recs: list[Record], said: list) -> tuple[dict, list]:
    """``doc`` and ``recs`` without the benchmarks that measured 0 in every round (a test that
    counts nothing): a baseline holding one is refused when read, as no change can be judged
    against it, and the next session could then neither judge nor save."""
    nothing = [r.label for r in recs if r.samples and not any(r.samples)]
    if not nothing:
        return doc, recs
    kept = [b for b in doc["benchmarks"] if any((b.get("stats") or {}).get("data") or [1])]
    if not kept:
        raise baseline.BaselineError(
            f"no baseline written to {path}: every benchmark measured 0 in every "
            "round, and no change can be judged against that"
        )
    named = ", ".join(nothing[:3]) + (f" and {len(nothing) - 3} more" if len(nothing) > 3 else "")
    said.append(
        f"{named} measured 0 in every round: left out of the baseline, as no change can be "
        "judged against it"
    )
    return {**doc, "benchmarks": kept}, [r for r in recs if any(r.samples) or not r.samples]


def _waiting(path) -> None:
    # said as it happens: a session that seems to hang at its end says why
    print(
        f"\npytest-concurrency: waiting for another session's save to {path} to end",
        file=sys.stderr,
        flush=True,
    )
