"""Text from a baseline or report file lands inert: in the markdown report (a CI job summary)
it renders as the same characters, never as HTML, a heading, a table, a link or an image;
in the terminal a control character is shown as its escape, never emitted. In-process, no
pytest session: milliseconds."""

from __future__ import annotations

import json
import re

import pytest
from _documents import document_from_records

from pytest_concurrency import __main__ as cli
from pytest_concurrency.gate import compare as gate
from pytest_concurrency.gate import verdicts as V
from pytest_concurrency.measure.records import Record
from pytest_concurrency.report import escape, markdown, terminal
from pytest_concurrency.store import baseline
from pytest_concurrency.store.history import Baseline

# version-independent (text made inert, in-process): tox runs it on one Python, in its once env
pytestmark = pytest.mark.once

HOSTILE = {
    "<img src=http://x>": "&lt;img src=http:\\/\\/x>",
    "**All gates passed**": "\\*\\*All gates passed\\*\\*",
    "</table><h1>": "&lt;/table>&lt;h1>",
    "\x1b[2J": "\\\\x1b[2J",
    "a\nb": "a\\\\nb",
    "![i](http://x/i.png)": "![i]\\(http:\\/\\/x/i.png)",
    "| cell |": "\\| cell \\|",
    "www.example.org": "www\\.example.org",
    "`x` ~~y~~ _z_ &lt;": "\\`x\\` \\~\\~y\\~\\~ \\_z\\_ &amp;lt;",
    "\u202eevil": "\\\\u202eevil",
}


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_escaping_of_each_hostile_string(text):
    assert escape.markdown(text) == HOSTILE[text]


@pytest.mark.parametrize(
    "text, shown",
    [("\x1b[2J", "\\x1b[2J"), ("a\nb", "a\\nb"), ("\x9b31m", "\\x9b31m"), ("\u202e", "\\u202e")],
)
def test_terminal_escaping_shows_controls(text, shown):
    assert escape.terminal(text) == shown


def test_ordinary_text_is_left_as_it_is():
    line = "ring[m=1000,n=100] on gevent: 1.20 ms -> 1.31 ms, +9.2%, p=0.001 (threshold 5%)"
    assert escape.markdown(line) == line and escape.terminal(line) == line


def _rec(workload: str, backend: str, params: dict, version: str = "1.0") -> Record:
    extra = {"workload": workload, "backend": backend, "params": params, "measure": "time"}
    return Record(
        workload, params, backend, [0.1] * 5, ops=10, backend_version=version, extra=extra
    )


GOOD = _rec("ring", "asyncio", {"n": 10})
GOOD_BEFORE = _rec("ring", "asyncio", {"n": 10}, "\x1b[2J\n## All gates passed")
EVIL = _rec("**All gates passed**", "<img src=http://x>", {"n": "</table><h1>"}, "\x1b[2J")
EVIL_KEY_MD = "\\*\\*All gates passed\\*\\*[n=&lt;/table>&lt;h1>] on &lt;img src=http:\\/\\/x>"


def _result():
    doc = document_from_records([GOOD_BEFORE, EVIL], baseline.current_meta({}, None))
    doc = json.loads(json.dumps(doc))  # as it is read back from a file
    return gate.compare(Baseline.of(doc), [GOOD], doc["pytest_concurrency"], gate.GateSettings())


def test_a_hostile_baseline_renders_inert_in_the_markdown_report():
    result = _result()
    assert [v.status for v in result.verdicts if v.key == EVIL.key] == [V.MISSING]
    md = markdown.render([GOOD], result)
    assert "<" not in md and "\x1b" not in md
    assert "versions changed: asyncio \\\\x1b[2J\\\\n## All gates passed -> 1.0" in md
    # the missing benchmark, in the summary and as its table's title, exactly as it renders
    assert any(line.startswith(f"- {EVIL_KEY_MD}: baseline 100 ms") for line in md.splitlines())
    title = "### \\*\\*All gates passed\\*\\*"
    assert f"{title} [n=&lt;/table>&lt;h1>]" in md.splitlines()
    row = "| &lt;img src=http:\\/\\/x> | (100 ms) |"
    assert any(line.startswith(row) for line in md.splitlines()), md
    # no line of the report starts a block the plugin did not write
    for line in md.splitlines():
        assert re.match(r"(## |### |\| |\|:|\*\*:|\*\*[A-Z]|- |\d+ benchmark|$)", line), line


def test_a_hostile_baseline_renders_inert_in_the_terminal():
    text = terminal.render([GOOD], _result(), width=200, every=True)
    assert "\x1b" not in text
    lines = text.splitlines()
    assert "**All gates passed** [n=</table><h1>]" in lines
    assert any(line.startswith("<img src=http://x>  (100 ms)") for line in lines), text
    evil = "  **All gates passed**[n=</table><h1>] on <img src=http://x>: baseline 100 ms"
    assert any(line.startswith(evil) for line in lines), text
    assert "versions changed: asyncio \\x1b[2J\\n## All gates passed -> 1.0" in text
    assert not any(line.startswith("##") for line in lines)


def test_the_report_command_shows_controls_in_a_file_it_renders(tmp_path, capsys):
    meta = baseline.current_meta({}, None)  # a whole one: the report refuses what the gate would
    doc = document_from_records([_rec("w\x1b[2J", "asyncio\nb", {})], meta)
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["report", str(path), "--width", "120"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "w\\x1b[2J" in out and "asyncio\\nb" in out
