"""One start-up under valgrind for both counted sides of a run against the base.

Each side of ``--concurrency-against ... --concurrency-measure=instructions`` runs the user's
session again under valgrind, and each paid the interpreter's start-up and pytest's imports under
it: seconds of CPU a side that count nothing, and the same on both sides (what differs between
them is imported later: the base's install, first on the path, or the head's stand-in). The run
starts one process under valgrind (``begin``) that pays them once, then forks
each side's counted session when that side asks (``request``): the child takes the side's working
directory, environment, import path and output, and runs pytest as ``python -m pytest`` would.
valgrind follows ``fork()``, and the child counts as a counted session started alone does. The two
sides' sessions also start from one heap (by construction; not measured apart).

What the server keeps imported, the sides share: pytest and what it imports, and the standard
library's modules; the plugins' own modules (this package's included) it forgets, for each session
to import as it loads its plugins. So it serves no one when the base's install holds a module it
kept (a suite against an older pytest or pluggy), and each side then starts its own valgrind.

Lifetimes: the server dies with the run (PR_SET_PDEATHSIG), a child with the server; a child whose
side is gone (its connection closed: killed) is killed with its process group. A Ctrl-C reaches
each child through its side (``Forked.send_signal``, by child_sessions.py's one policy); the
server, told to stop, stops once its children have ended.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import runpy
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile

from .. import lifetime
from ..backends import child_env

READY = "ready"
_SAFE_PATH = getattr(sys.flags, "safe_path", False)  # -P (3.11+): no directory first on the path
#: Of the server's start-up: it kept a module the base's install holds (its line says which)
SERVES_NO_ONE = 3
POLL_S = 0.1
#: How long the server's start-up may take before the sides give up on it and start their own:
#: importing pytest under valgrind took 5-8 s here, quiet; a start-up that hangs must not hang
#: the run
READY_S = 300.0
#: What a request (pytest's arguments, the side's environment) may take: a SOCK_SEQPACKET message
#: is whole or refused
REQUEST_MAX = 1 << 20


# -- in the run against the base ------------------------------------------------------------------


def begin(
    children, argv_under_valgrind, env: dict, cwd, log, sides, ready_within: float = READY_S
) -> dict[str, int] | None:
    """Start the server (``argv_under_valgrind``: ``server_argv`` wrapped by callgrind) in
    ``children`` (child_sessions.Children), a socket pair for each of ``sides``; once it has
    imported what the sides share, each side's end of its pair (a file descriptor, to hand to
    that side alone), or None (said why) when it serves no one, or has not said it is ready
    within ``ready_within`` seconds (then it is killed). A pair, not a path: only the processes
    given an end can ask, and no path length limits it (AF_UNIX's 107 bytes)."""
    pairs = {side: socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for side in sides}
    ends = [theirs.detach() for theirs, _ in pairs.values()]
    with open(log, "wb") as err:
        proc = children.start(
            [*argv_under_valgrind, f"--sides={','.join(map(str, ends))}"],
            cwd=cwd,
            env=env,
            fds=tuple(ends),
            quiet_start=True,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    if select.select([proc.stdout], [], [], ready_within)[0]:
        said = proc.stdout.readline().decode(errors="replace").strip()
    else:
        proc.kill()
        proc.wait()
        said = f"the shared start-up was not ready in {ready_within:g} s (killed): see {log}"
    proc.stdout.close()
    if said == READY:
        return {side: ours.detach() for side, (_, ours) in pairs.items()}
    for _, ours in pairs.values():
        ours.close()
    print(
        "pytest-concurrency: each side starts its own valgrind: "
        + (said or f"the shared start-up ended ({lifetime.how_it_ended(proc.wait())}): see {log}"),
        flush=True,
    )
    return None


def server_argv(not_imported) -> list[str]:
    """The server's command line (not yet under valgrind): ``not_imported`` are the top-level
    names of the base's install."""
    from subprocess import _args_from_interpreter_flags  # type: ignore[attr-defined]

    names = ",".join(sorted(not_imported))
    run = f"import sys\nfrom {__name__} import main\nsys.exit(main())"  # imported: not -m's twin
    return [sys.executable, *_args_from_interpreter_flags(), "-c", run, f"--not={names}"]


# -- in a side's launcher ----------------------------------------------------------------------------


class Server:
    """A side's end of its pair with the run's server (``fd``, handed to it): the server's pid
    (the counted session's parent), where callgrind writes its dumps, and, once asked, the session
    it forked (``request``)."""

    def __init__(self, fd: int):
        self._conn = socket.socket(fileno=fd)
        said = self._conn.recv(REQUEST_MAX)  # the server's first word on every pair
        if not said:
            raise RuntimeError("the shared start-up under valgrind ended before this side asked")
        hello = json.loads(said)
        self.pid: int = hello["pid"]
        self.directory: str = hello["directory"]

    def request(self, args: list[str], env: dict, cwd: str, log: str | None) -> Forked:
        """pytest's ``args`` run in ``cwd`` with ``env``, its output in ``log`` (None: this
        process's): forked by the server, in a session of its own."""
        out = open(log, "wb") if log is not None else None
        try:
            fds = [out.fileno()] * 2 if out is not None else [1, 2]
            message = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
            socket.send_fds(self._conn, [message], fds)
            reply = self._conn.recv(64)
        finally:
            if out is not None:
                out.close()
        if not reply:
            raise RuntimeError(
                "the shared start-up under valgrind ended before it forked the session"
            )
        return Forked(self._conn, int(reply), args)


class Forked:
    """A session the server forked, used as child_sessions.Children uses a ``subprocess.Popen``:
    its pid (its group's too), and its exit status when the server reports it."""

    def __init__(self, conn: socket.socket, pid: int, args: list[str]):
        self.pid, self.args, self._conn = pid, args, conn
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._read()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def _read(self) -> None:
        said = self._conn.recv(64)
        # nothing: the server died, and its child with it (PR_SET_PDEATHSIG)
        self.returncode = int(said) if said else -signal.SIGKILL
        self._conn.close()


# -- the server, under valgrind ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=__name__)
    ap.add_argument("--sides", required=True, help="its end of each side's pair")
    ap.add_argument("--not", dest="not_imported", default="")
    args = ap.parse_args(argv)
    rest = _path_after_start_up()
    _forget_plugins()
    clash = sorted(set(filter(None, args.not_imported.split(","))) & set(sys.modules))
    if clash:
        print(f"the base's install holds {', '.join(clash)}, which pytest imports", flush=True)
        return SERVES_NO_ONE
    conns = [socket.socket(fileno=int(fd)) for fd in args.sides.split(",")]
    hello = {"pid": os.getpid(), "directory": child_env.get(child_env.CALLGRIND_DIR) or ""}
    for conn in conns:
        conn.send(json.dumps(hello).encode())
    print(READY, flush=True)
    asked = _serve(conns)
    if asked is None:
        return 0
    _become(asked, rest)
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)  # raises SystemExit
    return 0


def _forget_plugins() -> None:
    """What this process imported of pytest plugins' distributions (this package, to run it), out
    of ``sys.modules``: a session imports them again as it loads its plugins, marked for assertion
    rewriting first, as in any session (pytest warns of a plugin imported before). What stays is
    the start-up the sides share: pytest and what it imports, the standard library's modules."""
    plugins = {ep.module.split(".")[0] for ep in importlib.metadata.entry_points(group="pytest11")}
    for name in [m for m in sys.modules if m.split(".")[0] in plugins]:
        del sys.modules[name]


def _path_after_start_up() -> list[str]:
    """``sys.path`` past what a process's own start-up put first (its directory, PYTHONPATH):
    what a forked session's path goes on with (``_become``)."""
    first = [] if _SAFE_PATH else sys.path[:1]
    first += [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in sys.path if p not in first]


def _serve(conns: list[socket.socket]) -> dict | None:
    """Fork each side's session when it asks, until every side is done, or told to stop (SIGINT,
    SIGTERM) with none running. In a forked child: its request; in the server: None."""
    stop: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    children: dict[int, socket.socket] = {}
    sel = selectors.DefaultSelector()
    for conn in conns:
        sel.register(conn, selectors.EVENT_READ)  # no data: it has not asked yet
    dies_with_me = lifetime.with_parent()
    while (sel.get_map() or children) and not (stop and not children):
        for key, _ in sel.select(POLL_S):
            conn = key.fileobj  # type: ignore[assignment]  # only sockets are registered
            sel.unregister(conn)
            if key.data is not None:  # a side sends nothing after its request: it is gone
                _kill_group(key.data)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(conn, REQUEST_MAX, 2)
            except ConnectionResetError:  # gone with the server's first word unread
                message = b""
            if not message:  # gone before it asked
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                sel.close()
                for other in conns:
                    other.close()
                dies_with_me()
                asked = json.loads(message)
                asked["fds"] = fds
                return asked
            for fd in fds:
                os.close(fd)
            conn.send(str(pid).encode())
            children[pid] = conn
            sel.register(conn, selectors.EVENT_READ, pid)
        for pid, code in _reaped(children):
            conn = children.pop(pid)
            with contextlib.suppress(KeyError):
                sel.unregister(conn)
            with contextlib.suppress(OSError):
                conn.send(str(code).encode())
            conn.close()
    return None


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # before its setsid, its group is not its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
            return


def _reaped(children) -> list[tuple[int, int]]:
    ended = []
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ended.append((pid, os.waitstatus_to_exitcode(status)))
    return ended


def _become(asked: dict, rest: list[str]) -> None:
    """In the forked child: the side's session, as ``python -m pytest`` started in its directory
    with its environment would be (its import path, its output; Ctrl-C ignored until its session
    has started, as child_sessions.py starts any)."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # lifetime.take_ctrl_c, once its session started
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out, err = asked["fds"]
    for fd, to in ((out, 1), (err, 2)):
        os.dup2(fd, to)
    for fd in {null, out, err}:
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):  # as a start-up on that output would buffer it
            stream.reconfigure(line_buffering=stream.isatty())
    os.chdir(asked["cwd"])
    os.environ.clear()
    os.environ.update(asked["env"])
    first = [] if _SAFE_PATH else [os.getcwd()]
    first += [os.path.abspath(p) for p in asked["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = list(dict.fromkeys([*first, *rest]))
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    tempfile.tempdir = None  # TMPDIR is the side's
    sys.argv = ["pytest", *asked["args"]]
