"""tox's inline plugin: let tox find every CPython 3.10+ on this machine, pyenv or not.

pyenv puts one shim per interpreter on PATH (python3.10, python3.12, ...), but a shim only
runs the versions PYENV_VERSION (or the global version file) selects; the others fail, and
tox reports them as "could not find python interpreter" and skips them. So, before tox
looks for interpreters, we select every installed 3.10+ version, the current one first so
that ``python3`` stays what it was. Then we say which envs will run, and fail loudly when an
interpreter is installed but does not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from tox.plugin import impl

_ENV = re.compile(r"^py3(\d+)$")


def _pyenv_versions() -> list[str]:
    """PYENV_VERSION that selects every installed CPython 3.10+ too, or [] without pyenv."""
    if shutil.which("pyenv") is None:
        return []

    def lines(*args: str) -> list[str]:
        run = subprocess.run(["pyenv", *args], capture_output=True, text=True, check=False)
        return run.stdout.split() if run.returncode == 0 else []

    # "3.11.7:3.10.13" when set already: the user's order stays first
    current = [v for line in lines("version-name") for v in line.split(":") if v]
    installed = [v for v in lines("versions", "--bare") if re.fullmatch(r"3\.(\d{2,})\.\d+", v)]
    installed.sort(key=lambda v: tuple(int(p) for p in v.split(".")))
    return list(dict.fromkeys(current + installed))


def _runs(exe: str) -> str | None:
    """Why ``exe`` does not run, or None when it does."""
    try:
        run = subprocess.run(
            [exe, "-c", "pass"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return (
        None
        if run.returncode == 0
        else (run.stderr.strip().splitlines() or ["exit status %d" % run.returncode])[-1]
    )


@impl
def tox_add_core_config(core_conf, state) -> None:
    versions = _pyenv_versions()
    if versions and os.environ.get("PYENV_VERSION") != ":".join(versions):
        os.environ["PYENV_VERSION"] = ":".join(versions)  # tox's interpreter discovery runs shims
        print(
            f"toxfile.py: PYENV_VERSION={os.environ['PYENV_VERSION']} (every pyenv CPython 3.10+)"
        )
    wanted = [
        (name, f"python3.{m.group(1)}") for name in core_conf["env_list"] if (m := _ENV.match(name))
    ]
    found, absent, broken = [], [], []
    for name, exe in wanted:
        if shutil.which(exe) is None:
            absent.append(name)
        elif (why := _runs(exe)) is not None:
            broken.append(f"{exe} is on PATH but does not run: {why}")
        else:
            found.append(name)
    if broken:
        raise RuntimeError(
            "toxfile.py: "
            + "; ".join(broken)
            + ". Repair or uninstall it (with pyenv: `pyenv rehash`, "
            "or `pyenv install 3.X` again), or run only the others with `tox -e "
            + ",".join(found)
            + "`."
        )
    if not found:
        raise RuntimeError(
            "toxfile.py: no CPython 3.10+ found (looked for "
            + ", ".join(exe for _, exe in wanted)
            + " on PATH). "
            "Install one (python.org, your OS's packages, or `pyenv install 3.12`)."
        )
    print(
        f"toxfile.py: testing on {', '.join(found)}"
        + (f"; not installed, skipped: {', '.join(absent)}" if absent else "")
    )
