"""Run a workload case's rounds with the session's instrument and attach the per-model figures.

In a test, pytest-benchmark runs the rounds (``pedantic``, ``iterations=1``, so its raw
samples are rounds) with the instrument's counter as its timer (see plugin.py). Isolated
workers and re-measured suspects run them here (``run_rounds``) with the same counter.

Around the rounds, an instrument whose figures move with the machine also gets CPU time,
context switches and other processes' load (``usage.Window``), per round, warm-up included
since it also ran.
"""

import contextlib
import functools
import inspect
import math
import statistics
import time
from collections.abc import Callable

from .. import benchmark_adapter as adapter
from .. import workloads
from ..backends import watchdog
from ..workloads import Outcome, WorkloadError
from . import PROFILE_HANDED_OVER, PROFILE_HERE, control, kernel, memory, stopping
from .plan import CasePlan
from .records import SCHEMA
from .usage import Window, peak_rss_kib


def identity(backend, workload, params: dict, instrument) -> dict:
    """The extra_info keys that say what was measured, and how (see records.py)."""
    return {
        "concurrency_schema": SCHEMA,
        "backend": backend.name,
        "backend_version": backend.version,
        "workload": workload.name,
        "params": dict(params),
        "unit": workload.unit,
        "task_kind": backend.task_kind,
        "measure": instrument.kind,
        "waits": workloads.waits(workload),
    }


class _Stretch:
    """The figures gathered around a stretch of rounds besides the samples themselves."""

    def __init__(self, backend, instrument, in_worker: bool = False):
        self._instrument = instrument
        self._profile = PROFILE_HANDED_OVER if in_worker else PROFILE_HERE
        self._window = Window(backend) if instrument.machine_bound else None

    def close(self, calls: int) -> dict:
        out = self._instrument.after_rounds(self._profile)
        if self._window is not None:
            used, machine = self._window.close()
            out.update(machine, **used.per(max(calls, 1)))
        if self._instrument.with_memory:
            out["peak_rss_kib"] = peak_rss_kib()
        return out


class _KernelRounds:
    """Each round's kernel figures (see kernel.py), read around the round's work. Not under
    valgrind (``enabled`` false): it runs threads one at a time and its own work would be in
    every figure. The one recorder for workload rounds, a plain test's ``run`` calls and the
    rounds a counted case runs apart."""

    def __init__(self, enabled: bool):
        self._counters = kernel.Counters() if enabled else None
        self.rounds: list[dict] = []

    @contextlib.contextmanager
    def round(self):
        if self._counters is None:
            yield
            return
        before = self.begin()
        try:
            yield
        finally:
            self.end(before)

    def begin(self) -> dict:
        """The reading a round (``end``) starts from: for rounds that span calls."""
        return self._counters.read() if self._counters is not None else {}

    def set_aside(self, before: dict, paused: dict) -> dict:
        """``before`` moved on by what happened since ``paused`` (``Counters.set_aside``)."""
        if self._counters is None:
            return before
        return self._counters.set_aside(before, paused, self._counters.read())

    def end(self, before: dict) -> None:
        if self._counters is not None:
            self.rounds.append(self._counters.between(before, self._counters.read()))

    def close(self, ops: int, skip: int = 0, rounds: list[dict] | None = None) -> dict:
        """The record's kernel keys for the rounds after the first ``skip`` (warm-ups), or for
        the given ``rounds`` of them."""
        if self._counters is None:
            return {}
        self.release()
        c = self._counters
        chosen = self.rounds[skip:] if rounds is None else rounds
        return kernel.per_op(chosen, ops, c.source, c.why_not)

    def release(self) -> None:
        """Close the counters (again is harmless)."""
        if self._counters is not None:
            self._counters.close()


