"""Every package module has tests you find by its name: docs/contributing.md's module -> tests
table (made by tests/module_map.py) has a row for each module and names only test files that
exist, and its imports column is what the test files import today."""

from __future__ import annotations

import re

import module_map
import pytest

# version-independent (the tests' and the package's source, read with ast): once
pytestmark = pytest.mark.once


def rows() -> dict[str, list[str]]:
    """The table as written: module -> its cells."""
    text = module_map.DOC.read_text()
    assert module_map.BEGIN in text and module_map.END in text, "the table's markers are gone"
    body = text.split(module_map.BEGIN, 1)[1].split(module_map.END, 1)[0]
    out = {}
    for line in body.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        out[cells[0].strip("`")] = cells[1:]
    return out


def test_every_module_has_a_row_and_no_row_is_of_a_module_gone():
    written = set(rows())
    actual = {module_map.shown(name) for name in module_map.modules()}
    assert sorted(actual - written) == [], "regenerate: python tests/module_map.py"
    assert sorted(written - actual) == [], "regenerate: python tests/module_map.py"


def test_every_module_names_a_test_file_and_every_file_named_exists():
    existing = {p.name for p in module_map.test_files()}
    for module, cells in rows().items():
        named = set(re.findall(r"`(test_\w+\.py)`", " ".join(cells)))
        assert named or "every real session" in cells[2], f"{module}: no test names it"
        assert named <= existing, f"{module}: {sorted(named - existing)} do not exist"


def test_the_name_and_imports_columns_are_what_the_tests_are_today():
    by_import = module_map.imports()
    written = rows()
    stale = {}
    for name in module_map.modules():
        want = [
            module_map.cell(module_map.named_after(name)),
            module_map.cell(by_import.get(name, [])),
        ]
        have = written.get(module_map.shown(name), ["", ""])[:2]
        if have != want:
            stale[module_map.shown(name)] = (have, want)
    assert stale == {}, "regenerate: python tests/module_map.py"


def test_the_table_is_the_one_the_generator_makes(tmp_path, monkeypatch):
    # the generator rewrites only what is between the markers
    doc = tmp_path / "page.md"
    doc.write_text(f"before\n{module_map.BEGIN}\nold\n{module_map.END}\nafter\n")
    monkeypatch.setattr(module_map, "DOC", doc)
    module_map.write()
    text = doc.read_text()
    assert text.startswith(f"before\n{module_map.BEGIN}\n| module |")
    assert text.endswith(f"{module_map.END}\nafter\n") and "old" not in text
