"""Where a package module's tests are: the table in docs/contributing.md, made from the tests.

Two sources, each a fact about the test files, not a judgement:

- *imports*: the test file imports the module (``ast``; what ``tests/test_module_map.py``
  recomputes on every run, so the column cannot go stale);
- *sessions*: a process the test file starts (a real pytest session, a worker, the report
  command) imported the module. Recorded by running the tests with an import trace
  (``--trace``: every Python process started for a test writes, as it ends, the package's
  modules it imported); a module every session imports is said so rather than listed.

Regenerate (about 25 minutes on the 2-core machine, beside other work):

    python tests/module_map.py --trace   # the fast tier, traced; then the table is rewritten
    python tests/module_map.py           # the table again from the last trace (seconds)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_concurrency"
TESTS = ROOT / "tests"
DOC = ROOT / "docs" / "contributing.md"
SESSIONS = TESTS / "data" / "module_map_sessions.json"  # the last trace: test file -> modules
BEGIN, END = "<!-- module-tests: begin -->", "<!-- module-tests: end -->"
#: a module imported by the sessions of at least this share of the test files that start any
EVERY = 0.8
MOST = 5  # files listed in a cell, the rest counted

SITECUSTOMIZE = """
import atexit, os, sys

def _dump():
    test, out = os.environ.get("MODULE_MAP_TEST"), os.environ.get("MODULE_MAP_OUT")
    if not test or not out or os.environ.get("MODULE_MAP_RUNNER") == str(os.getpid()):
        return  # no test's process, or the test runner's own (an xdist worker)
    names = [m for m in list(sys.modules) if m.startswith("pytest_concurrency")]
    try:
        with open(os.path.join(out, f"{test}.{os.getpid()}"), "w") as fh:
            fh.write("\\n".join(names))
    except OSError:
        pass

atexit.register(_dump)
"""

PLUGIN = """
import os, sys
import pytest

def _ours():
    return {m for m in list(sys.modules) if m.startswith("pytest_concurrency")}

@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    os.environ["MODULE_MAP_TEST"] = item.path.name
    os.environ["MODULE_MAP_RUNNER"] = str(os.getpid())
    before = _ours()
    yield
    new = _ours() - before  # what the test itself imported first, in the runner's process
    if new:
        name = f"{item.path.name}.{os.getpid()}-{id(item)}"
        with open(os.path.join(os.environ["MODULE_MAP_OUT"], name), "w") as fh:
            fh.write("\\n".join(sorted(new)))
"""


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def shown(name: str) -> str:
    """``pytest_concurrency.roles.again`` as the table shows it: ``roles/again.py``."""
    path = modules()[name].relative_to(PACKAGE)
    return str(path)


def test_files() -> list[Path]:
    return sorted(TESTS.glob("test_*.py"))


def imported_by(path: Path, known: set[str]) -> set[str]:
    """The package's modules ``path`` imports (``from X import y`` counts ``X.y`` when a module),
    and their packages."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module in known:
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            found |= subs
            if len(subs) < len(node.names):
                found.add(node.module)
    # importing a module imports its packages
    return {".".join(name.split(".")[:n]) for name in found for n in range(1, name.count(".") + 2)}


def imports() -> dict[str, list[str]]:
    """Module -> the test files that import it."""
    known = set(modules())
    out: dict[str, list[str]] = defaultdict(list)
    for path in test_files():
        for name in imported_by(path, known):
            out[name].append(path.name)
    return {m: sorted(files) for m, files in out.items()}


def trace() -> None:
    """Run the fast tier with every process started for a test writing what it imported."""
    with tempfile.TemporaryDirectory() as tmp:
        site, out = Path(tmp, "site"), Path(tmp, "out")
        site.mkdir()
        out.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (site / "module_map_plugin.py").write_text(PLUGIN)
        env = {**os.environ, "PYTHONPATH": str(site), "MODULE_MAP_OUT": str(out)}
        command = [sys.executable, "-m", "pytest", "-p", "module_map_plugin", str(TESTS)]
        command += [
            "-m",
            "not slow",
            "-n",
            "2",
            "-q",
            "--benchmark-disable",
            "-p",
            "no:cacheprovider",
        ]
        subprocess.run(command, cwd=ROOT, env=env, check=False)
        save_sessions(read_dumps(out))


def read_dumps(directory: Path) -> dict[str, list[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for dump in directory.iterdir():
        test = dump.name.rpartition(".")[0]
        found[test] |= set(dump.read_text().split())
    return {t: sorted(m) for t, m in sorted(found.items())}


def save_sessions(found: dict[str, list[str]]) -> None:
    SESSIONS.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


def sessions() -> tuple[dict[str, list[str]], int]:
    """Module -> the test files whose processes imported it (from the last trace), those that
    import the fewest of the package's modules first (the most particular to it); and how many
    test files started a process at all."""
    found = json.loads(SESSIONS.read_text()) if SESSIONS.exists() else {}
    out: dict[str, list[str]] = defaultdict(list)
    for test, names in sorted(found.items(), key=lambda t: (len(t[1]), t[0])):
        for name in names:
            out[name].append(test)
    return dict(out), len(found)


def named_after(name: str) -> list[str]:
    """The test files named after the module or its package: ``roles/counting.py`` ->
    ``test_counting.py``, ``test_roles.py``."""
    stems = [part.lstrip("_") for part in name.split(".")[1:]][::-1]
    files = [f for stem in stems for f in (f"test_{stem}.py", f"test_{stem}s.py")]
    return list(dict.fromkeys(f for f in files if (TESTS / f).exists()))


def cell(files: list[str], everyone: int = 0) -> str:
    if everyone and len(files) >= EVERY * everyone:
        return f"every real session ({len(files)} of {everyone} files)"
    shown_files = ", ".join(f"`{f}`" for f in files[:MOST])
    return shown_files + (f" and {len(files) - MOST} more" if len(files) > MOST else "")


def table() -> str:
    by_import = imports()
    by_session, starting = sessions()
    rows = [
        "| module | named after it (or its package) | tests that import it | tests whose processes import it |",
        "|---|---|---|---|",
    ]
    for name in modules():
        imported = by_import.get(name, [])
        ran = [f for f in by_session.get(name, []) if f not in imported]
        rows.append(
            f"| `{shown(name)}` | {cell(named_after(name))} | {cell(imported)} | "
            f"{cell(ran, starting)} |"
        )
    return "\n".join(rows)


def write() -> None:
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="store_true", help="run the fast tier traced first")
    args = parser.parse_args(argv)
    if args.trace:
        trace()
    write()
    print(f"{DOC.relative_to(ROOT)}: the module -> tests table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
