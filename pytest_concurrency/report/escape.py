"""Text from files made inert where it lands: one function per destination.

Benchmark names, backends, params, versions and notes may come from a baseline or a report
file that someone other than the user wrote (a pull request's baseline, a downloaded
artifact). Every renderer passes each piece of text through the function of its destination,
so that such a file can neither move the terminal's cursor nor forge a line of a CI job
summary (a heading, a table, "All gates passed", an image loaded from another host).
"""

import re
import unicodedata

# Characters that act instead of showing: C0/C1 controls (ESC starts a terminal sequence, a
# newline would start a new markdown block), DEL, line and paragraph separators, and the bidi
# controls that reorder what a reader sees ("Trojan source").
_ACTING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _shown(ch: str) -> str:
    return (
        repr(ch)[1:-1] if ch.isascii() or unicodedata.category(ch) == "Cc" else f"\\u{ord(ch):04x}"
    )


def visible(text: str) -> str:
    """``text`` with every acting character written as its escape (``\\x1b``, ``\\n``)."""
    return _ACTING.sub(lambda m: _shown(m.group()), str(text))


terminal = visible  # for a terminal or a CI log: control characters shown, never emitted


# Markdown that a line of text could start: emphasis, code, strike-through, a table cell's end,
# HTML and entities (`<`, `&`), escapes of our own escapes (`\`).
_MARKDOWN = {
    "\\": "\\\\",
    "*": "\\*",
    "_": "\\_",
    "`": "\\`",
    "~": "\\~",
    "|": "\\|",
    "<": "&lt;",
    "&": "&amp;",
}
_MARKDOWN_RE = re.compile("[" + re.escape("".join(_MARKDOWN)) + "]")
# Links and images need `](`; GitHub makes links of bare `scheme://` and `www.` too: each is
# broken by an escape that renders as the same character. (`name@host` still becomes a mailto
# link: GitHub finds those after escapes are undone, and nothing is loaded from it.)
_LINKS = re.compile(r"\]\(|://|(?i:\bwww)\.")


def _unlink(m: re.Match) -> str:
    s = m.group()
    return {"](": "]\\(", "://": ":\\/\\/"}.get(s, s[:-1] + "\\.")


def markdown(text: str) -> str:
    """For GitHub markdown (a table cell, a list item, a heading's text): renders as the same
    characters, never as markup; a newline is shown as ``\\n`` rather than starting a block."""
    escaped = _MARKDOWN_RE.sub(lambda m: _MARKDOWN[m.group()], visible(text))
    return _LINKS.sub(_unlink, escaped)
