"""Each pytest process the plugin starts is told its role on its command line, decided once.

Read from the package's source (nothing imported) where that is the claim, and with real
sessions where it is the behaviour.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import pytest_concurrency
from pytest_concurrency.roles.role import COUNTED, KINDS, LAYOUT_PASS, PROBE, SIDE, Role, parse

PACKAGE = Path(pytest_concurrency.__file__).parent
#: The one module that names the environment variables of the plugin's non-pytest children.
CHILD_ENV = PACKAGE / "backends" / "child_env.py"
#: The layers below the plugin's glue: no pytest Config, Item, Session or stash in them.
BELOW_GLUE = ("gate", "measure", "runner", "report")
PYTEST_OBJECTS = {"config", "early_config", "item", "pyfuncitem", "session", "metafunc"}


@pytest.mark.once
def test_a_role_survives_the_command_line():
    for role in (
        Role(PROBE, out="/tmp/count"),
        Role(COUNTED, launcher=42, kernel="/k.json", layouts=("/l1.json", "/l2.json")),
        Role(COUNTED, launcher=42, layouts=("/l1.json",), forked=True),
        Role(LAYOUT_PASS, out="/l1.json", launcher=7, layout=1),
        Role(SIDE, side="A", socket="/s", out="/o, with a comma", base_dir="/b", only="/only"),
        Role("head", base_dir="/run/nnnn"),
        Role("again", out="/a/out.json", only="/a/only.json", running="/a/again.running"),
        Role("recount", "/r/out.json", 9, layouts=("/r/l1.json",), forked=True, only="/r/only"),
    ):
        (arg,) = role.argv()
        name, _, value = arg.partition("=")
        assert name == "--concurrency-role" and parse(value) == role
    assert set(KINDS) == {
        *(PROBE, COUNTED, LAYOUT_PASS, SIDE, "kernel-pass", "base", "head", "again", "recount")
    }


@pytest.mark.once
@pytest.mark.parametrize(
    "text",
    ["", "side", "{}", '{"kind":"boss"}', '{"kind":"side","colour":"red"}', "[1]", '{"kind":1}'],
)
def test_a_role_the_plugin_did_not_write_is_refused(text):
    with pytest.raises(pytest.UsageError, match="the plugin passes this option to the pytest"):
        parse(text)


@pytest.mark.once
def test_a_user_who_gives_a_role_gets_a_usage_error(pytester):
    """~1 s: one session that ends at start-up."""
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--concurrency-role=counted", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--concurrency-role=counted: the plugin passes this option*"])


@pytest.mark.once
def test_a_probe_writes_how_many_tests_its_session_measures_in_its_own_process(pytester):
    """~1.5 s: one --collect-only session in the probe's role, as a counted run starts it."""
    pytester.makepyfile(
        test_some="""
        def test_plain(benchmark):
            benchmark(sum, range(10))

        def test_model(benchmark, concurrency_backend):
            benchmark(concurrency_backend.run, lambda: None)

        def test_case(concurrency_benchmark, concurrency_case):
            concurrency_benchmark(concurrency_case)

        def test_not_a_benchmark():
            pass

        import pytest

        @pytest.mark.skip(reason="not here")
        def test_skipped(benchmark):
            benchmark(sum, range(10))

        @pytest.mark.skipif("True", reason="not here either")
        def test_skipped_if(benchmark):
            benchmark(sum, range(10))
        """
    )
    out = pytester.path / "count"
    args = ("--collect-only", "-q", "--concurrency-backends=asyncio,threading")
    result = pytester.runpytest_subprocess(*args, *Role(PROBE, out=str(out)).argv())
    assert result.ret == 0, result.stdout.str()
    # measured here: the plain one and the two models of test_model; the cases run in workers,
    # and what a skip mark skips is not counted (a run of only those is not relaunched)
    assert json.loads(out.read_text()) == [3]


def _sources():
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.once
def test_no_module_but_the_childrens_one_names_a_plugin_environment_variable():
    named = {
        str(path.relative_to(PACKAGE)): sorted(set(re.findall(r"PYTEST_CONCURRENCY_\w+", text)))
        for path in _sources()
        if path != CHILD_ENV and "PYTEST_CONCURRENCY_" in (text := path.read_text())
    }
    assert named == {}, "name it in backends/child_env.py, or pass it on the command line (roles)"


@pytest.mark.once
def test_the_childrens_module_names_what_it_reads():
    text = CHILD_ENV.read_text()
    assert text.count("PYTEST_CONCURRENCY_") >= 5 and "os.environ.get(name)" in text


@pytest.mark.once
def test_no_layer_below_the_glue_takes_a_pytest_object_or_reads_a_stash():
    found = []
    for path in _sources():
        if path.relative_to(PACKAGE).parts[0] not in BELOW_GLUE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]}
                found += [
                    f"{path.name}:{node.lineno} {node.name}({n})" for n in names & PYTEST_OBJECTS
                ]
            if isinstance(node, ast.Attribute) and node.attr in ("stash", "StashKey"):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert found == []


@pytest.mark.once
def test_plugin_py_is_wiring():
    text = (PACKAGE / "plugin.py").read_text()
    assert len(text.splitlines()) <= 200
    hooks = re.findall(r"^def (pytest_\w+)", text, re.M)
    assert hooks == [
        "pytest_addoption",
        "pytest_load_initial_conftests",
        "pytest_cmdline_main",
        "pytest_configure",
        "pytest_report_header",  # a wrapper: every plugin's header lines, to the terminal's width
        "pytest_generate_tests",
    ]


@pytest.mark.once
def test_a_process_started_apart_keeps_the_users_selection_and_writes_nothing_of_theirs():
    from types import SimpleNamespace

    from pytest_concurrency.roles.argv import apart

    config = SimpleNamespace(
        invocation_params=SimpleNamespace(
            args=("-k", "ring", "--basetemp", "/mine", "--concurrency-baseline=b.json", "-x")
        ),
        pluginmanager=SimpleNamespace(has_plugin=lambda name: name == "cacheprovider"),
    )
    argv = apart(config, "/run", "again")
    assert argv[:5] == ["-k", "ring", "--basetemp", "/mine", "-x"]  # the user's, as given
    assert not any(a.startswith("--concurrency-baseline") for a in argv)
    # the last --basetemp wins: the user's is never emptied by a process beside their session
    assert argv[5:] == ["--basetemp=/run/again-tmp", "-o", "cache_dir=/run/again-cache"]
