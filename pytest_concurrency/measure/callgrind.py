"""The instructions instrument: count the CPU instructions of each round under valgrind's callgrind.

Wall time on a shared machine moves by 20-50% for seconds to minutes with no change in the
code; the instructions a round executes do not. Under callgrind (no cache simulation, hash
seed pinned) a gevent ring of 20 x 1,000 hops costs the same count in every process to
within 0.002%, and its rounds agree to 0.07%.

How a round is bracketed, from plain Python: callgrind is started with
``--zero-before=sched_get_priority_max --dump-before=sched_get_priority_min``, two libc
functions nothing else here calls. ``Counter.__call__`` calls the second (callgrind writes
the counts since the last zero to ``callgrind.PID.N`` and zeroes them), reads that file's
total, then calls the first (zero again, so reading the file is never counted). A round is
the difference of two readings, as with a clock: pytest-benchmark's own rounds use it as
their timer, unchanged.

Where valgrind runs: workload cases are counted in worker processes (``fresh_process``: a
process forked per case, see isolate.py and worker.py), which the session starts under
``command`` (``worker_command``); the session itself runs at full speed. A plain benchmark
test is counted in the session's own process, so a session that has one runs again whole
under ``command`` (roles/counting.py; its start-up, imports and collection are executed, never
counted), and its children are traced, except the IO workload's latency server and the
plain workers that run the memory pass and the kernel figures (``memory_apart``), whose
work is not counted.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys

from .. import lifetime
from ..backends import child_env, scratch
from ..exit_codes import Exit
from ..workloads import _live_memory
from . import (
    PROFILE_HANDED_OVER,
    PROFILE_HERE,
    PROFILE_NONE,
    Instrument,
    client_request,
    measuring_side,
    profile,
)

ENV_DIR = child_env.CALLGRIND_DIR  # where dumps go; set only for a counted process
LATE_ENV = child_env.CALLGRIND_LATE  # set: started with --instr-atstart=no (``command``)
ZERO_FN = "sched_get_priority_max"
DUMP_FN = "sched_get_priority_min"
#: A process started with this argument counts nothing and is not traced (the memory pass
#: runs in such a worker, see runner/worker.py); nor is the IO workload's latency server.
UNTRACED_FLAG = "--plain"
HASH_SEED = "0"  # str/bytes hashes decide dict and set layouts, and so the count
#: A session counted whole (your plain tests) allocates with the C library's malloc, unless
#: PYTHONMALLOC says otherwise: with pymalloc a round's count depended on whether a pool of its
#: objects emptied (and was given back and set up again) within it, which is decided by where
#: earlier objects landed. A test's layouts then counted in two or three states 1.2% apart
#: (``_PyObject_Free``), as large as a 1% change; with malloc, five layouts agreed within 0.01%
#: (docs/gates/instructions.md). The plugin's fork servers keep the user's allocator
#: (``Callgrind.worker_command``).
ALLOCATOR = "malloc"
#: ``--internal-cpuid``: py-cpuinfo2 reads the CPU's id in a Python process of its own
#: (``python -m cpuinfo --internal-cpuid``), which traced paid a whole interpreter start-up
_NOT_TRACED = f"pytest_concurrency.workloads.latency_server,{UNTRACED_FLAG},--internal-cpuid"
#: Programs a counted session runs that count nothing, left untraced: each traced one pays a
#: valgrind start-up (0.5-1 s of CPU for ``git rev-parse``). pytest-benchmark asks git (and hg)
#: for the commit at a session's start and again when it saves, this plugin asks git for the code
#: identity and valgrind for its version, ``platform`` asks ``file`` (a counted save of yarl's 11
#: URL benchmarks: 63-70 s of CPU with them untraced, 71-79 s traced, at load 5-42); a save's
#: machine info (py-cpuinfo2) runs ``uname``, ``lscpu``, ``sysctl`` and ``dmesg``.
_NOT_TRACED_PROGRAMS = "*/git,*/hg,*/file,*/valgrind,*/uname,*/lscpu,*/sysctl,*/dmesg"
INSTALL_HINT = (
    "install valgrind (Debian/Ubuntu: apt-get install valgrind; Fedora: dnf install valgrind)"
)


class CountingError(RuntimeError):
    pass


def unavailable_reason() -> str | None:
    """Why instructions cannot be counted on this machine, or ``None``."""
    if not sys.platform.startswith("linux"):
        return f"counting instructions needs Linux (valgrind's callgrind); this is {sys.platform}"
    if shutil.which("valgrind") is None:
        return f"valgrind is not on PATH: {INSTALL_HINT}"
    return None


def inside() -> bool:
    """Whether this process runs under the counting command (``command``)."""
    return bool(child_env.get(ENV_DIR)) and _live_memory.under_valgrind()


def command(argv: list[str], directory: str) -> list[str]:
    """``argv`` run under callgrind as a counted process (its children too).

    Where a process can switch instrumentation on itself (client_request.py), it starts without
    it, and does so when it first reads the counter (``Counter``): start-up and imports, which
    are never counted, run 3-4x faster."""
    late = ["--instr-atstart=no"] if client_request.available() else []
    return [
        shutil.which("valgrind") or "valgrind",
        "--tool=callgrind",
        "-q",
        *late,
        f"--log-file={directory}/valgrind.%p.log",
        f"--vgdb-prefix={directory}/vgdb",  # its debugger FIFOs, in our directory rather than TMPDIR
        f"--callgrind-out-file={directory}/callgrind.%p",
        f"--zero-before={ZERO_FN}",
        f"--dump-before={DUMP_FN}",
        "--dump-instr=no",
        "--dump-line=no",
        "--collect-jumps=no",
        "--trace-children=yes",
        f"--trace-children-skip-by-arg={_NOT_TRACED}",
        f"--trace-children-skip={_NOT_TRACED_PROGRAMS}",
        "--max-threads=8192",  # valgrind's default, 500, is less than the spawn workload's 3000 threads
        *argv,
    ]


def counted_env(env: dict, directory: str) -> dict:
    late = {LATE_ENV: "1"} if client_request.available() else {}
    user_malloc = env.get("PYTHONMALLOC", "")
    return {
        **env,
        ENV_DIR: directory,
        "PYTHONHASHSEED": HASH_SEED,
        "PYTHONMALLOC": user_malloc or ALLOCATOR,
        child_env.USER_MALLOC: user_malloc,
        **late,
    }


def _users_malloc() -> str:
    """The PYTHONMALLOC the user gave this session ("" for none), counted or not."""
    if child_env.USER_MALLOC in os.environ:  # a counted process: ``counted_env`` set its own
        return os.environ[child_env.USER_MALLOC]
    return os.environ.get("PYTHONMALLOC", "")


def users_allocator(env: dict) -> dict:
    """``env`` with the allocator the user had before ``counted_env`` set its own: for a plain
    worker a counted process starts (its memory figures as in any session) and for the plugin's
    fork servers (``Callgrind.worker_command``)."""
    if child_env.USER_MALLOC not in env:  # not started from a counted process
        return env
    out = {k: v for k, v in env.items() if k != child_env.USER_MALLOC}
    if env[child_env.USER_MALLOC]:
        out["PYTHONMALLOC"] = env[child_env.USER_MALLOC]
    else:
        out.pop("PYTHONMALLOC", None)
    return out


#: What a counted session needs free in TMPDIR for callgrind's dumps: a smoke session of two
#: models wrote 6-11 MB, 2 MB in one dump. With 64 KiB free, every case failed on a cut dump.
MIN_FREE_MB = 32


def prepare() -> None:
    """Before anything is counted, in the launcher and in a session whose workers count: room
    for the dumps, and the package's bytecode written (see ``_compile_package``)."""
    _check_room()
    _compile_package()


