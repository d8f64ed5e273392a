"""Broken and hostile baseline files: each one a one-line error naming the problem and the
fix, and the file byte-identical afterwards (the gate never rewrites what it cannot read)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_concurrency import settings
from pytest_concurrency.report import markdown
from pytest_concurrency.store import atomic, baseline

# version-independent (refusals of bad files, in-process): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

GOOD = (Path(__file__).parent / "data" / "run_a.json").read_text()


def _edit(change):
    doc = json.loads(GOOD)
    change(doc)
    return json.dumps(doc)


def _samples(value):
    return lambda d: d["benchmarks"][0]["stats"].__setitem__("data", value)


CASES = {
    "truncated": (GOOD[: len(GOOD) // 2], "is truncated"),
    "empty": ("", "is empty"),
    "binary": (os.urandom(4096).decode("latin-1"), "is not"),
    "a list": ("[1, 2, 3]", "holds a JSON list"),
    "NaN samples": (
        _edit(_samples([float("nan")] * 5)),
        "holds NaN, which is no measurement, at benchmarks[0].stats.data[0]",
    ),
    "infinite samples": (
        _edit(_samples([float("inf")] * 5)),
        "holds Infinity, which is no measurement, at benchmarks[0].stats.data[0]",
    ),
    # entries that can never be judged: the gate once passed them as "unchanged"
    "only zero samples": (_edit(_samples([0.0] * 5)), ".stats.data holds only zeros (5 samples)"),
    "a median as text": (
        _edit(lambda d: d["benchmarks"][0]["stats"].__setitem__("median", "fast")),
        ".stats.median is a string, not a number",
    ),
    "a calibration of 0 ns": (
        _edit(
            lambda d: d["pytest_concurrency"].__setitem__("calibration", {"ns_per_iteration": 0})
        ),
        "pytest_concurrency.calibration.ns_per_iteration is the number 0, not a number above 0",
    ),
    "only zero samples in an earlier session": (
        _edit(
            lambda d: d["pytest_concurrency"].__setitem__(
                "history",
                [
                    {
                        "benchmarks": [
                            {"workload": "w", "params": {}, "backend": "b", "samples": [0, 0]}
                        ]
                    }
                ],
            )
        ),
        "pytest_concurrency.history[0].benchmarks[0].samples holds only zeros",
    ),
    "negative samples": (_edit(_samples([-1.0] * 5)), "data[0] is the number -1.0, where only"),
    "text samples": (_edit(_samples(["fast"] * 5)), "data[0] is a string, where only"),
    "benchmark not an object": (
        _edit(lambda d: d["benchmarks"].__setitem__(0, [1])),
        "benchmarks[0] is a list, not an object",
    ),
    "params not an object": (
        _edit(lambda d: d["benchmarks"][0]["extra_info"].__setitem__("params", [1])),
        "extra_info.params is a list, not an object",
    ),
    "newer format": (
        _edit(lambda d: d["pytest_concurrency"].__setitem__("schema_version", 99)),
        "written by a newer pytest-concurrency-bench: upgrade",
    ),
    # finite, and no measurement: every run read "improved -100%" against them, the gate off
    "samples of 1e300 s": (
        _edit(_samples([1e300] * 5)),
        "benchmarks[0] ('test_ring[threading-m=1000,n=10]').stats.data holds a round of 1e+300 s, "
        "beyond any round measured by time (at most 86400 s)",
    ),
    "a round longer than a day in an earlier session": (
        _edit(
            lambda d: d["pytest_concurrency"].__setitem__(
                "history",
                [
                    {
                        "benchmarks": [
                            {"workload": "w", "params": {}, "backend": "b", "samples": [1, 9e4]}
                        ]
                    }
                ],
            )
        ),
        "history[0].benchmarks[0].samples holds a round of 90000 s",
    ),
    "counts beyond a day of instructions": (
        _edit(
            lambda d: (
                d["pytest_concurrency"].__setitem__("measure", "instructions"),
                _samples([1e18] * 5)(d),
            )
        ),
        "holds a round of 1e+18 instr, beyond any round measured by instructions",
    ),
    "a damaged shard section": (
        _edit(
            lambda d: d["pytest_concurrency"].__setitem__(
                "shard", {"index": 1, "count": 2, "holds": [3]}
            )
        ),
        "pytest_concurrency.shard.holds has 1 count for 2 shards",
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_a_broken_baseline_is_one_clear_line_and_stays_as_it_was(tmp_path, name):
    content, expected = CASES[name]
    path = tmp_path / "base.json"
    path.write_bytes(content.encode("latin-1" if name == "binary" else "utf-8"))
    before = path.read_bytes()
    with pytest.raises(baseline.BaselineError) as err:
        baseline.load(path)
    message = str(err.value)
    assert expected in message and "\n" not in message and "base.json" in message, message
    if content:  # a save adds to a baseline it can read, replaces an empty file, refuses the rest
        with pytest.raises(baseline.BaselineError):
            baseline.load_previous(path)
    assert path.read_bytes() == before


def test_a_huge_file_of_garbage_is_refused_without_a_traceback(tmp_path):
    path = tmp_path / "base.json"
    with open(path, "wb") as fh:  # 100 MB: a baseline never is
        fh.write(b'{"benchmarks": "' + b"x" * (100 * 1024 * 1024) + b'"}')
    with pytest.raises(baseline.BaselineError, match="is 100 MB, larger than any baseline"):
        baseline.load(path)


def test_a_link_to_a_device_is_refused_rather_than_read_for_ever(tmp_path):
    link = tmp_path / "base.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(baseline.BaselineError, match="not a regular file"):
        baseline.load(link)


def test_a_save_through_a_symlink_replaces_the_file_it_points_to_and_keeps_the_link(tmp_path):
    # allowed: the link points to an existing regular file below its own directory
    (tmp_path / "shared").mkdir()
    target = tmp_path / "shared" / "baseline.json"
    target.write_text(GOOD)
    link = tmp_path / "base.json"
    link.symlink_to(target)
    doc = json.loads(GOOD)
    doc["benchmarks"] = doc["benchmarks"][:1]
    baseline.save(link, doc)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(json.loads(target.read_text())["benchmarks"]) == 1


def test_a_save_into_a_directory_reached_through_a_link_writes_there(tmp_path):
    # allowed: the rule is about a link at the path itself and directories a save would create;
    # an existing directory the path reaches through a link (macOS's /tmp, a results directory
    # kept on another disk) is the directory the user named, as the system resolves it
    outside = _outside(tmp_path)
    (tmp_path / "results").symlink_to(outside, target_is_directory=True)
    path = tmp_path / "results" / "base.json"
    assert atomic.link_problem(path) is None
    baseline.save(path, json.loads(GOOD))
    assert (tmp_path / "results").is_symlink() and not (outside / "base.json").is_symlink()
    assert json.loads((outside / "base.json").read_text())["benchmarks"]
    assert sorted(p.name for p in outside.iterdir()) == ["base.json"]


def test_a_read_only_baseline_is_refused_before_the_run(tmp_path, monkeypatch):
    path = tmp_path / "base.json"
    path.write_text(GOOD)
    path.chmod(0o444)
    real_access = os.access  # root may write anything: ask as a user would be answered
    monkeypatch.setattr(
        settings.os, "access", lambda p, mode: False if Path(p) == path else real_access(p, mode)
    )
    with pytest.raises(settings.SettingsError, match="is read-only, so it is left as it is"):
        settings.writable_target(str(path), "--concurrency-save-baseline")


def test_nan_in_a_document_is_saved_as_null_and_loads(tmp_path):
    doc = json.loads(GOOD)
    doc["benchmarks"][0]["extra_info"]["peak_rss_kib"] = float("nan")
    baseline.save(tmp_path / "base.json", doc)
    assert (
        baseline.load(tmp_path / "base.json").doc["benchmarks"][0]["extra_info"]["peak_rss_kib"]
        is None
    )


# -- symbolic links: a save writes through a link only to a regular file inside the directory
# the path names (the test above); every other link is refused, naming the link and its target


def _outside(tmp_path) -> Path:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "project").mkdir()
    return outside


def _refused(link: Path, target: str, why: str) -> None:
    doc = json.loads(GOOD)
    with pytest.raises(baseline.BaselineError) as err:
        baseline.save(link, doc)
    message = str(err.value)
    assert f"{link} is a symbolic link to {target}, {why}; a save does not write" in message
    assert "\n" not in message
    with pytest.raises(settings.SettingsError, match="is a symbolic link to"):
        settings.writable_target(str(link), "--concurrency-save-baseline")


def test_a_dangling_link_is_refused_and_creates_nothing_where_it_points(tmp_path):
    outside = _outside(tmp_path)
    link = tmp_path / "project" / "base.json"
    target = outside / "new" / "dir" / "base.json"
    link.symlink_to(target)
    _refused(link, str(target), "which does not exist (or is a loop of links)")
    assert list(outside.iterdir()) == [] and link.is_symlink()


def test_a_link_to_a_file_outside_the_directory_is_refused_and_the_file_kept(tmp_path):
    outside = _outside(tmp_path)
    (outside / "base.json").write_text(GOOD)
    link = tmp_path / "project" / "base.json"
    link.symlink_to(outside / "base.json")
    _refused(link, str(outside / "base.json"), f"outside {link.parent}")
    assert (outside / "base.json").read_text() == GOOD


def test_a_link_to_a_directory_or_a_loop_is_refused(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "to_dir.json").symlink_to(tmp_path / "dir")
    _refused(tmp_path / "to_dir.json", str(tmp_path / "dir"), "which is not a regular file")
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    loop = "which does not exist (or is a loop of links)"
    _refused(tmp_path / "loop.json", str(tmp_path / "loop.json"), loop)


def test_no_directory_is_created_through_a_dangling_link(tmp_path):
    outside = _outside(tmp_path)
    (tmp_path / "project" / "out").symlink_to(outside / "gone")
    path = tmp_path / "project" / "out" / "sub" / "report.md"
    with pytest.raises(atomic.UnsafeLink, match="does not create directories through a link"):
        markdown.write(path, "# report\n")
    with pytest.raises(settings.SettingsError, match=r"out is a symbolic link to .*gone"):
        settings.writable_target(str(path), "--concurrency-report-md")
    assert list(outside.iterdir()) == []


# -- outputs: never written over the baseline, each other, or a file of another kind -------------

BENCH = "def test_bench(benchmark):\n    benchmark(sum, range(10))\n"


@pytest.mark.parametrize(
    "args, why",
    [
        (
            ["--concurrency-baseline=B.json", "--concurrency-verdicts=B.json"],
            "--concurrency-baseline=B.json and --concurrency-verdicts=B.json name the same file, "
            "'B.json': the verdict file would be written over the baseline; give each a path of "
            "its own, e.g. --concurrency-verdicts=verdicts.json",
        ),
        (
            ["--concurrency-baseline=B.json", "--concurrency-report-md=B.json"],
            "the markdown report would be written over the baseline",
        ),
        (
            ["--concurrency-save-baseline=B.json", "--concurrency-report-md=B.json"],
            "--concurrency-save-baseline=B.json and --concurrency-report-md=B.json name the same "
            "file, 'B.json': each would be written over the other",
        ),
        (
            ["--concurrency-save-baseline=new.json", "--benchmark-json=new.json"],
            "--concurrency-save-baseline=new.json and --benchmark-json=new.json name the same file",
        ),
        (
            ["--concurrency-report-md=test_bench.py"],
            "--concurrency-report-md=test_bench.py: 'test_bench.py' exists and is not a markdown "
            "report (a Python source file), so it is left untouched; write to another path, e.g. "
            "--concurrency-report-md=report.md",
        ),
    ],
)
def test_an_output_over_the_baseline_another_output_or_a_source_is_refused_before_the_run(
    pytester, args, why
):
    """~1 s each (refused before collection; 3.6 CPU s at a load of 44): each of these exited 0,
    the file it named replaced (a baseline by verdicts or markdown, a test module by a report)."""
    pytester.makepyfile(test_bench=BENCH)
    (pytester.path / "B.json").write_text(GOOD)
    files = lambda: {p.name: p.read_bytes() for p in pytester.path.glob("*.*")}
    before = files()  # (pytester's own stdout and stderr files have no dot)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--benchmark-max-time=0.05", *args
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1 and why in lines[0], result.stderr.str()
    assert files() == before  # nothing written, nothing replaced


@pytest.mark.parametrize(
    "option, kind, why",
    [
        (
            "--concurrency-verdicts",
            "VERDICTS",
            "exists and is not a verdict file (it is a baseline)",
        ),
        ("--benchmark-json", "BENCHMARK_JSON", "(it is a baseline), so it is left untouched"),
        ("--concurrency-plot", "DIRECTORY", "exists and is not a directory (it is a file)"),
        ("merge OUT", "MARKDOWN", "is not a markdown report (its name does not end in .md"),
        ("--json", "BISECTION", "exists and is not a bisection's JSON (it is a baseline)"),
    ],
)
def test_an_output_over_a_file_of_another_kind_is_one_line(tmp_path, option, kind, why):
    from pytest_concurrency import outputs

    (tmp_path / "b.json").write_text(GOOD)
    with pytest.raises(outputs.OutputError) as info:
        outputs.check([_named(tmp_path, option, "b.json", kind)])
    assert why in str(info.value) and "\n" not in str(info.value)


def _named(tmp_path, option, name, kind):
    from pytest_concurrency import outputs

    return outputs.Named(option, tmp_path / name, getattr(outputs, kind))


@pytest.mark.parametrize(
    "name, content, kind",
    [
        ("report.md", "# my notes\n", "MARKDOWN"),  # any .md: the user named a markdown file
        ("summary", "## Concurrency benchmarks\n\nold report\n", "MARKDOWN"),  # the plugin wrote it
        ("step_summary_1", "", "MARKDOWN"),  # an empty file, as a CI runner creates
        ("v.json", '{"format": "pytest-concurrency verdicts", "version": 1}', "VERDICTS"),
        ("b.json", GOOD, "BASELINE"),
        ("plain.json", '{"benchmarks": [], "machine_info": {}}', "BENCHMARK_JSON"),
        ("out.txt", "anything of pytest-benchmark's to replace", "BENCHMARK_JSON"),
        ("charts", None, "DIRECTORY"),
        ("bisect.json", '{"points": [], "steps": [], "found": [], "error": ""}', "BISECTION"),
    ],
)
def test_an_output_replaces_a_file_of_its_own_kind(tmp_path, name, content, kind):
    from pytest_concurrency import outputs

    if content is None:
        (tmp_path / name).mkdir()
    else:
        (tmp_path / name).write_text(content)
    outputs.check([_named(tmp_path, "--out", name, kind)])  # no error


def test_saving_to_the_baseline_the_run_judges_against_adds_to_it_and_is_allowed(tmp_path):
    from pytest_concurrency import outputs

    (tmp_path / "b.json").write_text(GOOD)
    judged = outputs.Named("--concurrency-baseline", tmp_path / "b.json", noun="the baseline")
    saved = _named(tmp_path, "--concurrency-save-baseline", "b.json", "BASELINE")
    outputs.check([judged, saved])
    with pytest.raises(outputs.OutputError, match="name the same file"):  # a link to it, too
        (tmp_path / "link.json").symlink_to(tmp_path / "b.json")
        outputs.check([judged, _named(tmp_path, "--concurrency-verdicts", "link.json", "VERDICTS")])
