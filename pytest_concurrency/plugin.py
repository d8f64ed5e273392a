"""pytest wiring: the options, the marker, the fixtures and their parametrization, and the
registration of this process's role (roles/), whose object implements the rest of the hooks."""

import sys

import pytest

from . import backends, cases, options, plain_tests, roles, sharding, workloads
from .backends import scratch, watchdog
from .exit_codes import Exit
from .report import terminal
from .roles import codspeed
from .roles.session import MARKER, marker_kwarg, measures
from .settings import Settings, SettingsError, from_config, parse_backends

EARLY_ROLE = pytest.StashKey["roles.Role | None"]()


def pytest_addoption(parser, pluginmanager):
    options.add(parser)
    pluginmanager.register(CtrlCAnywhere(), "concurrency-ctrl-c")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    role = early_config.stash[EARLY_ROLE] = roles.given(early_config)
    roles.imports_base_first(role)  # before a conftest or a test module imports the code under test
    if codspeed.gate_measures(early_config.known_args_namespace, role):
        codspeed.accept_flag(early_config, parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """This process's role decides once what it does; a role that runs other processes instead
    of a session (a launcher, a run against a base) returns the run's exit status here."""
    given = config.stash.get(EARLY_ROLE, None)
    codspeed_said = codspeed.left_to_the_suite(config, given)
    if codspeed_said and given is None:
        print(f"pytest-concurrency: {codspeed_said}", flush=True)
    try:
        settings = from_config(config, paired=given is not None and given.kind == roles.SIDE)
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None
    timed = settings.instrument.machine_bound  # counted against the base, they are written
    if settings.verdicts is not None and settings.against and given is None and timed:
        raise pytest.UsageError(
            "--concurrency-verdicts: not written against the base in time yet (its verdicts are "
            "the orchestrator's); use --concurrency-report-md there, a stored baseline, or count "
            "both sides (--concurrency-measure=instructions)"
        )
    if settings.history is not None and settings.against and given is None:
        raise pytest.UsageError(
            "--concurrency-history: a run against the base is not kept yet (its verdicts are "
            "the orchestrator's); keep the runs judged against a stored baseline"
        )
    role = roles.register(config, given, settings)
    if settings.shard is not None:
        config.pluginmanager.register(sharding.Selector(settings.shard, measures), sharding.NAME)
    main = getattr(role, "main", None)
    return main() if main is not None else None


class CtrlCAnywhere:
    """A Ctrl-C that nothing below turned into its line (a role's start-up or its end, after pytest's
    own handling of one in the tests): the role's one line, pytest's status for it, no traceback.
    A plugin of its own: it wraps this module's pytest_cmdline_main, and a module has one per name."""

    @pytest.hookimpl(wrapper=True)
    def pytest_cmdline_main(self, config):
        try:
            return (yield)
        except KeyboardInterrupt:
            line = roles.interrupted(config)  # empty: the session's summary said it
            if line:
                print(f"\npytest-concurrency: {line}", file=sys.stderr, flush=True)
            return Exit.INTERRUPTED


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(backends=None, workloads=None, threshold=None, memory=None): narrow the models or "
        "workloads a test runs on, set its regression threshold (percent), or give it the memory pass",
    )
    for name in plain_tests.BODY_MARKERS:  # pytest-codspeed's, when it is not installed
        config.addinivalue_line("markers", f"{name}: the whole test is the measured call")
    scratch.sweep()  # what killed sessions left, whichever role this process has


@pytest.hookimpl(wrapper=True)
def pytest_report_header(config):
    """Every plugin's header lines, pytest's own among them, wrapped to the terminal's width."""
    said = yield
    return terminal.header_lines(said, config.get_terminal_writer().fullwidth)


def pytest_generate_tests(metafunc):
    settings = roles.of(metafunc.config).settings
    if "concurrency_case" in metafunc.fixturenames:
        chosen = marker_kwarg(metafunc.definition, "workloads") or workloads.names()
        try:
            found = [
                cases.Case(name, params)
                for name in chosen
                for params in workloads.get(name).cases(settings.scale)
            ]
        except (KeyError, ImportError, AttributeError) as exc:
            raise pytest.UsageError(
                f"@pytest.mark.{MARKER}(workloads=...) on {metafunc.definition.nodeid}: {exc.args[0]}"
            ) from None
        metafunc.parametrize("concurrency_case", [pytest.param(c, id=c.id) for c in found])
    if "concurrency_backend" in metafunc.fixturenames:
        specs = _selected_backends(metafunc.definition, settings)
        metafunc.parametrize(
            "concurrency_backend",
            [pytest.param(spec, id=spec, marks=_skip_marks(spec, settings)) for spec in specs],
            indirect=True,
        )


def _selected_backends(node, settings: Settings) -> list[str]:
    narrowed = marker_kwarg(node, "backends")
    if narrowed is None:
        return settings.backends
    if isinstance(narrowed, str):
        narrowed = [narrowed]
    wanted = parse_backends(
        ",".join(narrowed), f"@pytest.mark.{MARKER}(backends=...) on {node.nodeid}"
    )
    # A marker may name models the default run leaves out (trio, anyio, the native rows), so a
    # library's own anyio benchmark runs without a command-line selection; one given still narrows it.
    extra = [*backends.EXTRA_SPECS, *backends.NATIVE_SPECS]
    allowed = settings.backends if settings.backends_chosen else [*settings.backends, *extra]
    return [spec for spec in wanted if spec in allowed]


def _skip_marks(spec: str, settings: Settings):
    reason = backends.unavailable_reason(spec)
    isolated = settings.isolate or settings.instrument.fresh_process
    if reason is None and backends.isolation_only(spec) and not isolated:
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
    settings = roles.of(request.config).settings
    instrument = settings.instrument
    reason = instrument.unsupported(backend) or backend.unsupported_measure(instrument)
    if reason:
        pytest.skip(f"{backend.name} with --concurrency-measure={instrument.kind}: {reason}")
    if backend.family == "native" and "concurrency_benchmark" not in request.fixturenames:
        pytest.skip(
            f"{backend.name}: a native reference runs the seed workloads through "
            "concurrency_benchmark, not Python code"
        )
    watchdog.bound_run(backend, settings.timeout, request.node.nodeid, _fail_stalled)
    plain_tests.watch(request, backend, instrument, plain_tests.runs_apart(request.node, settings))
    return backend


def _fail_stalled(exc: watchdog.WorkloadTimeout):
    # The message says where the code was blocked; pytest's traceback through the timeout's
    # own machinery (and a stopped event loop's RuntimeError) would only bury it.
    raise pytest.fail.Exception(str(exc), pytrace=False) from None


@pytest.fixture
def concurrency_benchmark(request, benchmark, concurrency_backend):
    """Call with a ``Case`` to measure that workload on this model and record its metrics."""
    role = roles.of(request.config)

    def run_case(case: cases.Case) -> None:
        cases.run(role, benchmark, concurrency_backend, case, _fail_stalled)

    return run_case
