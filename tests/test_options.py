"""The options table (options.py) and the settings read from it (settings.py): --help, where a
wrong value came from, the command line over the ini file, and frozen settings.

Fast: each test parses a config or runs pytest in this process up to the usage error; no
benchmark session runs.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from pytest_concurrency import options, settings

SNAPSHOT = Path(__file__).parent / "data" / "help_options.txt"
UPDATE_ENV = "UPDATE_HELP_SNAPSHOT"
GROUP_TITLE = f"{options.GROUP[1]}:"


def plugin_help(text: str) -> str:
    """The plugin's part of ``pytest --help``: its option group, then its ini keys."""
    lines = text.splitlines()
    start = lines.index(GROUP_TITLE)
    end = lines.index("", start)
    out = lines[start:end]
    ours = False
    for line in lines[end:]:
        if line.startswith("  ") and not line.startswith("   "):  # an ini key (or another entry)
            ours = line.lstrip().startswith("concurrency_")
        elif not line.startswith("   "):
            ours = False
        if ours:
            out.append(line)
    return "\n".join(out) + "\n"


# The two --help tests run on every Python: argparse lays help out, and its layout has changed
# between Python versions; the rest (the table, the settings, the usage errors) are marked ``once``.
def test_help_matches_the_snapshot(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse and pytest's ini listing wrap at this width
    result = pytester.runpytest_inprocess("--help")
    assert result.ret == 0
    shown = plugin_help(result.stdout.str())
    if os.environ.get(UPDATE_ENV):
        SNAPSHOT.write_text(shown)
    expected = SNAPSHOT.read_text() if SNAPSHOT.exists() else ""
    assert shown == expected, (
        f"pytest --help shows the plugin's options differently from {SNAPSHOT}; if the change "
        f"is meant, rewrite it: {UPDATE_ENV}=1 pytest tests/test_options.py -k snapshot "
        "-p no:cacheprovider, and review its diff"
    )


def test_help_lists_every_user_option_and_ini_key_but_not_the_role(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    shown = plugin_help(pytester.runpytest_inprocess("--help").stdout.str())
    for o in options.OPTIONS:
        if o.flag and not o.hidden:
            assert o.flag in shown
        if o.ini:
            assert f"  {o.ini} (" in shown
    assert "--concurrency-role" not in shown
    assert "--concurrency-role" not in pytester.runpytest_inprocess("--help").stdout.str()


@pytest.mark.once
def test_the_role_is_declared_though_hidden(pytester):
    config = pytester.parseconfig()
    assert config.getoption("concurrency_role") is None  # ValueError if it were not declared
    assert "--concurrency-role" in [o.flag for o in options.OPTIONS if o.hidden]


BAD = [
    # flag, ini key, value, what is wrong
    ("--concurrency-scale", "concurrency_scale", "huge", "unknown scale 'huge'; use one of smoke"),
    ("--concurrency-measure", "concurrency_measure", "cycles", "unknown measure 'cycles'"),
    ("--concurrency-threshold", "concurrency_threshold", "ten", "'ten' is not a percentage"),
    ("--concurrency-shard", "concurrency_shard", "3/2", "'3/2': the shard must be 1 to 2"),
    ("--concurrency-layouts", "concurrency_layouts", "0", "'0' is out of range; allowed: 1 to 25"),
    ("--concurrency-timeout", "concurrency_timeout", "soon", "'soon' is not a number"),
    ("--concurrency-jobs", "concurrency_jobs", "2", "cases measured at the same time slow"),
    ("--concurrency-backends", "concurrency_backends", "gevnt", "unknown concurrency backend"),
]


@pytest.mark.once
@pytest.mark.parametrize("flag, key, value, wrong", BAD, ids=[b[1] for b in BAD])
def test_a_wrong_value_on_the_command_line_names_the_flag(pytester, flag, key, value, wrong):
    pytester.makeini(f"[pytest]\n{key} = \n")  # an empty ini value is no value
    result = pytester.runpytest_inprocess(f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{flag}={value}: {wrong}" in result.stderr.str()
    assert f"ini {key}" not in result.stderr.str()


@pytest.mark.once
@pytest.mark.parametrize("flag, key, value, wrong", BAD, ids=[b[1] for b in BAD])
def test_a_wrong_value_in_the_ini_file_names_the_key_and_the_file(
    pytester, flag, key, value, wrong
):
    ini = pytester.makeini(f"[pytest]\n{key} = {value}\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ini {key} = {value} (in {ini}): {wrong}" in result.stderr.str()
    assert f"{flag}=" not in result.stderr.str()


@pytest.mark.once
def test_a_wrong_switch_and_a_wrong_threshold_line_in_pytest_ini(pytester):
    ini = pytester.path / "pytest.ini"
    ini.write_text("[pytest]\nconcurrency_isolate = maybe\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ini concurrency_isolate = maybe (in {ini}): " in result.stderr.str()
    assert "write true or false" in result.stderr.str()
    ini.write_text("[pytest]\nconcurrency_thresholds =\n    ring = 20\n    gevent = lots\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        f"ini concurrency_thresholds (in {ini}), line 'gevent = lots': 'lots' is not a percentage"
        in result.stderr.str()
    )


@pytest.mark.once
def test_a_wrong_value_given_with_dash_o_says_so(pytester):
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess("-o", "concurrency_scale=huge")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini concurrency_scale = huge (from -o/--override-ini): unknown scale" in (
        result.stderr.str()
    )


@pytest.mark.once
def test_the_command_line_wins_over_the_ini_file(pytester):
    pytester.makeini(
        "[pytest]\n"
        "concurrency_scale = seed\n"
        "concurrency_threshold = 20\n"
        "concurrency_backends = threading\n"
        "concurrency_thresholds =\n    gevent = 15\n"
    )
    from_ini = settings.from_config(pytester.parseconfig())
    assert (from_ini.scale, from_ini.threshold, from_ini.backends) == ("seed", 0.2, ["threading"])
    assert from_ini.backends_chosen and from_ini.thresholds == {"gevent": 0.15}
    both = settings.from_config(
        pytester.parseconfig("--concurrency-scale=smoke", "--concurrency-threshold=5%")
    )
    assert (both.scale, both.threshold) == ("smoke", 0.05)
    assert both.backends == ["threading"]  # not on the command line: the ini's
    reset = settings.from_config(pytester.parseconfig("--concurrency-scale="))
    assert reset.scale == "default"  # an empty value on the command line: the default


@pytest.mark.once
def test_nothing_given_is_the_defaults(pytester):
    s = settings.from_config(pytester.parseconfig())
    assert s == settings.Settings(timeout=s.instrument.default_timeout)
    assert not s.backends_chosen and s.jobs == 1 and s.against_keep is None and not s.paired
    assert settings.from_config(pytester.parseconfig(), paired=True).paired


@pytest.mark.once
def test_paths_and_switches(pytester):
    s = settings.from_config(
        pytester.parseconfig(
            "--concurrency-against-keep=kept",
            "--concurrency-report-md=out/report.md",
            "--concurrency-isolate",
        )
    )
    assert s.against_keep == Path("kept")
    assert s.report_md == Path("out/report.md")
    assert s.isolate and not s.memory_plain


@pytest.mark.once
def test_settings_are_frozen(pytester):
    s = settings.from_config(pytester.parseconfig())
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.jobs = 4  # type: ignore[misc]
    more = settings.with_jobs(s, 4)
    assert (more.jobs, s.jobs) == (4, 1)
    assert dataclasses.replace(s, scale="smoke").scale == "smoke"


@pytest.mark.once
def test_every_entry_fills_a_field_of_settings():
    fields = {f.name for f in dataclasses.fields(settings.Settings)}
    filled = {o.field for o in options.OPTIONS if o.field}
    assert filled == fields - {"backends_chosen", "timeout_given", "paired", "all_rounds"}
    flags = [o.flag for o in options.OPTIONS if o.flag]
    inis = [o.ini for o in options.OPTIONS if o.ini]
    assert len(flags) == len(set(flags)) == 32 and len(inis) == len(set(inis)) == 22


NUMERIC = [
    o for o in options.OPTIONS if o.kind in (options.COUNT, options.SECONDS, options.PERCENT)
]


@pytest.mark.once
@pytest.mark.parametrize("o", NUMERIC, ids=[o.field or "?" for o in NUMERIC])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e10", "10000000000", "-1", "0"])
def test_every_numeric_option_refuses_what_is_not_finite_or_out_of_its_range(o, value):
    """~0 s each: --concurrency-timeout=nan, inf and 1e10 were taken, and every test then failed
    with the watchdog's ValueError."""
    if o.kind == options.COUNT and value in ("nan", "inf", "-inf", "1e10"):
        wrong = "is not a number"  # int() refuses them
    elif value in ("nan", "inf", "-inf"):
        wrong = "is not a finite number; allowed: "
    else:
        wrong = "is out of range; allowed: "
    origin = f"{o.flag or o.ini}={value}"
    with pytest.raises(settings.SettingsError) as refused:
        settings.PARSERS[o.kind](value, origin, o)
    said = str(refused.value)
    assert said.startswith(f"{origin}: {value!r} {wrong}"), said
    if o.bounds and "allowed" in wrong:
        assert said.endswith(f"{settings._shown(o.bounds[0])} to {settings._shown(o.bounds[1])}")


@pytest.mark.once
@pytest.mark.parametrize("o", NUMERIC, ids=[o.field or "?" for o in NUMERIC])
def test_every_numeric_option_takes_the_ends_of_its_range(o):
    low, high = o.bounds or (0.001, 999.999)  # a percentage: above 0, below 1000
    for value in (low, high):
        text = str(int(value)) if o.kind == options.COUNT else repr(value)
        assert settings.PARSERS[o.kind](text, "origin", o) is not None


def test_a_timeout_that_is_not_finite_is_a_usage_error_naming_it(pytester):
    """~0.1 s: the whole path, in this process, up to pytest's usage error (exit 4)."""
    result = pytester.runpytest_inprocess("--concurrency-timeout=nan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--concurrency-timeout=nan: 'nan' is not a finite number; allowed: 0.01 to 86,400"
        in result.stderr.str()
    )


@pytest.mark.once
def test_a_count_or_seconds_option_states_its_range():
    with pytest.raises(ValueError, match="have bounds"):
        options.Option("x", options.COUNT, flag="--x", ini=None, default=1, help="")
