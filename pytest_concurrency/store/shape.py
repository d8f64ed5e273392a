"""What the gate and the reports read from a baseline or a report file, and the type each value
must have: checked here, once, when the file is read, so that no reader further on meets a
string where it counts, an unhashable name or a sample no measurement has.

A damaged or hand-edited file (or one a pull request planted) must end in one line naming the
value and the fix, never in a traceback deep in the gate, and never be judged as if it were
sound. ``document(doc)`` checks the whole document (``baseline.check`` uses it);
``BENCHMARK(entry)`` one entry of ``benchmarks`` (the report command uses it on files that are
plain pytest-benchmark JSON too). Each returns what is wrong, or None.

Limits (each far beyond what a session writes, each a bound on the time a file can cost):
``MAX_DEPTH`` levels of nesting (a baseline has 7), ``MAX_TEXT`` characters in one string,
``MAX_SAMPLES`` samples in one benchmark's session (pytest-benchmark takes at most ~200,000
rounds of a function that does nothing in its default second).
"""

import math
from collections.abc import Callable, Iterable
from typing import Any

from .. import measure
from ..measure import kernel

MAX_DEPTH = 32
MAX_TEXT = 100_000
MAX_SAMPLES = 1_000_000

_Check = Callable[[Any], "str | None"]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(type(value), "?")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# A check returns None, or where and what is wrong relative to the value it was given: " is a
# string, not a number" about the value itself, ".ops is ..." or "[3] is ..." about a part of it.


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else f" is {_kind(value)}, not a string"


def number(value: Any) -> str | None:
    return None if _number(value) else f" is {_kind(value)}, not a number"


def optional(check: _Check) -> _Check:
    return lambda value: None if value is None else check(value)


def positive(value: Any) -> str | None:
    return (
        None if _number(value) and value >= 1 else f" is {_kind(value)}, not a count of 1 or more"
    )


def samples(value: Any) -> str | None:
    """Rounds of one session: a list of non-negative numbers (seconds or counts)."""
    if not isinstance(value, list):
        return f" is {_kind(value)}, not a list of samples"
    if len(value) > MAX_SAMPLES:
        return f" holds {len(value):,} samples, more than any session takes ({MAX_SAMPLES:,})"
    for i, x in enumerate(value):
        if not (_number(x) and x >= 0):
            return f"[{i}] is {_kind(x)}, where only non-negative numbers belong"
    if value and not any(value):  # no round takes no time, nor counts no instruction
        return (
            f" holds only zeros ({len(value):,} samples): nothing was measured, and no change can "
            "be judged against it"
        )
    return None


def controls(value: Any) -> str | None:
    """Each round's factor from its controls (measure/control.py): positive numbers."""
    if not isinstance(value, list):
        return f" is {_kind(value)}, not a list of control factors"
    if len(value) > MAX_SAMPLES:
        return (
            f" holds {len(value):,} control factors, more than any session takes ({MAX_SAMPLES:,})"
        )
    for i, x in enumerate(value):
        if not (_number(x) and x > 0):
            return f"[{i}] is {_kind(x)}, where only a control factor (above 0) belongs"
    return None


def above_zero(value: Any) -> str | None:
    return None if _number(value) and value > 0 else f" is {_kind(value)}, not a number above 0"


def layouts(value: Any) -> str | None:
    """Rounds in other layouts: a list of non-empty lists of samples."""
    if not isinstance(value, list):
        return f" is {_kind(value)}, not a list of rounds"
    for i, rounds in enumerate(value):
        if not isinstance(rounds, list) or not rounds:
            return f"[{i}] is {_kind(rounds)}, not a non-empty list of rounds"
        wrong = samples(rounds)
        if wrong:
            return f"[{i}]{wrong}"
    return None


def mapping(of: _Check) -> _Check:
    """An object whose values each pass ``of``."""
    return lambda value: _each(value, dict, of)


def listing(of: _Check) -> _Check:
    return lambda value: _each(value, list, of)


