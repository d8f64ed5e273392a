"""toxfile.py, tox's inline plugin: every CPython 3.10+ found, pyenv's too, or a loud failure.

Run against fake ``pyenv`` and ``python3.X`` executables on PATH; tox itself is not needed
(its ``impl`` decorator is stubbed).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

# version-independent (toxfile.py against fake executables): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def toxfile(monkeypatch):
    plugin = types.ModuleType("tox.plugin")
    plugin.impl = lambda fn: fn
    monkeypatch.setitem(sys.modules, "tox", types.ModuleType("tox"))
    monkeypatch.setitem(sys.modules, "tox.plugin", plugin)
    spec = importlib.util.spec_from_file_location("toxfile_under_test", ROOT / "toxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", str(path))
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    return path


def _exe(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


def _fake_pyenv(directory: Path) -> None:
    _exe(
        directory,
        "pyenv",
        """
case "$1" in
  version-name) echo "${PYENV_VERSION:-3.11.7}" ;;
  versions) printf 'system\\n2.7.18\\n3.9.18\\n3.12.1\\n3.10.13\\n3.11.7\\n3.13.0\\n' ;;
esac""",
    )


def test_pyenv_versions_are_all_selected_the_current_one_first(toxfile, bin_dir, capsys):
    _fake_pyenv(bin_dir)
    for minor in (10, 11, 12, 13):
        _exe(bin_dir, f"python3.{minor}", "exit 0")
    toxfile.tox_add_core_config(
        {"env_list": ["py310", "py311", "py312", "py313", "py314", "bench"]}, None
    )
    assert os.environ["PYENV_VERSION"] == "3.11.7:3.10.13:3.12.1:3.13.0"
    out = capsys.readouterr().out
    assert "testing on py310, py311, py312, py313; not installed, skipped: py314" in out


def test_a_users_pyenv_version_stays_first(toxfile, bin_dir, monkeypatch):
    _fake_pyenv(bin_dir)
    _exe(bin_dir, "python3.12", "exit 0")
    monkeypatch.setenv("PYENV_VERSION", "3.12.1")
    toxfile.tox_add_core_config({"env_list": ["py312"]}, None)
    assert os.environ["PYENV_VERSION"] == "3.12.1:3.10.13:3.11.7:3.13.0"


def test_an_interpreter_that_does_not_run_stops_tox_by_name(toxfile, bin_dir):
    _exe(bin_dir, "python3.11", "exit 0")
    _exe(bin_dir, "python3.12", "echo 'pyenv: python3.12: command not found' >&2; exit 127")
    with pytest.raises(
        RuntimeError,
        match=r"python3\.12 is on PATH but does not run: pyenv: python3\.12: "
        r"command not found.*run only the others with `tox -e py311`",
    ):
        toxfile.tox_add_core_config({"env_list": ["py311", "py312"]}, None)


def test_no_interpreter_at_all_stops_tox_saying_how_to_get_one(toxfile, bin_dir):
    with pytest.raises(
        RuntimeError, match=r"no CPython 3\.10\+ found .*python3\.10, python3\.11.*Install one"
    ):
        toxfile.tox_add_core_config({"env_list": ["py310", "py311"]}, None)