class KernelPerRun:
    """Kernel figures for a user's plain test: its rounds are pytest-benchmark's, each one a call
    of ``backend.run``, so the figures are read around every call (one op per call). Other
    processes' load over the test (``foreign_cpu``) is read too, as around a workload case's
    rounds: on threads, a busier machine moves switches and syscalls, and the gates say so."""

    def __init__(self, backend):
        self._calls = _KernelRounds(enabled=True)
        self._window = Window(backend)  # from the fixture to the label: outside every round
        unwrapped = backend.run

        def run(main, *args):
            with self._calls.round():
                return unwrapped(main, *args)

        backend.run = run

    def figures(self, last: int) -> dict:
        """The record's kernel keys from the last ``last`` calls (the measured rounds)."""
        made = len(self._calls.rounds)
        if not last or not made:
            return {}
        return {**self._calls.close(1, skip=max(0, made - last)), **self._window.close()[1]}

    def close(self) -> None:
        self._calls.release()


class KernelPerRounds:
    """Kernel figures for a suite's own ``benchmark`` test (no ``concurrency_backend``), read
    around pytest-benchmark's rounds: the calls of its runner after it made the test's stats
    (calibration comes before; warm-up rounds, if any, are left out at the end).

    A round of a small function lasts microseconds, and a reading costs a few syscalls, so rounds
    are read in groups of equal size that last ``GROUP_S`` or more (sized on the shortest of the
    first ``SIZING`` rounds, left out of the groups: under load one round can take a neighbour's
    milliseconds; of pedantic's given rounds, on the first; and small enough to give ``GROUPS``
    of them over the rounds it expects); the record's
    ``kernel_round_ops`` says how many calls a group held, for the gates' floors per round.
    ``one_a_round``: every round its own group (the rounds of a side of --concurrency-against are
    paired with the other side's, figure by figure). A trailing group left short is not used."""

    GROUP_S = 0.002
    GROUPS = 10
    SIZING = 3

    def __init__(self, benchmark, one_a_round: bool):
        self._rounds = _KernelRounds(enabled=True)
        self._window = Window(None)
        self._size = 1 if one_a_round else 0  # 0: sized on the first round
        self._iterations = 1
        self._expected: int | None = None  # pedantic's rounds (else from the first round's time)
        self._calls = -1  # runner calls since the stats were made (-1: not made yet)
        self._starts: list[int] = []  # each closed group's first call
        self._open: tuple[int, dict, float] | None = None  # (first call, reading, time)
        self._closed = False
        self._sizing: list[float] = []  # the first rounds' wall seconds, which size the groups
        self._fixture = benchmark
        (make_runner, make_stats), pedantic = adapter.factories(benchmark), benchmark.pedantic

        def counting_pedantic(*args, **named):
            with contextlib.suppress(TypeError):  # a wrong call: pedantic says so
                given = inspect.signature(pedantic).bind_partial(*args, **named).arguments
                self._expected = given.get("rounds", 1)
            return pedantic(*args, **named)

        def making_stats(iterations):
            self._iterations, self._calls = iterations, 0
            return make_stats(iterations)

        def read_runner(function, args, kwargs):
            runner = make_runner(function, args, kwargs)

            def run(loops_range, *rest, **timer):
                if self._calls < 0 or self._closed:
                    return runner(loops_range, *rest, **timer)
                if not self._size and self._expected is None:
                    started = time.perf_counter()
                    try:
                        return runner(loops_range, *rest, **timer)
                    finally:
                        self._calls += 1
                        self._sizing.append(time.perf_counter() - started)
                        if len(self._sizing) == self.SIZING:
                            self._size = self._size_for(min(self._sizing))
                if self._open is None:
                    self._open = (self._calls, self._rounds.begin(), time.perf_counter())
                try:
                    return runner(loops_range, *rest, **timer)
                finally:
                    self._calls += 1
                    self._close_group()

            return run

        adapter.use_factories(benchmark, read_runner, making_stats)
        benchmark.pedantic = counting_pedantic

    def _close_group(self) -> None:
        assert self._open is not None  # opened by the call that ends
        first, before, started = self._open
        if not self._size:  # pedantic's rounds: on the first
            self._size = self._size_for(time.perf_counter() - started)
        if self._calls - first >= self._size:
            self._rounds.end(before)
            self._starts.append(first)
            self._open = None

    def _size_for(self, took: float) -> int:
        took = max(took, 1e-9)
        least, max_time = adapter.round_limits(self._fixture)
        expected = self._expected or max(least, math.ceil(max_time / took))
        return max(1, min(math.ceil(self.GROUP_S / took), expected // self.GROUPS))

    @contextlib.contextmanager
    def aside(self):
        """The plugin's own work between two rounds of an open group (the controls beside the
        rounds, control.py): left out of the group's figures."""
        if self._open is None or self._closed:
            yield
            return
        paused = self._rounds.begin()
        try:
            yield
        finally:
            first, before, started = self._open
            self._open = (first, self._rounds.set_aside(before, paused), started)

    def figures(self, last: int) -> dict:
        """The record's keys from the groups within the last ``last`` calls (the
        measured rounds)."""
        if self._closed or self._calls <= 0 or not last:
            return {}
        first = self._calls - last
        groups = [r for r, s in zip(self._rounds.rounds, self._starts) if s >= first]
        if not groups:
            return {}
        ops = self._size * self._iterations
        out = self._rounds.close(ops, rounds=groups)
        self._closed = True
        return {**out, "kernel_round_ops": ops, **self._window.close()[1]}

    def close(self) -> None:
        self._closed = True
        self._rounds.release()


def after_each_round(benchmark, then: Callable[[], object]) -> None:
    """Call ``then()`` after each call of pytest-benchmark's runner for this ``benchmark`` fixture
    (its calibration's, warm-up's and rounds'), outside its timer: a sign the test is alive."""
    make_runner = adapter.factories(benchmark)[0]

    def signalling(function, args, kwargs):
        runner = make_runner(function, args, kwargs)

        def run(*given, **named):
            try:
                return runner(*given, **named)
            finally:
                then()

        return run

    adapter.use_factories(benchmark, signalling)


class PlainCalls:
    """What a user's plain benchmark test measured: the function and its arguments, as the
    ``benchmark`` fixture was handed them, so the memory pass can call it again."""

    def __init__(self, benchmark):
        self.last = None
        make_runner = adapter.factories(benchmark)[0]

        def remembering(function, args, kwargs):
            self.last = (function, args, kwargs or {})
            return make_runner(function, args, kwargs)

        adapter.use_factories(benchmark, remembering)

    def memory_figures(self) -> dict:
        """The memory pass (memory.py) on the measured call, per round; ``{}`` if none ran."""
        if self.last is None:
            return {}
        function, args, kwargs = self.last
        try:
            return memory.leak_pass(lambda: function(*args, **kwargs), contextlib.nullcontext)
        except Exception as exc:  # the test passed; a call again that fails is not its result
            return {
                "memory_not_measured": {
                    "all": f"calling it again for the memory pass raised {exc!r}"
                }
            }


def counter_precision(fixture_class, timer, fresh=None) -> float:
    """pytest-benchmark's precision of ``timer`` (the smallest positive difference of two readings
    in a row), for an exact counter: found as it does, without its one-second limit. Each reading
    of a counted process is a callgrind dump; on a loaded machine ten pairs of them took more than
    a second, it gave up with None, and every test of that layout pass failed in its calibration
    (``TypeError`` on ``None * int``). Cached where it caches its own (a class attribute).
    ``fresh``: each pair is read with a new timer from it (``Instrument.round_timer``), as a
    round is."""
    known = adapter.precisions(fixture_class)
    if timer not in known:
        pairs = (timer_pair(fresh() if fresh else timer) for _ in range(PRECISION_PAIRS))
        steps = [b - a for a, b in pairs]
        known[timer] = min((step for step in steps if step > 0), default=1.0)
    return known[timer]


PRECISION_PAIRS = 3  # counts are exact: the same difference every time, a few pairs suffice
#: At most this share of a counted round is the reading's own instructions (``WarmUntilStable``),
#: which are taken off its count (``_calls_alone``). Rounds of many calls keep what varies from
#: call to call small: at pytest-benchmark's 10%, zeroconf's send (22 k instructions a call, a
#: reading 2.5 k) got two calls a round, which disagreed by 20%, and its +10.5% went undecided.
READING_SHARE = 0.01
MAX_LOOPS = 10_000  # reached only by a function of a few dozen instructions, the loop's own
#: Two warm-up counts of a call that dwarfs a reading, this close, are its rounds
#: (``WarmUntilStable``): the warm-up's own agreement (callgrind.Callgrind.WARM). multidict's
#: pure-Python insert (570 M instructions a call) read its two 0.09% apart, its rounds 0.01%.
REPLAYED_WITHIN = 0.002
#: A call of this many instructions runs uninstrumented outside its readings: instrumented it
#: costs about 1.7 s of CPU here (multidict's 546 M, 9 s), a switch of instrumentation a fraction
#: of a second (callgrind.Counter.pause)
HEAVY = 100_000_000


def _agree(last: list[float]) -> bool:
    """Whether the warm-up's last two counts agree within ``REPLAYED_WITHIN``."""
    return len(last) == 2 and abs(last[0] - last[1]) <= REPLAYED_WITHIN * last[1]


def timer_pair(timer) -> tuple[float, float]:
    first = timer()
    return first, timer()


class WarmUntilStable:
    """A user's plain test under an exact instrument warms up as workload cases do (``run_rounds``):
    before pytest-benchmark's first call of the test's function, the function is called once
    unread (a cold call whose count was never kept; a reading costs about 35 ms under valgrind),
    then until two calls in a row count alike (``Instrument.warmed``), and those counts are
    dropped. Every call starts with ``Instrument.before_round``. Without it the first measured
    round was a cold outlier (+0.3 to +0.8%), as wide as the change a count is meant to catch.

    A ``pedantic`` test's ``setup`` and ``teardown`` run around each warm-up call as around its
    own rounds, so that a setup that hands out single-use arguments still gets them fresh.

    A call without ``pedantic`` is calibrated from the warm-up's last count rather than by
    pytest-benchmark's calls, ten times more loops each (``_calibrate``), and gets the instrument's
    rounds (three for counts, which agree to <0.2%) rather than its five or more: under valgrind
    each round's readings take a tenth of a second or more, and these were half a test's readings.

    A call that dwarfs a reading (one call a round) is read in the warm-up exactly as in a round,
    so its last two warm-up counts, where they agree within ``REPLAYED_WITHIN``, are its two rounds
    (``_replay``) and it is called no more: multidict's pure-Python insert counted 546 M
    instructions a call, and its six counted calls a layout (one unread, two warm-up, three
    rounds) were most of a counted session's cost. One of ``HEAVY`` instructions or more is then
    left uninstrumented until the next reading (``Instrument.pause``): pytest-benchmark's call of
    it for its result and the next test's unread call run 3-4x faster, for a switch of
    instrumentation that costs less than either.
    """

    def __init__(self, benchmark, instrument):
        self.counts: list[float] = []  # the warm-up calls' counts
        self._replay: list[float] = []  # warm-up counts that are its rounds (``_calibrate``)
        self._benchmark = benchmark
        self._instrument = instrument
        self._around = (None, None)  # pedantic's setup and teardown
        make_runner = adapter.factories(benchmark)[0]
        pedantic = benchmark.pedantic

        def remembering_pedantic(*args, **kwargs):  # pedantic's own, read by its signature
            try:
                given = inspect.signature(pedantic).bind(*args, **kwargs).arguments
            except TypeError:  # pedantic says what is wrong with them
                given = {}
            self._around = (given.get("setup"), given.get("teardown"))
            return pedantic(*args, **kwargs)

        def warming(function, args, kwargs):
            runner = make_runner(function, args, kwargs)

            def warm_up(loops_range):
                self._warm_up(
                    lambda a, k: make_runner(function, a, k)(
                        loops_range, timer=instrument.round_timer()
                    ),
                    lambda a, k: function(*a, **k),
                    args,
                    kwargs,
                )

            def run(loops_range, **_):  # each call is a round, read by a timer of its own
                if self._replay:
                    return self._replay.pop(0)
                if not self.counts:
                    warm_up(loops_range)
                instrument.before_round()
                took = runner(loops_range, timer=instrument.round_timer())
                if isinstance(took, tuple):  # (count, result): its one call, no loops
                    return self._calls_alone(took[0]), took[1]
                return self._calls_alone(took)

            run.warm_up = warm_up  # type: ignore[attr-defined]  # for ``_calibrate``
            return run

        benchmark.pedantic = remembering_pedantic
        adapter.use_factories(benchmark, warming)
        adapter.calibrate_with(
            benchmark,
            self._calibrate,
            functools.partial(counter_precision, type(benchmark), fresh=instrument.round_timer),
            instrument.rounds(adapter.round_limits(benchmark)[0], 0)[0],
        )

    def _calibrate(self, runner) -> tuple[float, int, range]:
        """(one round's count, calls a round, their range), as pytest-benchmark's calibration
        returns them: enough calls a round that the reading's own instructions (the counter's
        precision) are at most ``READING_SHARE`` of it; each round's count has them taken off
        (``_calls_alone``), so that they dilute no change."""
        precision = adapter.precision(self._benchmark)
        if not self.counts:
            runner.warm_up(range(1))  # one call at a time, as pytest-benchmark calibrates first
        call = max(self.counts[-1] - precision, 1.0)  # the function's own instructions
        loops = min(max(1, math.ceil(precision / (READING_SHARE * call))), MAX_LOOPS)
        last = self.counts[-2:]
        if loops == 1 and _agree(last):
            self._replay = [self._calls_alone(count) for count in last]
            adapter.set_min_rounds(self._benchmark, len(last))
            if call >= HEAVY:
                self._instrument.pause()
        return self.counts[-1] * loops, loops, range(loops)

    def _calls_alone(self, count: float) -> float:
        """A round's count without its reading's own instructions (the counter's precision: what
        two readings in a row count), which pytest-benchmark would divide by the round's calls:
        with them, yarl's ipv6 URL benchmark counted 258,101 a call where one call made a round
        and 255,577 where two did (the reading's 2,548 halved), and the first benchmark of a
        session got one."""
        return max(count - adapter.precision(self._benchmark), 1.0)

    def _warm_up(self, call, unread, args, kwargs) -> None:
        """``unread`` once (the first call is cold, and its count was never kept: under valgrind a
        reading, a zeroing and a dump, costs about 35 ms), then ``call`` until two counts agree."""
        self._once(unread, args, kwargs)
        while not self._instrument.warmed(self.counts):
            took = self._once(call, args, kwargs)
            self.counts.append(
                took[0] if isinstance(took, tuple) else took
            )  # (count, result) without loops
        self._benchmark.extra_info["warmup_rounds"] = len(self.counts)

    def _once(self, call, args, kwargs):
        """``call(args, kwargs)`` as a round is called: pedantic's setup and teardown around it."""
        setup, teardown = self._around
        if setup is not None:
            args, kwargs = setup() or (args, kwargs)
        self._instrument.before_round()
        took = call(args, kwargs or {})
        if teardown is not None:
            teardown(*args, **(kwargs or {}))
        return took


def figures(samples: list, outcomes: list[Outcome], instrument, around: dict) -> dict:
    """Per-op figures from the rounds' samples and outcomes, with ``around`` (``_Stretch``)."""
    ops = _consistent_ops(outcomes)
    median = statistics.median(samples)
    out = {"ops": ops, **instrument.per_op(median, ops), **around}
    for key in sorted({k for o in outcomes for k in o.extra}):
        out[key] = statistics.median(o.extra[key] for o in outcomes if key in o.extra)
    if "ideal_s" in out and instrument.unit == "s":
        out["overhead_s"] = median - out["ideal_s"]
    return out


def _consistent_ops(outcomes: list[Outcome]) -> int:
    counts = {o.ops for o in outcomes}
    if len(counts) != 1:
        raise WorkloadError(f"rounds did different amounts of work: ops {sorted(counts)}")
    return counts.pop()


def memory_figures(workload, backend, params, guard=contextlib.nullcontext) -> dict:
    """The untimed memory figures, in every measure: after the measured rounds, so that
    ``tracemalloc`` never runs inside one (see ``memory``), or in a plain worker of their own
    (``Instrument.memory_apart``)."""
    # Where a workload reads its heap per live task in a round of the case (spawn, cancel), the
    # pass runs that round (a traced run of its own cost ~3 plain rounds): its first round of the
    # case. Every round the same, or the warm-up's leftovers read as a one-off growth in the
    # first reading (asyncio's did).
    heap_round = workloads.heap_round(workload, backend, params)
    one_round = heap_round or (lambda: workload.run(backend, params))
    heap: list[int] = []

    def read_round():
        outcome = one_round()
        if heap_round is not None and not heap:
            heap.append(outcome.extra["grown"])
        return outcome

    # A heavy case's leaks are read in rounds of a lighter case of the same workload (fewer
    # messages, fewer tasks: workloads.leak_params), its own round traced twice (heap, peak).
    light = workloads.leak_params(workload, params)
    lighter = None if light is None else (lambda: workload.run(backend, light))
    out = memory.leak_pass(
        read_round, guard, lambda o: o.tasks or o.ops, lighter, case_first=heap_round is not None
    )
    if light is not None:
        out["leak_params"] = light
    with guard():
        out.update(workloads.memory(workload, backend, params, heap[0] if heap else None))
    return out


#: Rounds (after one warm-up) of the kernel figures measured apart, for an instrument whose own
#: rounds cannot give them (valgrind runs a process's threads one at a time, and its own work
#: would be in every figure).
KERNEL_ROUNDS_APART = 5


def kernel_figures_apart(workload, backend, params, guard=contextlib.nullcontext) -> dict:
    """The kernel keys (kernel.per_op) from untimed rounds in a process no instrument slows:
    the plain worker that runs a counted case's memory pass (``Instrument.memory_apart``)."""
    recorder = _KernelRounds(enabled=True)
    try:
        for _ in range(1 + KERNEL_ROUNDS_APART):
            with guard(), recorder.round():
                outcome = workload.run(backend, params)
    finally:
        recorder.release()
    return recorder.close(outcome.ops, skip=1)


def bench_in_process(benchmark, backend, plan: CasePlan, on_round=None) -> None:
    """Run the plan's rounds here through pytest-benchmark, each bounded by its timeout.
    ``on_round()`` is called before each round (warm-up included), outside what is timed."""
    workload, params, instrument = plan.workload, plan.params, plan.instrument
    guard = watchdog.deadline(plan.timeout, plan.label)
    outcomes: list[Outcome] = []
    kernel_rounds = _KernelRounds(instrument.machine_bound)

    def one_round():
        with guard(), kernel_rounds.round():
            outcomes.append(workload.run(backend, params))

    benchmark.extra_info.update(identity(backend, workload, params, instrument))
    stretch = _Stretch(backend, instrument)
    if plan.stop_width is None or getattr(benchmark, "disabled", False):
        benchmark.pedantic(
            one_round,
            setup=on_round,
            rounds=plan.rounds,
            warmup_rounds=plan.warmup,
            iterations=1,
        )
    else:
        _rounds_until_known(benchmark, one_round, plan, on_round or (lambda: None))
    around = stretch.close(len(outcomes))
    samples = adapter.fixture_rounds(benchmark)
    if samples:  # None under --benchmark-disable: the workload still ran and checked itself
        benchmark.extra_info.update(figures(samples, outcomes, instrument, around))
        benchmark.extra_info.update(
            kernel_rounds.close(_consistent_ops(outcomes), skip=len(outcomes) - len(samples))
        )
        benchmark.extra_info.update(memory_figures(workload, backend, params, guard))


def _enough(samples: list[float], plan: CasePlan) -> bool:
    """Whether a case has run its rounds: all of them, or (``stop_width``) as many as its
    median needed to be known (stopping.py)."""
    if len(samples) >= plan.rounds:
        return True
    return plan.stop_width is not None and stopping.known(samples, plan.stop_width)


def _rounds_until_known(benchmark, one_round, plan: CasePlan, on_round) -> None:
    """``pedantic``'s rounds, each timed by the same runner (the session's timer), stopped once
    the median is known (``_enough``): pedantic runs a fixed count."""
    adapter.mark_used(benchmark, "benchmark.pedantic(...)")  # used once, as pedantic marks it
    try:
        runner = adapter.factories(benchmark)[0](one_round, (), {})
        for _ in range(plan.warmup):
            on_round()
            runner(None)
        stats = adapter.factories(benchmark)[1](1)
        samples: list[float] = []
        while not _enough(samples, plan):
            on_round()
            duration, _ = runner(None)
            stats.update(duration)
            samples.append(duration)
    except Exception:
        adapter.mark_failed(benchmark)  # as pedantic's own failure: no record of it
        raise


def run_rounds(
    backend,
    plan: CasePlan,
    *,
    progress=lambda: None,
    guard=contextlib.nullcontext,
    with_memory=True,
    in_worker=False,
):
    """Measure each of the plan's rounds with its instrument's counter; return samples + figures.

    For isolated workers (``in_worker``) and for re-measuring a suspect, where
    pytest-benchmark's fixture is not the one measuring. ``progress`` is called after every
    round (an isolated worker's per-round deadline restarts on it); ``guard`` bounds each
    round in-process.
    """
    workload, params, instrument = plan.workload, plan.params, plan.instrument
    workloads.prepare(workload, params)
    instrument.counter()  # one that cannot count says so before anything runs

    def measured_round() -> float:
        instrument.before_round()
        if bracket is not None:
            bracket.before()
        with guard(), kernel_rounds.round():
            timer = instrument.round_timer()
            start = timer()
            outcomes.append(workload.run(backend, params))
            elapsed = timer() - start
        if bracket is not None:
            bracket.after(elapsed)
        progress()
        return elapsed

    outcomes: list[Outcome] = []
    kernel_rounds = _KernelRounds(instrument.machine_bound)
    bracket = control.Bracket() if instrument.machine_bound else None
    warm = [measured_round() for _ in range(plan.warmup)]
    while not instrument.warmed(warm):  # an exact measure warms up until its count repeats
        warm.append(measured_round())
    stretch = _Stretch(backend, instrument, in_worker)
    samples: list[float] = []
    while not _enough(samples, plan):
        samples.append(measured_round())
    extra = figures(samples, outcomes, instrument, stretch.close(len(samples)))  # timed rounds only
    extra.update(kernel_rounds.close(extra["ops"], skip=len(warm)))
    if bracket is not None:
        extra.update(bracket.figures(len(samples)))
    if with_memory:
        extra.update(memory_figures(workload, backend, params, guard))
        progress()
    return samples, extra


def record_external(benchmark, backend_identity: dict, samples: list[float], extra: dict) -> None:
    """Feed rounds measured elsewhere (an isolated worker) into pytest-benchmark's records."""
    benchmark.extra_info.update(backend_identity)
    benchmark.extra_info.update(extra)
    if getattr(benchmark, "disabled", False):
        return
    make_stats = adapter.factories(benchmark)[1]
    stats = make_stats(1)  # pytest-benchmark's own record, as pedantic would create
    for sample in samples:
        stats.update(sample)