def _each(value: Any, kind: type, of: _Check) -> str | None:
    if not isinstance(value, kind):
        return f" is {_kind(value)}, not {'an object' if kind is dict else 'a list'}"
    parts: Any = value  # a dict or a list, as checked
    for key, item in parts.items() if kind is dict else enumerate(parts):
        wrong = of(item)
        if wrong:
            return f"[{key!r}]{wrong}"
    return None


def scalar(value: Any) -> str | None:
    if value is None or isinstance(value, (str, bool)) or _number(value):
        return None
    return f" is {_kind(value)}, not a single value"


def measure_kind(value: Any) -> str | None:
    if value in measure.names():
        return None
    return f" is {value!r}, not a measure this version knows ({', '.join(measure.names())})"


def fields(spec: dict[str, _Check], required: tuple[str, ...] = ()) -> _Check:
    """An object whose keys in ``spec`` pass their check (absent is fine unless ``required``)."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f" is {_kind(value)}, not an object"
        for key in required:
            if key not in value:
                return f" lacks {key!r}"
        for key, of in spec.items():
            if key in value:
                wrong = of(value[key])
                if wrong:
                    return f".{key}{wrong}"
        return None

    return check


_NUMBERS = (
    "ns_per_op ops_per_s instructions_per_op cpu_user_s cpu_sys_s ctx_voluntary ctx_involuntary "
    "peak_rss_kib foreign_cpu kib_per_task rss_kib_per_task heap_kib_per_task "
    "retained_b_per_task_round c_heap_b_per_task_round threads_per_round greenlets_per_round "
    "rss_kib_per_round peak_traced_kib memory_rounds tasks_per_round leak_tasks_per_round "
    "ideal_s overhead_s threshold "
    "worker_wall_s concurrency_schema control_s control_busy control_version control_waits control_cost"
).split() + [f"{figure}_per_op" for figure in kernel.FIGURES]

#: ``extra_info``: what records.py documents, each key the type its readers expect.
EXTRA = fields(
    {
        "workload": text,
        "backend": text,
        "backend_version": optional(text),
        "params": mapping(scalar),
        "ops": optional(positive),
        "unit": optional(text),
        "measure": optional(measure_kind),
        "task_kind": optional(text),
        "kernel_note": optional(text),
        "workload_ref": optional(text),
        "disturbed": optional(scalar),
        "layouts": layouts,
        "kernel_rounds": optional(mapping(optional(listing(number)))),
        "kernel_round_ops": optional(positive),
        "kernel_source": optional(lambda v: scalar(v) and mapping(scalar)(v)),
        "memory_not_measured": optional(mapping(scalar)),
        "leak_params": optional(mapping(scalar)),
        "paired_rounds": optional(listing(listing(optional(number)))),
        "control_factor": optional(controls),
        **{key: optional(number) for key in _NUMBERS},
    }
)

#: pytest-benchmark's summary of the rounds: the gate computes its own from ``data``, but its
#: tools (and a reader of the file) take these as they are
_SUMMARY = (
    "min max mean stddev rounds median iqr q1 q3 iqr_outliers stddev_outliers ld15iqr hd15iqr "
    "ops total iterations"
).split()
_STATS = fields(
    {
        "data": optional(samples),
        "outliers": optional(text),
        **{key: optional(number) for key in _SUMMARY},
    }
)

#: One entry of ``benchmarks``.
BENCHMARK = fields(
    {
        "name": text,
        "fullname": optional(text),
        "group": optional(text),
        "stats": optional(_STATS),
        "extra_info": optional(EXTRA),
    }
)


#: Shards a suite can be cut into: far more than any CI matrix runs at once (shards.py).
MAX_SHARDS = 1000


def shard(value: Any) -> str | None:
    """A shard's section (shards.section): its index of its count, and the benchmark tests each
    shard holds, one count a shard."""
    wrong = fields(
        {"index": positive, "count": positive, "holds": listing(number)},
        ("index", "count", "holds"),
    )(value)
    if wrong:
        return wrong
    index, count, holds = value["index"], value["count"], value["holds"]
    if not (index == int(index) and count == int(count) and index <= count <= MAX_SHARDS):
        return (
            f" says shard {index:g} of {count:g}, which no split has (1 to {MAX_SHARDS:,} shards)"
        )
    if len(holds) != count:
        return f".holds has {len(holds)} count{'s' * (len(holds) != 1)} for {count:g} shards"
    return None


_VERSIONS = optional(mapping(optional(text)))
_CALIBRATION = optional(
    fields({"version": optional(scalar), "ns_per_iteration": above_zero}, ("ns_per_iteration",))
)
_CODE = optional(fields({"commit": optional(text), "dirty": optional(scalar)}))

_SESSION_BENCHMARK = fields(
    {
        "workload": text,
        "params": mapping(scalar),
        "backend": text,
        "backend_version": optional(text),
        "samples": lambda v: samples(v) or (None if v else " is empty: a session without rounds"),
        "foreign_cpu": optional(number),
        "disturbed": optional(scalar),
        "layouts": layouts,
        "memory": optional(mapping(optional(number))),
        "kernel": optional(mapping(optional(number))),
        "control_factor": optional(controls),
        **{
            key: optional(number)
            for key in ("control_s", "control_busy", "control_version", "control_waits")
        },
    },
    ("workload", "params", "backend", "samples"),
)

_SESSION = fields(
    {
        "datetime": optional(text),
        "commit": optional(text),
        "calibration": _CALIBRATION,
        "code": _CODE,
        "libraries": _VERSIONS,
        "benchmarks": listing(_SESSION_BENCHMARK),
    },
    ("benchmarks",),
)

#: The ``pytest_concurrency`` section (its schema version and Python are checked before).
SECTION = fields(
    {
        "python": fields({k: text for k in ("version", "implementation", "minor")}),
        "backends": _VERSIONS,
        "libraries": _VERSIONS,
        "under_test": _VERSIONS,
        "code": _CODE,
        "cpu_count": optional(positive),
        "cpu_model": optional(text),
        "measure": optional(measure_kind),
        "calibration": _CALIBRATION,
        "valgrind": optional(scalar),
        "hash_seed": optional(scalar),
        "directory": optional(text),
        "measuring": optional(mapping(scalar)),
        "history": optional(listing(_SESSION)),
        "shard": optional(shard),
    }
)

_TOP = fields(
    {
        "datetime": optional(text),
        "version": optional(text),
        "machine_info": optional(lambda v: fields({})(v)),
        "commit_info": optional(lambda v: fields({})(v)),
    }
)


class NoNumber:
    """What the JSON reader gives for a number no measurement has (NaN, Infinity, an integer of
    thousands of digits), in its place: ``bounds`` then refuses it naming where it is."""

    def __init__(self, what: str):
        self.what = what


def bounds(doc: Any) -> str | None:
    """Nesting, sizes and numbers beyond what any baseline holds, found before anything else
    walks the document, each named with the JSON path where it is: walked without recursion (a
    document nested as deep as the JSON parser allows cannot exhaust the stack here), a list too
    long refused before its items are looked at, and a number JSON can write but no float holds
    (1e400 reads as infinity)."""
    # each container's place is (its parent's place, its key): a path is only spelled out for
    # the one value refused, not for each of millions of samples
    stack: list[tuple[Any, int, tuple | None]] = [(doc, 1, None)]
    while stack:
        value, depth, place = stack.pop()
        if depth > MAX_DEPTH:
            return (
                f"is nested more than {MAX_DEPTH} levels deep (a baseline has 7), at {path(place)}"
            )
        if isinstance(value, dict):
            long_key = next((key for key in value if len(key) > MAX_TEXT), None)
            if long_key is not None:
                return f"has a key of {len(long_key):,} characters in {path(place)}"
            items: Iterable[tuple[Any, Any]] = value.items()
        elif isinstance(value, list):
            if len(value) > MAX_SAMPLES:
                return (
                    f"holds a list of {len(value):,} items, more than any session takes "
                    f"({MAX_SAMPLES:,}), at {path(place)}"
                )
            items = enumerate(value)
        else:  # the document is one value: only it is ever popped other than a container
            return _leaf(value)
        for key, item in items:  # containers walked later, values checked here (millions)
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, (place, key)))
            else:
                wrong = _leaf(item)
                if wrong:
                    return f"{wrong}, at {path((place, key))}"
    return None


def path(place: tuple | None) -> str:
    """``benchmarks[0].stats.data[3]`` from a place of ``bounds``."""
    keys = []
    while place is not None:
        place, key = place
        keys.append(key)
    out = ""
    for key in reversed(keys):
        if isinstance(key, int):
            out += f"[{key}]"
        elif key.isidentifier():
            out += f".{key}" if out else key
        else:
            out += f"[{key[:40] + ('...' if len(key) > 40 else '')!r}]"
    return out or "the top level"


def _leaf(value: Any) -> str | None:
    if isinstance(value, NoNumber):
        return f"holds {value.what}, which is no measurement"
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return f"holds a text of {len(value):,} characters"
    if isinstance(value, float) and not math.isfinite(value):
        return "holds a number beyond any float (such as 1e400, read as infinity), which is no measurement"
    return None


def benchmarks(doc: dict) -> str | None:
    """What is wrong with the first entry of ``benchmarks`` that is wrong, or None."""
    for i, entry in enumerate(doc.get("benchmarks") or ()):
        wrong = BENCHMARK(entry)
        if wrong:
            name = entry.get("name") if isinstance(entry, dict) else None
            where = f"benchmarks[{i}]" + (f" ({name!r})" if isinstance(name, str) else "")
            return where + wrong
    return None


def document(doc: dict) -> str | None:
    """What is wrong with a baseline document whose section is there, or None."""
    wrong = bounds(doc)
    if wrong:
        return f"it {wrong}"
    wrong = _TOP(doc)
    if wrong:
        return "the document" + wrong
    wrong = SECTION(doc["pytest_concurrency"])
    if wrong:
        return "pytest_concurrency" + wrong
    return benchmarks(doc) or plausible(doc)


def plausible(doc: dict) -> str | None:
    """The first sample (its rounds in every layout, every session) beyond what any round can
    measure (its instrument's ``most_per_round``: for time, a day), or None. Finite, of the right
    type, and no measurement: a baseline of 1e300 s rounds would read every run "improved -100%"."""
    section = doc["pytest_concurrency"]
    stored = section.get("measure")
    for i, b in enumerate(doc.get("benchmarks") or ()):
        extra = b.get("extra_info") or {}
        rounds = {".stats.data": (b.get("stats") or {}).get("data") or []}
        rounds.update(
            {f".extra_info.layouts[{k}]": r for k, r in enumerate(extra.get("layouts") or ())}
        )
        wrong = _beyond(rounds, extra.get("measure") or stored)
        if wrong:
            return f"benchmarks[{i}] ({b.get('name')!r}){wrong}"
    for j, entry in enumerate(section.get("history") or ()):
        for i, b in enumerate(entry["benchmarks"]):
            rounds = {".samples": b["samples"]}
            rounds.update({f".layouts[{k}]": r for k, r in enumerate(b.get("layouts") or ())})
            wrong = _beyond(rounds, stored)
            if wrong:
                return f"pytest_concurrency.history[{j}].benchmarks[{i}]{wrong}"
    return None


def _beyond(rounds: dict[str, list], kind: str | None) -> str | None:
    """Where in ``rounds`` (where -> samples) a sample is beyond what ``kind`` measures."""
    instrument = measure.instrument(kind)
    for where, samples in rounds.items():
        most = max(samples, default=0)
        if most > instrument.most_per_round:
            return (
                f"{where} holds a round of {most:g} {instrument.unit}, beyond any round measured "
                f"by {instrument.kind} (at most {instrument.most_per_round:g} {instrument.unit}): "
                "no measurement"
            )
    return None
