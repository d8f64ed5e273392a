"""Write files so that a reader sees the old file or the new one, never half of either.

Baselines, reports and charts all go through here: a temporary file in the target's own
directory (so the rename cannot cross file systems), flushed to disk, given the mode of
the file it replaces, then renamed over it. On any error the temporary file is removed
and whatever was at the path before is untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable


def replace_with(path, produce: Callable[[str], object]) -> str:
    """Call ``produce(tmp_path)`` to write the new content, then move it to ``path``; a symlink
    at ``path`` stays one, and the file it points to is what is replaced."""
    path = os.path.realpath(os.fspath(path))
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base, ext = os.path.splitext(os.path.basename(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{base}.", suffix=f".tmp{ext}")
    os.close(fd)
    try:
        produce(tmp)
        _fsync_file(tmp)
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    return path


def write_text(path, text: str) -> str:
    def produce(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return replace_with(path, produce)


def _mode_for(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777  # keep the mode of the file we replace
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    # makes the rename itself durable; not possible on every platform, harmless to skip
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