def _check_room() -> None:
    from pytest import UsageError

    where = scratch.directory()
    st = os.statvfs(where)
    free_mb = st.f_bavail * st.f_frsize / 2**20
    if free_mb < MIN_FREE_MB:
        raise UsageError(
            f"pytest-concurrency: {os.path.dirname(where)} has {free_mb:.1f} MB free; counting writes "
            f"callgrind's dumps there (at least {MIN_FREE_MB} MB): free some space, or set TMPDIR to a "
            "directory with room"
        )


_worker_dir: str | None = None


def worker_dir() -> str:
    """Where this session's workers write their dumps: made on first use, removed with the
    process's own directory (runner/scratch.py)."""
    global _worker_dir
    if _worker_dir is None:
        _worker_dir = scratch.subdir("callgrind-")
    return _worker_dir


def _compile_package() -> None:
    """Write this package's bytecode before anything is counted. A worker that compiles a
    module from source ends its start-up with another memory layout than one that loads the
    cached bytecode: the first counted session after a checkout counted a greenlet chain 0.4%
    higher than the next ones. (Installed libraries have their bytecode from pip.)"""
    import compileall

    try:
        compileall.compile_dir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), quiet=2)
    except OSError:  # a read-only install: its bytecode was written when it was installed
        pass


def show_logs(directory: str) -> None:
    """valgrind's own logs of a counted process (``command``) that ended so, when it wrote any."""
    for name in sorted(os.listdir(directory)):
        if name.startswith("valgrind.") and os.path.getsize(os.path.join(directory, name)):
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as fh:
                tail = fh.read().splitlines()[-20:]
            print(f"pytest-concurrency: valgrind's log {name}:", *tail, sep="\n  ", file=sys.stderr)


