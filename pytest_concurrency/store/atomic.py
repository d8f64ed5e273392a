"""Write files so that a reader sees the old file or the new one, never half of either.

Baselines, reports and charts all go through here: a temporary file in the target's own
directory (so the rename cannot cross file systems), flushed to disk, given the mode of
the file it replaces, then renamed over it. On any error the temporary file is removed
and whatever was at the path before is untouched.

Symbolic links (``link_problem``): a save writes through a link at its path only when the link
points to an existing regular file inside the directory the path names (or below it): a
baseline kept in a shared sub-directory. Any other link (dangling, a loop, to a directory or
device, out of that tree) is refused with one line naming the link and where it points, and no
directory is ever created through a link: a file of the user's, or a path a pull request
planted, must not make a save write somewhere the user did not name. A directory that exists
and that the path reaches through a link (its parent one, say: macOS's ``/tmp``, a results
directory kept on another disk) is the directory the user named, as the system resolves it: the
file is written there, as any program writing that path would.

Saves to one file are serialised (``locked``): an exclusive ``flock`` on ``PATH.lock`` beside the
file (beside the file a link points to), held around the read-modify-write of a baseline, so that
sessions saving to it at once each add their session to the file as the one before left it. The
kernel releases a ``flock`` when its holder dies, so a killed save never blocks the next one; the
holder removes the lock file when done (a waiter that then finds another file at the path, or
none, locks again).
"""

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows: saves are not serialised there
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".lock"


class UnsafeLink(OSError):
    """A save would follow a symbolic link out of the directory it names; the message says which."""


def link_problem(path) -> str | None:
    """Why writing ``path`` would follow a symbolic link the rule above refuses, or None."""
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    if os.path.islink(path):
        real = os.path.realpath(path)
        tree = os.path.join(os.path.realpath(directory), "")
        if not os.path.exists(path):
            why = "which does not exist (or is a loop of links)"
        elif not os.path.isfile(path):
            why = "which is not a regular file"
        elif not real.startswith(tree):
            why = f"outside {directory}"
        else:
            return None
        return (
            f"{path} is a symbolic link to {os.readlink(path)}, {why}; a save does not write "
            f"through it: remove the link, or name the file to write"
        )
    missing = directory
    while not os.path.lexists(missing):  # the directories a save would create
        missing = os.path.dirname(missing)
    if missing != directory and os.path.islink(missing):
        return (
            f"{missing} is a symbolic link to {os.readlink(missing)}, and a save does not create "
            f"directories through a link: create the directory {directory} yourself, or remove "
            f"the link"
        )
    return None


def replace_with(path, produce: Callable[[str], object]) -> str:
    """Call ``produce(tmp_path)`` to write the new content, then move it to ``path``; a symlink
    at ``path`` the rule above allows stays one, and the file it points to is replaced."""
    path = _target(path)
    directory = os.path.dirname(path)
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


def _target(path) -> str:
    """The file a write to ``path`` replaces (through a link the rule allows), its directory made."""
    problem = link_problem(path)
    if problem:
        raise UnsafeLink(problem)
    path = os.path.abspath(os.fspath(path))
    if os.path.islink(path):
        path = os.path.realpath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


@contextlib.contextmanager
def locked(path, waiting: Callable[[], object]) -> Iterator[None]:
    """Hold the exclusive lock on saves to ``path`` (see above); ``waiting()`` is called once if
    another process holds it, then this one waits for it (a Ctrl-C ends the wait)."""
    if fcntl is None:
        yield
        return
    target = _target(path)
    lock = target + LOCK_SUFFIX
    fd = _acquire(lock, waiting)
    try:
        _remove_stale_temps(target)
        yield
    finally:
        try:
            os.unlink(lock)  # while held: a waiter on this file then sees it is gone
        except OSError:
            pass
        os.close(fd)


#: ``replace_with``'s temporary file for a target ``NAME.EXT``: ``.NAME.`` and mkstemp's eight
#: characters, ``.tmpEXT``
_TEMP = r"\.{}\.[a-z0-9_]{{8}}\.tmp{}"


def _remove_stale_temps(path: str) -> None:
    """The temporary files of saves to ``path`` killed while they wrote (SIGKILL, a power cut):
    removed by the next save, under the lock. Every save to a path writes while it holds the
    lock, so a temporary file of that path found by the lock's holder is no live save's."""
    directory = os.path.dirname(path)
    base, ext = os.path.splitext(os.path.basename(path))
    stale = re.compile(_TEMP.format(re.escape(base), re.escape(ext)))
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if stale.fullmatch(name):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass  # another's to remove, or gone


def _acquire(lock: str, waiting: Callable[[], object]) -> int:
    assert fcntl is not None
    told = False
    flags = os.O_RDONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        fd = os.open(lock, flags, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not told:
                    waiting()
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _still_at(fd, lock):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # its holder removed it while this one waited: lock the one there now


def _still_at(fd: int, path: str) -> bool:
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def why_not_written(exc: OSError, path) -> str:
    """Why a write to ``path`` failed, and the fix that error calls for: a full disk is not a
    matter of permissions."""
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    what = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"{what}: free space (or quota) on the file system of {directory!r}, or choose a "
            "path on another one"
        )
    if exc.errno == errno.EROFS:
        return f"{what}: choose a path on a writable file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{what}: choose a path in a writable directory, or fix the permissions of {directory!r}"
    return f"{what}: choose a path in a writable directory"


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
