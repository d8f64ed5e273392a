"""The package's layers, read from its source (ast, nothing imported).

Data flows down: backends -> workloads -> measure -> runner/native -> gate -> report -> the
plugin glue at the top level; store/ (what is stored) is beside gate/, which reads it. A module
may import its own layer or a lower one, never a higher one, and no chain of imports may come
back to where it started. Lazy imports inside functions count: they are dependencies all the
same, only deferred.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_concurrency

# version-independent (the package's source, read with ast): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

PACKAGE = Path(pytest_concurrency.__file__).parent

#: Lowest first. A top-level module (plugin, cases, plain_tests, options, settings, session_end,
#: __main__) is glue: layer 7, as are the role objects (roles/) that implement the plugin's hooks.
#: exit_codes and lifetime import nothing of the package: every layer may name an exit status, and
#: start a child process that dies with its parent. Nor does benchmark_adapter, the one module that
#: touches pytest-benchmark's internals: every layer that reads a benchmark fixture or
#: pytest-benchmark's session does it through that one.
GLUE = 7
LAYERS = {
    "exit_codes": 0,
    "lifetime": 0,
    "benchmark_adapter": 0,
    "backends": 1,
    "workloads": 2,
    "measure": 3,
    "runner": 4,
    "native": 4,
    "gate": 5,
    "store": 5,  # beside gate/, importing nothing of it (below)
    "report": 6,
    "roles": GLUE,
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (submodules named in ``from X import y`` included)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in files)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                submodules = {f"{base}.{a.name}" for a in node.names} & files.keys()
                deps.update(submodules)
                if (
                    len(submodules) < len(node.names) and base in files
                ):  # names taken from base itself
                    deps.add(base)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], GLUE) if len(parts) > 1 else GLUE


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
        for m, deps in graph.items()
        for d in deps
        if layer(d) > layer(m)
    )


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(PACKAGE)) == []


def test_no_layer_imports_a_higher_one():
    assert upward_imports(import_graph(PACKAGE)) == []


def test_every_subpackage_has_a_layer():
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages <= LAYERS.keys(), f"give {sorted(packages - LAYERS.keys())} a place in LAYERS"


def test_the_top_level_holds_only_the_glue_the_exit_statuses_and_the_benchmark_adapter():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == [
        "__init__.py",
        "__main__.py",
        "benchmark_adapter.py",
        "bisection.py",
        "cases.py",
        "exit_codes.py",
        "lifetime.py",
        "options.py",
        "outputs.py",
        "plain_tests.py",
        "plugin.py",
        "session_end.py",
        "settings.py",
        "sharding.py",
    ]


def _package(tmp_path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checks_see_a_cycle_through_a_lazy_import_and_an_upward_import(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "measure/__init__.py": "",
            "measure/clock.py": "def f():\n    from ..runner import worker\n",
            "runner/__init__.py": "",
            "runner/worker.py": "from ..measure import clock\n",
            "workloads/__init__.py": "from pkg.gate import verdicts\n",
            "gate/__init__.py": "",
            "gate/verdicts.py": "",
        },
    )
    graph = import_graph(root)
    assert cycles(graph) == [["pkg.measure.clock", "pkg.runner.worker"]]
    assert upward_imports(graph) == [
        "pkg.measure.clock (layer 3) imports pkg.runner.worker (layer 4)",
        "pkg.workloads (layer 2) imports pkg.gate.verdicts (layer 5)",
    ]


def test_storing_imports_nothing_of_the_judging():
    """store/ and gate/ share a layer; the gate reads what is stored, never the other way round."""
    graph = import_graph(PACKAGE)
    assert [
        f"{m} imports {d}"
        for m, deps in sorted(graph.items())
        if m.startswith("pytest_concurrency.store")
        for d in sorted(deps)
        if d.startswith("pytest_concurrency.gate")
    ] == []
