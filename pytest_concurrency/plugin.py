"""pytest glue: options, fixtures, parametrization, hooks. The logic lives in the layers."""

from __future__ import annotations

import itertools

import pytest

from . import against, backends, options, passes, plain_tests, session_end, settings, workloads
from .backends import scratch, watchdog
from .measure import driver, records
from .report import progress
from .runner import launch

SETTINGS = pytest.StashKey[settings.Settings]()
PROGRESS = pytest.StashKey[progress.Progress]()
RUNNING = pytest.StashKey[str]()  # the test that started last: what a Ctrl-C interrupted
MARKER = "concurrency"


def pytest_addoption(parser):
    options.add(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    if against.side_session():  # before a conftest or a test module imports the code under test
        from .runner import sides

        sides.import_base_first(head=not against.base_side())


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Against a base (--concurrency-against), this process runs both sides' sessions and judges
    them (against.py). Under an instrument with a command of its own (callgrind), a session that
    measures only in workers starts them in it; one with a test measured here runs again whole in
    it (launch.py)."""
    s = _read_settings(config)
    if s.against and not against.side_session() and not _measures_nothing(config):
        return against.orchestrate(config, s)  # runs both sides' sessions; measures nothing here
    instrument = s.instrument
    if instrument.fresh_process:
        launch.refuse_other_hosts(config)
    if not instrument.needs_launch or instrument.inside() or _measures_nothing(config):
        return None
    if not launch.has_tests_measured_here(config):
        instrument.prepare_session()
        return None
    params = config.invocation_params
    print(
        f"pytest-concurrency: counting {instrument.kind}: a benchmark test measured in this process "
        "makes the session run again under valgrind (callgrind, about 30-50x slower than timing; "
        "only the rounds are counted)",
        flush=True,
    )
    with passes.before(
        config, s.layouts
    ):  # their kernel figures, which valgrind would distort; more layouts
        return instrument.run_session(["-m", "pytest", *params.args], str(params.dir))


def _measures_nothing(config) -> bool:
    opt = config.option
    return bool(
        getattr(opt, "help", False)
        or getattr(opt, "version", False)
        or getattr(opt, "collectonly", False)
        or getattr(opt, "benchmark_disable", False)
    )


def _read_settings(config) -> settings.Settings:
    if SETTINGS not in config.stash:
        try:
            config.stash[SETTINGS] = settings.from_config(config)
        except settings.SettingsError as exc:
            raise pytest.UsageError(str(exc)) from None
    return config.stash[SETTINGS]


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(backends=None, workloads=None, threshold=None, memory=None): narrow the models or "
        "workloads a test runs on, set its regression threshold (percent), or give it the memory pass",
    )
    scratch.sweep()  # what killed sessions left, whichever mode this one is (only some make a directory)
    s = _read_settings(config)
    if s.against and not s.paired:
        return  # the run that starts both sides' sessions: they read and check the rest
    if s.paired:
        against.refuse(s, config)
    if s.baseline is not None or s.save_baseline is not None:
        from .gate import baseline

        try:  # read them now: a bad baseline must not cost a whole benchmark run first
            if s.baseline is not None:
                config.stash[session_end.BASELINE] = baseline.load(s.baseline)
            if s.save_baseline is not None:
                baseline.load_previous(s.save_baseline)  # a file the save would refuse to replace
        except baseline.BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
    if (s.baseline or s.save_baseline) and s.instrument.machine_bound:
        from .gate import calibrate

        config.stash[session_end.CALIBRATION] = calibrate.measure()
    if launch.xdist_active(config) and s.instrument.fresh_process:
        launch.lanes_instead_of_xdist(config, s)
    passes.configure(config)
    if launch.xdist_active(config) and not config.getoption("benchmark_disable", False):
        raise pytest.UsageError(
            "pytest-concurrency: benchmarks running in parallel under pytest-xdist measure each "
            "other; run them without -n (or with -p no:xdist), or add --benchmark-disable to run "
            "them as plain tests"
        )


def pytest_sessionstart(session):
    from .measure import callgrind

    callgrind.take_ctrl_c()
    # after every pytest_configure: pytest-benchmark's made its session in one (trylast)
    _measure_with(session.config, _settings(session.config).instrument)
    if _settings(session.config).paired:
        against.at_least_min_rounds(session.config)


def _measure_with(config, instrument) -> None:
    """Make the instrument's counter pytest-benchmark's timer, for every benchmark."""
    timer = instrument.benchmark_timer()
    bs = getattr(config, "_benchmarksession", None)
    if timer is None or bs is None:
        return
    from pytest_benchmark.utils import NameWrapper

    bs.options["timer"] = NameWrapper(timer)
    # its table would print every count as seconds; ours below say what they are
    bs.display = lambda tr: tr.write_line(
        f"pytest-benchmark's table left out: the samples are {instrument.kind}, not seconds "
        "(see the tables below)"
    )


def _settings(config) -> settings.Settings:
    return config.stash[SETTINGS]


def _marker_kwarg(node, name: str):
    marker = node.get_closest_marker(MARKER)
    return marker.kwargs.get(name) if marker else None


class Case(dict):
    """One workload with one set of parameters: what ``concurrency_case`` hands a test.

    A dict, so that pytest-benchmark can write it into JSON as one of the test's params.
    """

    def __init__(self, workload: str, params: dict):
        super().__init__(workload=workload, params=dict(params))

    @property
    def workload(self) -> str:
        return self["workload"]

    @property
    def params(self) -> dict:
        return self["params"]

    @property
    def id(self) -> str:
        return f"{self.workload}-{records.params_id(self.params)}"


def pytest_generate_tests(metafunc):
    config = metafunc.config
    if "concurrency_case" in metafunc.fixturenames:
        chosen = _marker_kwarg(metafunc.definition, "workloads") or workloads.names()
        scale = _settings(config).scale
        try:
            cases = [
                Case(name, params) for name in chosen for params in workloads.get(name).cases(scale)
            ]
        except (KeyError, ImportError, AttributeError) as exc:
            raise pytest.UsageError(
                f"@pytest.mark.{MARKER}(workloads=...) on {metafunc.definition.nodeid}: {exc.args[0]}"
            ) from None
        metafunc.parametrize("concurrency_case", [pytest.param(c, id=c.id) for c in cases])
    if "concurrency_backend" in metafunc.fixturenames:
        specs = _selected_backends(metafunc.definition, _settings(config))
        metafunc.parametrize(
            "concurrency_backend",
            [
                pytest.param(spec, id=spec, marks=_skip_marks(spec, _settings(config)))
                for spec in specs
            ],
            indirect=True,
        )


def _selected_backends(node, s: settings.Settings) -> list[str]:
    narrowed = _marker_kwarg(node, "backends")
    if narrowed is None:
        return s.backends
    if isinstance(narrowed, str):
        narrowed = [narrowed]
    wanted = settings.parse_backends(
        ",".join(narrowed), f"@pytest.mark.{MARKER}(backends=...) on {node.nodeid}"
    )
    # A marker may name models the default run leaves out (trio, anyio, the native rows), so a
    # library's own anyio benchmark runs without a command-line selection; one given still narrows it.
    allowed = (
        s.backends
        if s.backends_chosen
        else [*s.backends, *backends.EXTRA_SPECS, *backends.NATIVE_SPECS]
    )
    return [spec for spec in wanted if spec in allowed]


def _skip_marks(spec: str, s: settings.Settings):
    reason = backends.unavailable_reason(spec)
    if (
        reason is None
        and backends.isolation_only(spec)
        and not (s.isolate or s.instrument.fresh_process)
    ):
        reason = f"{spec} monkey-patches the whole process: run it with --concurrency-isolate"
    return [pytest.mark.skip(reason=f"{spec}: {reason}")] if reason else []


@pytest.fixture
def concurrency_backend(request):
    """The concurrency model this test runs on (parametrized over the selected models).

    Its ``run`` is bounded by ``--concurrency-timeout``: a deadlock in a test's own code
    fails that test, naming it, the backend and where it was blocked, instead of hanging.
    """
    try:
        backend = backends.load(request.param)
    except backends.Unsupported as exc:
        pytest.skip(f"{request.param}: {exc}")
    s = _settings(request.config)
    instrument = s.instrument
    reason = instrument.unsupported(backend) or backend.unsupported_measure(instrument)
    if reason:
        pytest.skip(f"{backend.name} with --concurrency-measure={instrument.kind}: {reason}")
    if backend.family == "native" and "concurrency_benchmark" not in request.fixturenames:
        pytest.skip(
            f"{backend.name}: a native reference runs the seed workloads through concurrency_benchmark, "
            "not Python code"
        )
    watchdog.bound_run(backend, s.timeout, request.node.nodeid, _fail_stalled)
    plain_tests.watch(request, backend, instrument, plain_tests.runs_apart(request.node, s))
    return backend


def _fail_stalled(exc: watchdog.WorkloadTimeout):
    # The message says where the code was blocked; pytest's traceback through the timeout's
    # own machinery (and a stopped event loop's RuntimeError) would only bury it.
    raise pytest.fail.Exception(str(exc), pytrace=False) from None


@pytest.fixture
def concurrency_benchmark(request, benchmark, concurrency_backend):
    """Call with a ``Case`` to measure that workload on this model and record its metrics."""
    s = _settings(request.config)
    instrument = s.instrument

    def run_case(case: Case) -> None:
        workload, reason, rounds, warmup = _plan(case, concurrency_backend, s)
        if reason:
            pytest.skip(f"{concurrency_backend.name}: {reason}")
        workloads.prepare(workload, case.params)
        benchmark.group = f"{workload.name}[{records.params_id(case.params)}]"
        if case.workload != workload.name:  # a user's "module:OBJECT": lets the gate re-run it
            benchmark.extra_info["workload_ref"] = case.workload
        what = records.label(workload.name, case.params, concurrency_backend.name)
        status = request.config.stash.get(PROGRESS, None)
        if status is not None:
            status.start(concurrency_backend.name, benchmark.group)
        ticks = itertools.count(1)
        on_round = status and (
            lambda: status.round(next(ticks), rounds + warmup)
        )  # rounds measured elsewhere
        try:
            if concurrency_backend.family == "native":
                from .native import bench as native

                native.bench(
                    benchmark,
                    concurrency_backend,
                    workload,
                    case.params,
                    rounds,
                    warmup,
                    s.timeout,
                    what,
                    on_round=on_round,
                )
            elif s.isolate or instrument.fresh_process:
                from .runner import isolate

                ahead = request.config.stash.get(isolate.AHEAD, None)
                isolate.bench(
                    request.config,
                    benchmark,
                    concurrency_backend,
                    case.workload,
                    case.params,
                    rounds,
                    warmup,
                    s.timeout,
                    what,
                    instrument,
                    on_round=on_round,
                    measured=ahead and ahead.take(_ahead_key(concurrency_backend.name, case)),
                )
            else:
                driver.bench_in_process(
                    progress.Ticking(benchmark, status, rounds + warmup) if status else benchmark,
                    concurrency_backend,
                    workload,
                    case.params,
                    rounds,
                    warmup,
                    watchdog.deadline(s.timeout, what),
                    instrument,
                )
        except watchdog.WorkloadTimeout as exc:
            _fail_stalled(exc)
        finally:
            if status is not None:
                status.end()

    return run_case


def _plan(case: Case, backend, s: settings.Settings) -> tuple:
    """(workload, why this backend cannot run it or None, rounds, warm-up rounds)."""
    workload = workloads.get(case.workload)
    rounds, warmup = s.instrument.rounds(*workload.rounds(s.scale))
    reason = workload.unsupported(backend, case.params)
    if backend.family == "native":
        from .native import bench as native

        reason = reason or native.unsupported(case.workload)
    rounds = s.rounds or rounds
    return workload, reason, max(rounds, against.MIN_ROUNDS) if s.paired else rounds, warmup


def pytest_collection_modifyitems(config, items):
    against.keep_only(config, items)
    passes.keep_measured_here(config, items)


def pytest_collection_finish(session):
    config = session.config
    if config.option.collectonly:
        launch.write_probe(session.items)
        return
    total = sum(
        "concurrency_benchmark" in getattr(item, "fixturenames", ()) for item in session.items
    )
    if total and progress.wanted(config):
        config.stash[PROGRESS] = progress.Progress(config, total)
    s = _settings(config)
    if total and s.jobs > 1 and s.instrument.fresh_process:
        _measure_ahead(config, session.items, s)
    against.collected(config, session.items)


def _ahead_key(spec: str, case: Case) -> tuple:
    return (spec, case.workload, records.params_id(case.params))


def _measure_ahead(config, items, s: settings.Settings) -> None:
    """Submit every selected seed-style case to run ``s.jobs`` at a time; its test picks the
    result up when pytest reaches it. Anything not plainly runnable is left to its test."""
    from .runner import isolate

    ahead = isolate.ahead(config, s.jobs)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        case, spec = params.get("concurrency_case"), params.get("concurrency_backend")
        if (
            not isinstance(case, Case)
            or spec is None
            or "concurrency_benchmark" not in item.fixturenames
            or item.get_closest_marker("skip")
            or item.get_closest_marker("skipif")
        ):
            continue
        try:
            backend = backends.load(spec)
        except backends.Unsupported:
            continue
        workload, reason, rounds, warmup = _plan(case, backend, s)
        if reason or s.instrument.unsupported(backend) or backend.unsupported_measure(s.instrument):
            continue
        workloads.prepare(workload, case.params)  # in this process, before any worker starts
        ahead.submit(
            _ahead_key(spec, case),
            spec,
            isolate.request(case.workload, case.params, rounds, warmup, s.instrument),
            s.timeout,
        )
    ahead.start()


def pytest_runtest_setup(item):
    item.config.stash[RUNNING] = item.nodeid
    against.at_test(item)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A user's plain test: isolated, its call runs in a child forked for it (runner/forked.py);
    in-process, under a watch for what no ``backend.run`` deadline covers."""
    s = _settings(pyfuncitem.config)
    if not plain_tests.runs_apart(pyfuncitem, s):
        return plain_tests.call_watched(pyfuncitem, s.timeout)
    from .runner import forked

    if forked.in_child():  # the child: pytest's own hook calls the function
        return None
    plain_tests.call_apart(pyfuncitem, s.instrument, s.timeout)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    against.pair(item)
    s = _settings(item.config)
    memory = _marker_kwarg(item, "memory")
    plain_tests.before_call(item, s.instrument, memory if memory is not None else s.memory_plain)
    outcome = yield
    plain_tests.after_call(item, s.instrument, outcome.excinfo is None)
    _attach_threshold(item)
    bench = getattr(item, "funcargs", {}).get("benchmark")
    if bench is not None:
        against.record_turns(item, bench)


def _attach_threshold(item) -> None:
    bench = getattr(item, "funcargs", {}).get("benchmark")
    threshold = _marker_kwarg(item, "threshold")
    if bench is not None and threshold is not None:
        origin = f"@pytest.mark.{MARKER}(threshold=...) on {item.nodeid}"
        bench.extra_info["threshold"] = settings.parse_percent(threshold, origin)


def pytest_sessionfinish(session, exitstatus):
    # pytest-benchmark's own sessionfinish (a hookwrapper) has already collected the stats.
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is None:
        return
    config = session.config
    if config.option.collectonly:  # launch.py's probe, or a user's: it measured nothing to write
        return
    if (
        exitstatus == pytest.ExitCode.INTERRUPTED
    ):  # stopped by the user: what it measured is not a result
        from .runner import isolate

        isolate.close(config, now=True)
        running = config.stash.get(RUNNING, None)
        config.stash[session_end.OUTCOME] = session_end.SessionOutcome(
            [],
            messages=[
                f"interrupted {f'in {running}' if running else 'before the first test'}: no baseline, report, "
                "verdict or rounds written"
            ],
        )
        return
    if passes.finish(bs):
        return
    against.side_finish(config, bs)
    outcome = session_end.finish(
        config, bs, _settings(config), config.stash.get(session_end.BASELINE, None)
    )
    config.stash[session_end.OUTCOME] = outcome
    if session.exitstatus == pytest.ExitCode.OK and outcome.exit_status:
        session.exitstatus = (
            outcome.exit_status
        )  # 1 for a failure, session_end.EXIT_BASELINE_TOO_NOISY


@pytest.hookimpl(trylast=True, specname="pytest_sessionfinish")
def pytest_sessionfinish_exit_status(session, exitstatus):  # pytest takes pytest_* only
    plain_tests.session_ended(int(session.exitstatus))


@pytest.hookimpl(hookwrapper=True, tryfirst=True, specname="pytest_sessionfinish")
def pytest_sessionfinish_no_history_when_interrupted(
    session, exitstatus
):  # pytest takes pytest_* only
    """pytest-benchmark saves its run (--benchmark-autosave/--benchmark-save/--benchmark-json)
    whatever the exit status: a run the user stopped must not become the history it compares with."""
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is not None and exitstatus == pytest.ExitCode.INTERRUPTED:
        bs.save = bs.autosave = bs.json = None
    yield


def pytest_unconfigure(config):
    from .runner import isolate

    isolate.close(config)


def pytest_terminal_summary(terminalreporter):
    outcome = terminalreporter.config.stash.get(session_end.OUTCOME, None)
    if outcome is not None:
        session_end.show(terminalreporter, outcome)
    left = [t.name for t in watchdog.threads_left()]
    if left:  # or the session seems to hang after its summary, with nothing said
        bound = plain_tests.exit_bound()
        terminalreporter.write_line(
            f"pytest-concurrency: tests left threads running ({', '.join(left)}); Python waits for them before "
            "this process exits, "
            + (
                f"here for at most {bound:g} s of them (then it exits without them). "
                if bound
                else "so it may not end. "
            )
            + "Join them in the test, or run with --concurrency-isolate, where a test's threads end with the child "
            "process it runs in.",
            yellow=True,
        )