def read_total(path: str) -> int:
    """The instruction count of one callgrind dump (its ``summary:`` line, in the header)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("summary:"):
                    return int(line.split()[1])
                if line.startswith(("fn=", "ob=")):
                    break
    except FileNotFoundError:
        raise CountingError(
            f"callgrind wrote no dump at {path}: this process is not running under "
            f"pytest-concurrency's counting command (valgrind --dump-before={DUMP_FN})"
        ) from None
    raise CountingError(f"the callgrind dump {path} has no summary line")


class Counter:
    """A clock that reads instructions: the count since the process started counting.

    Call it before and after a round; the difference is the round's count (plus a fixed
    few hundred instructions of the calls themselves, the same in every round).
    """

    __name__ = "Counter"  # how pytest-benchmark names its timer in its header

    def __init__(self, directory: str):
        if not client_request.start_instrumentation() and child_env.get(LATE_ENV):
            raise CountingError(
                "callgrind was started without instrumentation and this process could not "
                "switch it on (a valgrind client request): every count would read 0"
            )
        self.directory = directory
        self._pid = os.getpid()
        self._part = 0
        self._total = 0
        self._paused = False
        self.last_dump: str | None = None

    def __call__(self) -> float:
        self._check_pid()
        resumed = self._resume()
        os.sched_get_priority_min(os.SCHED_OTHER)  # callgrind dumps (and zeroes) here
        count = self._read_dump()
        # The dump that closes a stretch across a pause sums to garbage (2**64 less a little, as
        # if negative): it starts the next stretch and counts nothing; a round is the difference
        # of two readings within a stretch.
        self._total += 0 if resumed else count
        os.sched_get_priority_max(os.SCHED_OTHER)  # zeroed: this reading is not counted
        return float(self._total)

    def round_timer(self):
        """A timer for one round, read twice: its start zeroes callgrind's counters, its end
        dumps them. A dump sorts and walks every cost centre instrumented code has run (in a
        counted session of 30 yarl benchmarks one took 80 ms; a zeroing 30 ms, with the switch of
        instrumentation at a test's first round), so a round read with two dumps (``__call__``)
        cost nearly twice as much."""
        readings = [self._end, self._start]

        def read() -> float:
            if not readings:
                raise CountingError("a round's timer is read twice: at its start and at its end")
            return readings.pop()()

        return read

    def _start(self) -> float:
        self._check_pid()
        self._resume()
        os.sched_get_priority_max(os.SCHED_OTHER)  # zeroed: the round starts here
        return 0.0

    def _end(self) -> float:
        os.sched_get_priority_min(os.SCHED_OTHER)  # dumped: the round ends here
        return float(self._read_dump())

    def _read_dump(self) -> int:
        self._part += 1
        path = os.path.join(self.directory, f"callgrind.{self._pid}.{self._part}")
        count = read_total(path)
        if self.last_dump:
            os.unlink(self.last_dump)
        self.last_dump = path
        return count

    def _resume(self) -> bool:
        """Instrumentation on again after ``pause`` (callgrind sees the dump's and the zeroing's
        calls only in instrumented code); whether it was off."""
        if not self._paused:
            return False
        client_request.start_instrumentation()
        self._paused = False
        return True

    def _check_pid(self) -> None:
        if os.getpid() != self._pid:
            raise CountingError("a forked process cannot read its parent's instruction counter")

    def pause(self) -> None:
        """After a stretch of rounds: what runs until the next reading (pytest between tests,
        the reports, parsing the profile) runs uninstrumented, 3-4x faster, never counted.

        Each switch, off or on, makes callgrind discard every translation it made, and what runs
        next is translated again: yarl's URL benchmarks cost 1.3 s of CPU a test in a counted
        session that switched off after each test, 0.4-0.8 s in one that stayed on between them
        (``Callgrind.stays_on``)."""
        if self._paused:
            return
        client_request.stop_instrumentation()
        self._paused = True

    def last_profile(self) -> dict:
        """The profile of the stretch the last reading closed (after a round: that round), as
        record keys (``profile.read``)."""
        return profile.read(self.last_dump) if self.last_dump else {"profile": []}

    def hand_over_last_dump(self) -> str | None:
        """The last reading's dump, left for another process to read (and remove)."""
        path, self.last_dump = self.last_dump, None
        return path


class Callgrind(Instrument):
    kind = "instructions"
    unit = "instr"
    #: Cases forked from a fork server repeat their counts between sessions (see worker.py):
    #: 12 A/A comparisons of smoke sessions moved no benchmark by more than 0.5% (IO aside).
    #: What still moves a count is the memory layout: CPython caches type attribute lookups
    #: by the address of the name, so a change that allocates something else at start-up
    #: moves the cache's hits. 14 KB more at start-up in every process moved eventlet's switch
    #: by 1.3%, which at 1% made 4 of 4 comparisons name a model nothing was done to
    #: (evidence/count_evidence.py). Waiting workloads have a floor of their own.
    default_threshold = 0.02
    #: Counted in 3 layouts or more on both sides (a user's plain test, layouts.py), the median follows
    #: the code, not where objects landed: unchanged code counted in ten directories moved 0.05-0.23%
    #: (threads 0.12%; 0.64% on a loaded machine), one layout alone up to 3.1% (plain_count_repeat.py).
    LAYOUTS_THRESHOLD = (3, 0.01)
    exact = True
    machine_bound = False
    needs_launch = True
    with_memory = False  # valgrind's own memory would be in every RSS figure
    #: tracemalloc under valgrind more than doubled a counted case's cost (eventlet's switch:
    #: 9.8 -> 25.9 s); traced bytes do not depend on valgrind, and RSS means something outside it.
    memory_apart = True
    #: What a process did before a round changes its count: the allocator's free lists
    #: depend on it. The same switch workload counted 1.5% more malloc work in one pytest
    #: session than in another; in new processes, counts agree to 0.002%.
    fresh_process = True
    #: A counted round runs 30-50x slower than a timed one.
    default_timeout = 1200.0
    #: a day (the longest --concurrency-timeout) at 10^10 instructions a second: more than a core
    #: retires natively, and some hundred times what it counts under valgrind
    most_per_round = 1e15
    #: Three rounds after two warm-ups (``warmed``; a user's plain test's after one call more,
    #: unread: measure/driver.py). Counted in one round, yarl's test_url_make_empty_username moved
    #: 1.11% in every layout when other tests ran before it, 0.56% in three (layout_separation.py).
    #: A session repeats another's rounds to 0.002%, but rounds within one process still move:
    #: on CPython 3.11 a small case's three rounds were 0.07-1.4% apart (ten directory lengths);
    #: twelve drifted down by 2-3% with a one-round bump, on 3.10 too (so not the specializing
    #: interpreter; cause not found). The median of three is judged, and both sides go through
    #: the same sequence.
    ROUNDS = (3, 2)
    #: What a count cannot see, by task kind (one line per model in the report).
    LEAVES_OUT = {
        "light": "kernel work (syscalls, IO), waits and cache misses",
        "thread": "user-space instructions only: kernel work, context switches, lock waits and "
        "cache misses; valgrind runs threads one at a time",
    }

    def __init__(self):
        self._counter: Counter | None = None
        self._frozen = False  # the objects older than this test's rounds (``before_round``)

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def inside(self) -> bool:
        return inside()

    def prepare_session(self) -> None:
        prepare()

    def worker_command(self, argv: list[str], env: dict) -> tuple[list[str], dict]:
        # A fork server's cases keep the user's allocator (pymalloc unless set): each case is a
        # fresh fork of the same server state, and with pymalloc greenlet's smallest case counted
        # within 0.1% from one session to the next (five directory lengths); with malloc it moved
        # by up to 2% (+3.2% once: a false regression), following the layout.
        if inside():  # valgrind traces this session's children already
            return argv, users_allocator(env)
        return command(argv, worker_dir()), users_allocator(counted_env(env, worker_dir()))

    def benchmark_timer(self):
        def count() -> (
            float
        ):  # the counter is made on the first reading: a session at full speed has none
            return self.counter()()

        count.__name__ = Counter.__name__
        return count

    def default_threshold_for(self, layouts: int) -> float:
        fewest, threshold = self.LAYOUTS_THRESHOLD
        return threshold if layouts >= fewest else self.default_threshold

    def unsupported(self, backend) -> str | None:
        if backend.task_kind == "process":
            return (
                "task processes are not counted: each would count its own interpreter start-up; "
                "measure multiprocessing with --concurrency-measure=time"
            )
        return None

    def rounds(self, rounds: int, warmup: int) -> tuple[int, int]:
        return self.ROUNDS

    #: Warm-up goes on until two rounds in a row count within this of each other: on CPython
    #: 3.13 the first round after one warm-up still counted 1.9% more than the next ones.
    WARM = 0.002
    MAX_WARMUP = 5

    def warmed(self, warmup_samples: list) -> bool:
        if len(warmup_samples) >= self.MAX_WARMUP:
            return True
        return (
            len(warmup_samples) >= 2
            and abs(warmup_samples[-1] - warmup_samples[-2]) <= self.WARM * warmup_samples[-1]
        )

    def before_round(self) -> None:
        # Every round starts with the collector's counters at zero: otherwise a collection
        # falls into whichever round crosses a threshold (on 3.13 one round of three counted
        # 1.9% more than the others). What existed before a test's first round is frozen out of
        # the collector's reach until its last (``after_rounds``), so each collection walks only
        # what the rounds made: under valgrind a walk of a session's heap (pytest, the suite,
        # the code under test) took about 0.5 s, nine times a test.
        if not self._frozen:
            gc.freeze()
            self._frozen = True
        gc.collect()

    def round_timer(self):
        return self.counter().round_timer()

    def counter(self) -> Counter:
        if self._counter is None or self._counter._pid != os.getpid():
            directory = child_env.get(ENV_DIR)
            if not directory or not inside():
                raise CountingError(
                    "instructions are counted only under valgrind: a session started with "
                    "--concurrency-measure=instructions runs there whole when it has a test measured "
                    "in its own process (a plain benchmark test), else its workers do"
                )
            self._counter = Counter(directory)
        return self._counter

    def pause(self) -> None:
        """Instrumentation off, if this process switched it on (``Counter.pause``)."""
        if self._counter is not None and self._counter._pid == os.getpid():
            self._counter.pause()

    def per_op(self, median: float, ops: int) -> dict:
        return {"instructions_per_op": median / ops}

    def after_rounds(self, profile: str = PROFILE_HERE) -> dict:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        counter = self.counter()
        if not self.stays_on:  # else the session switches it off where no counted test follows
            counter.pause()
        if profile == PROFILE_NONE:
            return {}
        if profile == PROFILE_HANDED_OVER:  # reading a dump under valgrind: 0.3-1.4 s
            return {"profile_dump": counter.hand_over_last_dump()}
        return counter.last_profile()

    def received(self, extra: dict) -> dict:
        path = extra.pop("profile_dump", None)
        if path:
            extra.update(profile.read(path))
            os.unlink(path)
        return extra

    def received_apart(self, extras: list[dict]) -> None:
        """``received`` for each of ``extras``, in a process of its own that valgrind does not
        trace: in a session run whole under valgrind, reading a dump took 0.3 s a test, at its
        end, with the whole run waiting. Read here (slowly) if that process fails."""
        paths = [e["profile_dump"] for e in extras if e.get("profile_dump")]
        if not paths:
            return
        done = subprocess.run(
            [sys.executable, "-I", "-S", profile.__file__, UNTRACED_FLAG],
            input=json.dumps(paths),
            capture_output=True,
            text=True,
            preexec_fn=lifetime.with_parent(),
        )
        read = json.loads(done.stdout) if done.returncode == Exit.OK else {}
        for extra in extras:
            path = extra.get("profile_dump")
            if path and path in read:
                del extra["profile_dump"]
                extra.update(read[path])
                os.unlink(path)
            else:
                self.received(extra)

    #: A round that waits (IO) counts its event loop's wake-ups, and how many there are
    #: depends on timing: eventlet's and greenlet's IO over timers counted 0.6-3% apart in
    #: sessions whose rounds agreed within each, gevent's up to 6%.
    WAITING_THRESHOLD = 0.10

    def threshold_floor(self, rec) -> tuple[float, str] | None:
        if not rec.extra.get("waits"):
            return None
        return (
            self.WAITING_THRESHOLD,
            "this workload waits, and how often its event loop wakes up depends on "
            "timing, which moves its count by a few percent between sessions; smaller changes need "
            "--concurrency-measure=time",
        )

    def explain(self, base, current) -> str | None:
        return profile.growth(base, current)

    def leaves_out(self, task_kind: str) -> str:
        return self.LEAVES_OUT.get(task_kind, self.LEAVES_OUT["light"])

    def session_meta(self) -> dict:
        valgrind = _valgrind_version()
        # the directory is not part of the measuring side (a changed one asks for no re-recording),
        # but counts follow it: gate.measuring.layout_note
        return {
            "valgrind": valgrind,
            "hash_seed": HASH_SEED,
            "directory": os.getcwd(),
            "measuring": {
                **measuring_side(),
                "valgrind": valgrind,
                # as ``counted_env`` and ``worker_command`` set them ("" for Python's default)
                "allocator_tests": _users_malloc() or ALLOCATOR,
                "allocator_workloads": _users_malloc(),
            },
        }


def _valgrind_version() -> str:
    try:
        out = subprocess.run(
            ["valgrind", "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.strip().removeprefix("valgrind-")


CALLGRIND = Callgrind()
