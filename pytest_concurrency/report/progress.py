"""A status line for long benchmark runs: which benchmark runs, on which model, how far.

    benchmarks/test_seeds.py ....... [12/61, round 4/16] gevent: ring[capacity=0,m=1000,n=20]

A multiprocessing case can take 20 s, and pytest's dots say nothing meanwhile. The status
is drawn after the dots and erased before pytest writes again (the cursor position is saved
and restored, so pytest's own line and its "[ 37%]" stay as they were). It is updated
between rounds, never inside one, so it does not add to what is timed. Quiet unless stdout
is a terminal, and quiet on CI (``CI`` set, as CI services do): a log gets only noise.
"""

import contextlib
import os
import sys

SAVE, RESTORE, CLEAR = "\0337", "\0338", "\033[K"  # DEC save/restore cursor, erase to end of line


def wanted(terminal: bool, verbosity: int) -> bool:
    """Whether to draw it: pytest writes to a ``terminal`` (not -p no:terminal), not under -q, not
    on CI, and stdout is a terminal."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return False
    stream = sys.__stdout__
    return stream is not None and stream.isatty() and terminal and verbosity >= 0


class Progress:
    """One session's status line; ``total`` benchmarks are expected. ``writer()``: pytest's
    terminal writer; ``capture``: pytest's capture manager, or None."""

    def __init__(self, writer, capture, total: int):
        self._writer = writer
        self._capture = capture
        self._total = total
        self._index = 0
        self._what = ""
        self._shown = False

    def start(self, backend: str, case: str) -> None:
        self._index += 1
        self._what = f"{backend}: {case}"  # the model first: a cut line loses params, not it
        self._show("")

    def round(self, done: int, total: int) -> None:
        self._show(f", round {done}/{total}" if done <= total else ", memory per task")

    def end(self) -> None:
        if self._shown:
            self._write(RESTORE + CLEAR)
            self._shown = False

    def _show(self, detail: str) -> None:
        writer = self._writer()
        room = writer.fullwidth - writer.width_of_current_line - 2  # never wrap: restore would miss
        text = f" [{self._index}/{self._total}{detail}] {self._what}"
        if room < 20:
            return
        if len(text) > room:
            text = text[: room - 1] + "…"
        self._write((RESTORE + CLEAR if self._shown else SAVE) + text)
        self._shown = True

    def _write(self, text: str) -> None:
        # During a test, output is captured; the status must reach the terminal itself.
        capman = self._capture
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            terminal = sys.__stdout__  # None when Python started without one (pythonw)
            if terminal is not None:
                terminal.write(text)
                terminal.flush()
