"""Counting instructions (--concurrency-measure=instructions) through real pytest sessions
under valgrind, and the pieces it rests on: the callgrind dump reader and the exact rule.

The injected slowdown is a few extra Python calls per message on one backend, chosen by an
environment variable: a change of a few percent, which only an exact count can gate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import needs

from pytest_concurrency.gate import stats
from pytest_concurrency.gate.verdicts import INCONCLUSIVE, REGRESSED, UNCHANGED
from pytest_concurrency.measure import callgrind, client_request, memory, profile
from pytest_concurrency.measure.records import Record
from pytest_concurrency.roles import child_sessions, counting

needs_valgrind = needs("valgrind", callgrind.unavailable_reason())

PINGS = '''
import os
from pytest_concurrency.workloads import Outcome, WorkloadError


def extra_work(n):
    return sum(range(n))


class Pings:
    """Main sends `m` numbers to one task over a bounded channel; the task sums them."""
    name = "pings"
    unit = "msg"

    def cases(self, scale):
        return [{"m": 400}]

    def rounds(self, scale):
        return 10, 1

    def unsupported(self, backend, params):
        return None

    def run(self, backend, params):
        m = params["m"]
        slow = int(os.environ.get("SLOW_WORK", "0")) if backend.name == os.environ.get("SLOW_BACKEND") else 0

        def consume(inbox):
            total = 0
            for _ in range(m):
                total += inbox.get()
                if slow:
                    extra_work(slow)
            return total

        async def aconsume(inbox):
            total = 0
            for _ in range(m):
                total += await inbox.get()
                if slow:
                    extra_work(slow)
            return total

        if backend.family == "async":
            async def main():
                inbox = backend.channel(8)
                task = backend.spawn(aconsume, inbox)
                for i in range(m):
                    await inbox.put(i)
                return await task.join()
        else:
            def main():
                inbox = backend.channel(8)
                task = backend.spawn(consume, inbox)
                for i in range(m):
                    inbox.put(i)
                return task.join()
        total = backend.run(main)
        if total != m * (m - 1) // 2:
            raise WorkloadError(f"pings summed to {total}, expected {m * (m - 1) // 2}")
        return Outcome(m)


PINGS = Pings()
'''

TEST = """
import pytest

@pytest.mark.concurrency(workloads=["pings:PINGS"])
def test_pings(concurrency_case, concurrency_benchmark):
    concurrency_benchmark(concurrency_case)
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(pings=PINGS, test_pings=TEST)
    return pytester


def counted(suite, *args, backends="greenlet,asyncio"):
    return suite.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-measure=instructions",
        f"--concurrency-backends={backends}",
        *args,
        timeout=900,
    )


@needs_valgrind
def test_a_counted_session_records_counts(suite):
    # The fast tier's counted session on every Python, one model (~8 s here): a counted session
    # judged against its baseline, with a second model, two jobs and an injected slowdown, is the
    # slow tier's test below (essential: .ci/run runs it).
    base = suite.path / "base.json"
    first = counted(suite, f"--concurrency-save-baseline={base}", backends="greenlet")
    first.assert_outcomes(passed=1)
    assert "run again under valgrind" not in first.stdout.str()  # only the worker was counted
    doc = json.loads(base.read_text())
    assert doc["pytest_concurrency"]["measure"] == "instructions"
    (bench,) = doc["benchmarks"]
    samples = bench["stats"]["data"]
    assert len(samples) == 3 and all(
        x > 1e5 and x == int(x) for x in samples
    )  # instructions, not seconds
    assert bench["extra_info"]["profile"] and "retained_b_per_task_round" in bench["extra_info"]


@pytest.mark.slow
@pytest.mark.essential
@needs_valgrind
def test_counts_repeat_and_a_small_slowdown_fails_naming_backend_and_function(suite, monkeypatch):
    base = suite.path / "base.json"
    first = counted(suite, f"--concurrency-save-baseline={base}", "--concurrency-jobs=1")
    first.assert_outcomes(passed=2)
    assert "run again under valgrind" not in first.stdout.str()  # only the workers were counted
    doc = json.loads(base.read_text())
    meta = doc["pytest_concurrency"]
    assert (
        meta["measure"] == "instructions"
        and meta["calibration"] is None
        and meta["hash_seed"] == "0"
    )
    for bench in doc["benchmarks"]:
        samples = bench["stats"]["data"]
        assert len(samples) == 3 and min(samples) > 1e5  # instructions, not seconds
        # Rounds of one process still move (up to 1.4% measured on this case, Callgrind.ROUNDS):
        # within the gate's own threshold for them.
        assert stats.spread(samples) < callgrind.Callgrind.default_threshold, samples
        extra = bench["extra_info"]
        assert (
            extra["measure"] == "instructions" and extra["profile"] and "profile_dump" not in extra
        )
        assert (
            extra["memory_rounds"]
            in (*range(memory.ENOUGH, memory.READINGS + 1), 2 * memory.READINGS)
            and "retained_b_per_task_round" in extra
        )  # the memory pass, apart
        assert (
            "csw_per_op" in extra and extra["kernel_source"]
        )  # and the kernel figures, from the same plain worker

    same = counted(
        suite, f"--concurrency-baseline={base}", "-n", "2"
    )  # both cases at once, as xdist's -n asks
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(
        ["*-n 2 with --concurrency-measure=instructions: the cases are counted in 2 lanes*"]
    )
    same.stdout.fnmatch_lines(
        ["*instructions on asyncio, greenlet leave out*", "*Gate: 0 regressions*"]
    )
    changes = [v for v in _verdict_changes(same.stdout.str())]
    # percent, inside the 2% threshold. On 3.11 both runs count the same to <0.1% (cases fork
    # from servers that never read a request); on 3.10 one case moved 1.6% between one job and
    # two, a cause not found yet (see the README's A/A figures)
    assert changes and all(abs(c) < 2.0 for c in changes), changes

    monkeypatch.setenv("SLOW_BACKEND", "greenlet")
    monkeypatch.setenv("SLOW_WORK", "3")
    slow = counted(suite, f"--concurrency-baseline={base}")
    out = " ".join(slow.stdout.str().split())
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "Gate: 1 regression" in out
    assert "pings[m=400] on greenlet:" in out and "threshold 2%" in out
    assert "where: +" in out and "instr/msg: extra_work" not in out  # C symbols, not Python names
    assert "_PyEval_EvalFrameDefault" in out or "libpython" in out
    assert "on asyncio: " not in out.split("Regressions")[1].split("Notes")[0]
    assert "re-measured" not in out  # counts repeat: no second session

    # the baseline was measured by other measuring code: no verdict, its own exit status
    doc["pytest_concurrency"]["measuring"]["code"] = "0" * 16
    base.write_text(json.dumps(doc))
    other = counted(suite, f"--concurrency-baseline={base}")
    said = " ".join(other.stdout.str().split())
    assert other.ret == 7, said
    assert "Re-record the baseline" in said and "its measuring code 0000000000000000 ->" in said


def _verdict_changes(text: str) -> list[float]:
    """The change column of the tables, in percent."""
    out = []
    for line in text.splitlines():
        for word in line.split():
            if word.endswith("%") and word[:1] in "+-" and "unchanged" in line:
                out.append(float(word[:-1]))
    return out


@pytest.mark.slow
@needs_valgrind
def test_a_plain_benchmark_test_is_counted_in_the_session(pytester):
    pytester.makepyfile(
        test_plain="""
        def work(backend):
            tasks = [backend.spawn(sum, range(200)) for _ in range(20)]
            return [t.join() for t in tasks]

        def test_plain(benchmark, concurrency_backend):
            result = benchmark.pedantic(concurrency_backend.run, args=(work, concurrency_backend), rounds=3)
            assert result == [19900] * 20
    """
    )
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-backends=greenlet,multiprocessing",
        "--concurrency-layouts=1",
        "--benchmark-json=run.json",
        "-rs",
        timeout=900,
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*a benchmark test measured in this process makes the session run again under valgrind*",
            "*multiprocessing*task processes are not counted*",
        ]
    )
    bench = json.loads((pytester.path / "run.json").read_text())["benchmarks"][0]
    assert bench["extra_info"]["measure"] == "instructions"
    assert all(x > 1e4 and x == int(x) for x in bench["stats"]["data"])


@pytest.mark.once
def test_without_valgrind_the_run_stops_before_anything_is_measured(pytester, monkeypatch):
    pytester.makepyfile(test_x="def test_x(concurrency_backend):\n    pass\n")
    empty = pytester.mkdir("empty-bin")
    monkeypatch.setenv("PATH", str(empty))
    result = pytester.runpytest_subprocess("--concurrency-measure=instructions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--concurrency-measure=instructions*valgrind is not on PATH*apt-get install valgrind*"]
    )


@pytest.mark.once
@needs_valgrind
def test_counting_on_other_hosts_is_refused_with_the_way_that_works(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--concurrency-measure=instructions",
        "--dist",
        "load",
        "--tx",
        "ssh=elsewhere//python=python3",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--tx ssh=elsewhere//python=python3: counted cases run in lanes of this session*"]
    )


@pytest.mark.once
def test_parallel_jobs_are_refused_when_timing(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--concurrency-jobs=2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--concurrency-jobs=2: cases measured at the same time slow each other*"]
    )


@pytest.mark.once
@pytest.mark.parametrize(
    "given, said",
    [("0", "'0' is out of range; allowed: 1 to 25"), ("three", "'three' is not a number")],
)
def test_layouts_that_are_not_a_count_are_a_usage_error(pytester, given, said):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest(f"--concurrency-layouts={given}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--concurrency-layouts={given}: {said}*"])


@pytest.mark.once
def test_an_unknown_measure_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--concurrency-measure=cycles")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown measure 'cycles'; use one of time, instructions*"])


@needs_valgrind
def test_dump_reader_against_a_real_callgrind_run(tmp_path):
    script = tmp_path / "work.py"
    script.write_text(
        "import os\n"
        "from pytest_concurrency.measure import client_request\n"
        "client_request.start_instrumentation()  # as a Counter does, where it can\n"
        "def spin(n):\n    return sum(i * i for i in range(n))\n"
        "for n in (10_000, 40_000):\n"
        "    os.sched_get_priority_max(os.SCHED_OTHER)\n"
        "    spin(n)\n"
        "    os.sched_get_priority_min(os.SCHED_OTHER)\n"
    )
    subprocess.run(
        callgrind.command([sys.executable, str(script)], str(tmp_path)), check=True, timeout=300
    )
    dumps = sorted(p for p in tmp_path.glob("callgrind.*.*"))
    assert [p.suffix for p in dumps] == [".1", ".2"]
    small, large = (callgrind.read_total(str(p)) for p in dumps)
    assert 3.2 < large / small < 4.5  # four times the loop, plus the same fixed costs
    read = profile.read(str(dumps[1]))
    functions, objects = read["profile"], read["profile_objects"]
    counts = [c for _, _, c in functions]
    # the functions' own costs add up to the dump's total (callgrind's "totals" may exceed its
    # "summary" by the dump call's own few hundred instructions)
    assert counts == sorted(counts, reverse=True) and sum(counts) <= large * 1.001
    assert any(lib.startswith(("libpython", "python")) for _, lib, _ in functions)
    assert sum(counts) > 0.8 * large  # the listed functions are where nearly all of it went
    # every object's total, all of it: the interpreter first, libc among them
    assert objects[0][0].startswith(("libpython", "python")) and any(
        lib.startswith("libc") for lib, _ in objects
    )
    assert large * 0.999 <= sum(c for _, c in objects) <= large * 1.001


@pytest.mark.slow
@needs_valgrind
@pytest.mark.skipif(
    not client_request.available(), reason="valgrind client requests are made on x86-64 Linux only"
)
def test_a_process_started_without_instrumentation_counts_once_it_switches_it_on(tmp_path):
    """Three real callgrind processes of a bare interpreter (no site), 7-9 s: instrumented from the
    start, started without and switched on (as a Counter does), started without and never switched
    on. (Every counted session of the fast tier relies on the switch: without it, no dump.)"""
    script = tmp_path / "work.py"
    script.write_text(
        "import importlib.util, os, sys\n"
        "spec = importlib.util.spec_from_file_location('client_request', sys.argv[1])\n"
        "client_request = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(client_request)\n"
        "if sys.argv[2] == 'switch':\n"
        "    client_request.start_instrumentation()\n"
        "for _ in range(3):\n"
        f"    os.{callgrind.ZERO_FN}(os.SCHED_OTHER)\n"
        "    sum(i * i for i in range(40_000))\n"
        f"    os.{callgrind.DUMP_FN}(os.SCHED_OTHER)\n"
    )
    counts = {}
    for name in ("early", "late", "never"):
        out = tmp_path / name
        out.mkdir()
        argv = callgrind.command(
            [
                sys.executable,
                "-I",
                "-S",
                str(script),
                client_request.__file__,
                "never" if name == "never" else "switch",
            ],
            str(out),
        )
        assert "--instr-atstart=no" in argv
        if name == "early":
            argv.remove("--instr-atstart=no")
        subprocess.run(argv, check=True, timeout=300)
        counts[name] = [callgrind.read_total(str(p)) for p in sorted(out.glob("callgrind.*.*"))]
    assert len(counts["late"]) == 3 and min(counts["late"]) > 1_000_000, (
        counts
    )  # a loop of 40,000, counted
    for late, early in zip(counts["late"], counts["early"]):
        assert abs(late - early) <= 1e-4 * early, counts
    assert counts["never"] == [], counts  # never switched on: callgrind saw no call to dump at


ROUND_TIMERS = """
import json, os, sys
from pytest_concurrency.measure import callgrind

counter = callgrind.Counter(sys.argv[1])


def spin():
    return sum(i * i for i in range(20_000))


def one_round():
    timer = counter.round_timer()
    start = timer()
    spin()
    return timer() - start


out = {"warm": [one_round(), one_round()]}
start = counter()
spin()
out["two dumps"] = counter() - start
out["zero, dump"] = one_round()
counter.pause()
out["after a pause"] = one_round()
timer = counter.round_timer()
timer(), timer()
try:
    timer()
except callgrind.CountingError as exc:
    out["third reading"] = str(exc)
print(json.dumps(out))
"""


@needs_valgrind
def test_a_round_read_by_a_zeroing_and_a_dump_counts_what_two_dumps_count(tmp_path):
    """A real callgrind process (the package imported uninstrumented, then a loop counted): 3-5 s.
    A round's start only zeroes the counters (a dump at each end cost twice as much)."""
    script = tmp_path / "round_timers.py"
    script.write_text(ROUND_TIMERS)
    done = subprocess.run(
        callgrind.command([sys.executable, str(script), str(tmp_path)], str(tmp_path)),
        env=callgrind.counted_env(dict(os.environ), str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = json.loads(done.stdout)
    loop = out["two dumps"]
    assert loop > 1_000_000, out  # 20,000 steps, counted
    assert out["zero, dump"] == pytest.approx(loop, rel=1e-3), out
    assert out["after a pause"] == pytest.approx(loop, rel=1e-3), out  # no garbage across it
    assert "read twice" in out["third reading"], out


def test_a_counter_that_cannot_switch_instrumentation_on_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(callgrind.LATE_ENV, "1")  # as in a process started with --instr-atstart=no
    with pytest.raises(callgrind.CountingError, match="could not switch it on"):
        callgrind.Counter(
            str(tmp_path)
        )  # this process is not under valgrind: every count would be 0


def test_reading_a_dump_that_is_not_there_says_why(tmp_path):
    with pytest.raises(
        callgrind.CountingError, match="not running under pytest-concurrency's counting"
    ):
        callgrind.read_total(str(tmp_path / "callgrind.1.1"))


def test_exact_rule_judges_size_once_rounds_agree():
    base = [1_000_000, 1_000_400, 999_800]
    assert stats.decide_layouts([base], [[1_005_000] * 3], 0.01).status == UNCHANGED
    slower = stats.decide_layouts([base], [[1_012_000, 1_012_100, 1_011_900]], 0.01)
    assert slower.status == REGRESSED and slower.p_value is None
    assert slower.ci[0] > 1.01 > 1.0
    wandering = [1_000_000, 1_030_000, 990_000]  # 4% apart: cannot judge a 1% change
    unsure = stats.decide_layouts([base], [[x * 1.015 for x in wandering]], 0.01)
    assert unsure.status == INCONCLUSIVE and "wanders" in unsure.note
    big = stats.decide_layouts([base], [[x * 1.5 for x in wandering]], 0.01)
    assert big.status == REGRESSED  # every pairing of rounds is far beyond the threshold


def _rec(median, functions, ops=100, objects=None):
    return Record(
        "ring",
        {},
        "gevent",
        [median] * 3,
        ops=ops,
        unit="hop",
        extra={
            "measure": "instructions",
            "profile": functions,
            **({"profile_objects": objects} if objects else {}),
        },
    )


def test_profile_growth_names_the_functions_that_grew():
    base = _rec(
        100_000,
        [
            ["eval", "libpython3.11", 60_000],
            ["g_switch", "_greenlet", 30_000],
            ["malloc", "libc", 5_000],
        ],
    )
    cur = _rec(
        112_000,
        [
            ["eval", "libpython3.11", 61_000],
            ["g_switch", "_greenlet", 40_000],
            ["new_fn", "_gevent", 6_000],
            ["malloc", "libc", 5_000],
        ],
    )
    text = profile.growth(base, cur)
    assert text.startswith("where: +120 instr/hop: g_switch (_greenlet) +100")
    # new to the list: counted from the baseline's smallest listed cost (50/hop), not from 0
    assert "new_fn (_gevent) +10" in text and "eval (libpython3.11) +10" in text
    assert profile.growth(_rec(1, []), cur) is None


def test_counting_outside_a_counted_session_is_refused(monkeypatch):
    monkeypatch.delenv(callgrind.ENV_DIR, raising=False)
    with pytest.raises(callgrind.CountingError, match="--concurrency-measure=instructions"):
        callgrind.Callgrind().counter()


def test_a_counted_session_runs_without_the_projects_faulthandler_timer(tmp_path, monkeypatch):
    """aiohttp's pytest.ini sets faulthandler_timeout = 30: under valgrind every benchmark took
    longer, and the traceback dump from faulthandler's thread crashed a counted pass (SIGSEGV)."""
    started = []

    class Proc:
        returncode = 0

        def __init__(self, argv, **kw):
            started.append(argv)

        def wait(self, timeout=None):
            return 0

        poll = wait

    monkeypatch.setattr(callgrind, "prepare", lambda: None)
    monkeypatch.setattr(child_sessions.subprocess, "Popen", Proc)
    monkeypatch.setattr(counting.scratch, "directory", lambda: str(tmp_path))
    codes = counting.run_sessions(
        [counting.Command(["-o", "faulthandler_timeout=30", "test_x.py"], {}, None)],
        str(tmp_path),
    )
    assert codes == [0]
    (argv,) = started
    assert argv[-3:] == ["test_x.py", "-o", "faulthandler_timeout=0"]  # after the user's: it wins


@pytest.mark.parametrize("user", [None, "pymalloc", "malloc"])
def test_counted_sessions_allocate_with_malloc_and_workers_with_the_users(
    tmp_path, monkeypatch, user
):
    """pymalloc made a round's count depend on whether a pool emptied within it (two or three
    states per test, 1.2% apart): a session counted whole runs with malloc unless the user says
    otherwise; a plain worker it starts (the memory pass) and the fork servers of the plugin's
    workloads (with malloc, greenlet's case moved 2% between sessions) with what the user had."""
    from pytest_concurrency.backends import child_env

    users = {"PATH": "/bin", **({"PYTHONMALLOC": user} if user else {})}
    counted = callgrind.counted_env(users, str(tmp_path))
    assert counted["PYTHONMALLOC"] == (user or "malloc")
    plain = callgrind.users_allocator(counted)
    assert plain.get("PYTHONMALLOC") == user and child_env.USER_MALLOC not in plain
    assert callgrind.users_allocator(users) == users  # a session's own plain worker: left as it is

    counting = callgrind.Callgrind()
    argv, env = counting.worker_command(["python", "-m", "worker"], users)  # from a plain session
    assert "--tool=callgrind" in argv and env.get("PYTHONMALLOC") == user
    assert env[callgrind.ENV_DIR] and env["PYTHONHASHSEED"] == callgrind.HASH_SEED
    monkeypatch.setattr(callgrind, "inside", lambda: True)  # from a session counted whole
    argv, env = counting.worker_command(["python", "-m", "worker"], counted)
    assert argv == ["python", "-m", "worker"] and env.get("PYTHONMALLOC") == user

    monkeypatch.setattr(os, "environ", counted)  # what the baseline records, in each
    meta = counting.session_meta()["measuring"]
    assert (meta["allocator_tests"], meta["allocator_workloads"]) == (user or "malloc", user or "")
    monkeypatch.setattr(os, "environ", users)
    assert counting.session_meta()["measuring"] == meta


def test_counted_command_traces_children_but_not_the_latency_server(tmp_path):
    argv = callgrind.command(["python", "-m", "pytest"], str(tmp_path))
    assert argv[-3:] == ["python", "-m", "pytest"]
    assert "--trace-children=yes" in argv
    assert any(
        a.startswith("--trace-children-skip-by-arg=") and "latency_server" in a for a in argv
    )
    assert (
        f"--dump-before={callgrind.DUMP_FN}" in argv
        and f"--zero-before={callgrind.ZERO_FN}" in argv
    )


@needs_valgrind
def test_what_a_save_runs_for_its_machine_info_is_not_traced(tmp_path):
    """py-cpuinfo2's CPU id process and the programs it asks (``uname``, ``lscpu``...) count
    nothing: each traced paid a valgrind start-up, the Python one an interpreter's too."""
    script = (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'pass', '--internal-cpuid'], check=True)\n"
        "subprocess.run(['uname', '-p'], check=True, capture_output=True)\n"
        "subprocess.run(['true'], check=True)\n"  # traced: a program nobody skips
    )
    argv = callgrind.command([sys.executable, "-S", "-c", script], str(tmp_path))
    subprocess.run(argv, check=True, timeout=120)
    traced = sorted(p.name for p in tmp_path.glob("callgrind.*"))
    assert len(traced) == 2, traced  # the script's own process and ``true``


def test_profile_growth_says_which_shared_object_grew():
    base = _rec(
        100_000,
        [["eval", "libpython3.11", 60_000], ["g_switch", "_greenlet", 30_000]],
        objects=[["libpython3.11", 65_000], ["_greenlet", 30_000], ["libc.so.6", 5_000]],
    )
    cur = _rec(
        112_000,
        [["eval", "libpython3.11", 61_000], ["g_switch", "_greenlet", 40_000]],
        objects=[["libpython3.11", 66_000], ["_greenlet", 40_000], ["libc.so.6", 6_000]],
    )
    text = profile.growth(base, cur)
    assert text.endswith("; by object: _greenlet +100, libpython3.11 +10, libc.so.6 +10"), text


@pytest.mark.slow
@needs_valgrind
def test_a_killed_launcher_takes_its_counted_session_along_and_no_baseline_is_written(pytester):
    # kill -9 of the pytest a user started, while its relaunched session runs under valgrind
    # (about 15 s here): nothing of it may live on, and no baseline may appear
    import os
    import signal
    import subprocess
    import time

    import psutil

    pytester.makepyfile(
        test_plain="""
        def test_plain(benchmark, concurrency_backend):
            benchmark.pedantic(concurrency_backend.run, args=(lambda: sum(range(200_000)),), rounds=100)
    """
    )
    base, tmp = pytester.path / "base.json", pytester.mkdir("tmp")
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--benchmark-only",
            "--concurrency-backends=greenlet",
            "--concurrency-measure=instructions",
            f"--concurrency-save-baseline={base}",
        ],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    deadline = time.monotonic() + 120
    while not list(tmp.glob("pytest-concurrency-*/callgrind-*/callgrind.*")):  # counting has begun
        assert time.monotonic() < deadline and launcher.poll() is None, (
            "the counted session never started"
        )
        time.sleep(0.2)
    time.sleep(2)
    ours = psutil.Process(launcher.pid).children(recursive=True)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    _, alive = psutil.wait_procs(ours, timeout=5)
    assert not alive, f"still running 5 s after the kill: {[p.cmdline()[:3] for p in alive]}"
    time.sleep(1)
    assert not base.exists()
    # what the killed processes left in TMPDIR goes with the next session's start
    from pytest_concurrency.backends import scratch

    assert scratch.sweep(str(tmp)) and os.listdir(tmp) == []


COLD_START = """
    import itertools

    def work(backend, cold):
        # the first two calls do extra work, less each time, as a cache being filled would
        extra = cold.pop() if cold else 0
        return backend.run(lambda: sum(range(20_000 * (1 + extra))))

    def test_pedantic(benchmark, concurrency_backend):
        cold, seen, tokens = [1, 2], set(), itertools.count()

        def setup():
            return (next(tokens),), {}

        def target(token):
            assert token not in seen, "a setup's arguments were used twice"
            seen.add(token)
            return work(concurrency_backend, cold)

        benchmark.pedantic(target, setup=setup, rounds=3)
        # the first warm-up call unread, then those read, then the rounds pedantic asked for
        assert len(seen) == 1 + benchmark.extra_info["warmup_rounds"] + 3

    def test_call(benchmark, concurrency_backend):
        benchmark(work, concurrency_backend, [1, 2])
"""


@pytest.mark.slow
@needs_valgrind
def test_a_plain_counted_test_warms_up_until_its_count_repeats(pytester):
    """One counted session of two plain tests on one model, run whole under valgrind: 80 s here
    (78 s of it CPU). With their cold calls measured, the first round would count 2-3x the others."""
    pytester.makepyfile(test_plain=COLD_START)
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-backends=greenlet",
        "--benchmark-json=run.json",
        "--concurrency-layouts=1",
        timeout=900,
    )  # one layout: the warm-up is the point
    result.assert_outcomes(passed=2)
    benches = {
        b["name"].split("[")[0]: b
        for b in json.loads((pytester.path / "run.json").read_text())["benchmarks"]
    }
    for bench in benches.values():
        rounds = bench["stats"]["data"]
        # two cold calls (the first unread) and two that agree; at most MAX_WARMUP read
        assert 3 <= bench["extra_info"]["warmup_rounds"] <= callgrind.Callgrind.MAX_WARMUP, bench[
            "name"
        ]
        assert stats.spread(rounds) < 0.01, (
            bench["name"],
            rounds,
        )  # a cold call among them: +100% or more
    # its call (5.2 M instructions) dwarfs a reading: the two warm-up counts that agree are its
    # rounds (driver.py ``WarmUntilStable``)
    assert len(benches["test_call"]["stats"]["data"]) == 2


@pytest.mark.once
def test_a_plain_timed_test_keeps_pytest_benchmarks_own_rounds(pytester):
    pytester.makepyfile(
        test_plain="""
        def test_plain(benchmark, concurrency_backend):
            benchmark.pedantic(concurrency_backend.run, args=(lambda: 1,), rounds=2)
    """
    )
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--concurrency-backends=greenlet", "--benchmark-json=run.json"
    )
    result.assert_outcomes(passed=1)
    (bench,) = json.loads((pytester.path / "run.json").read_text())["benchmarks"]
    assert len(bench["stats"]["data"]) == 2 and "warmup_rounds" not in bench["extra_info"]


def test_a_counters_precision_needs_no_second_of_wall_time(monkeypatch):
    """pytest-benchmark gives up finding a timer's precision after one second of wall time (None:
    a TypeError in every test's calibration). Each reading of a counted process is a dump, slow on a
    loaded machine; the counter's precision is found from its readings alone."""
    from pytest_benchmark import timers
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_concurrency.measure import driver

    counts = iter(range(0, 10**6, 7))  # each reading costs 7 instructions more than the last

    def counter():
        return float(next(counts))

    wall = iter(
        range(0, 10**6, 2)
    )  # two seconds pass between two readings, as seen by pytest-benchmark
    monkeypatch.setattr(timers, "timeout_timer", lambda: float(next(wall)))
    assert timers.compute_timer_precision(counter) is None  # what failed the layout pass
    monkeypatch.setattr(BenchmarkFixture, "_precisions", {})
    assert driver.counter_precision(BenchmarkFixture, counter) == 7.0
    assert BenchmarkFixture._precisions[counter] == 7.0  # where pytest-benchmark looks first


class _Instructions:
    """A counter that reads instructions as callgrind's would: each round read (``round_timer``)
    costs ``READING`` of its own, and ``work`` costs ``WORK``."""

    READING, WORK = 300.0, 2000.0

    def __init__(self):
        self.total = 0.0

    def __call__(self) -> float:
        self.total += self.READING
        return self.total

    def round_timer(self):
        started: list[float] = []

        def read() -> float:
            if not started:
                started.append(self.total)
                return 0.0
            return self.total - started[0] + self.READING

        return read

    def work(self) -> None:
        self.total += self.WORK


def _counted_fixture(counter, min_rounds: int):
    from types import SimpleNamespace

    from pytest_benchmark.fixture import BenchmarkFixture

    log = SimpleNamespace(debug=lambda *a, **k: None, warning=lambda *a, **k: None)
    return BenchmarkFixture(
        SimpleNamespace(name="test_x", nodeid="test_x.py::test_x"),
        disable_gc=False,
        timer=SimpleNamespace(target=counter),
        min_rounds=min_rounds,
        min_time=0.000005,
        max_time=1.0,
        precision=None,
        confidence=None,
        warmup=False,
        warmup_iterations=0,
        calibration_precision=10,
        add_stats=lambda stats: None,
        logger=log,
        warner=lambda *a, **k: None,
        disabled=False,
        cprofile=False,
        cprofile_loops=None,
        cprofile_dump=False,
    )


@pytest.mark.parametrize("settles", [True, False])
def test_a_counted_call_gets_rounds_long_enough_that_the_reading_is_one_percent(
    monkeypatch, settles
):
    """pytest-benchmark calibrates with calls of its own, ten times more loops each, until the
    reading's own cost is under 10% of a round, then measures five rounds: under valgrind every
    reading is a dump. Counted, the warm-up's last count calibrates, to under 1% (rounds of many
    calls: what varies from call to call averages out), and the reading's own count is taken off
    each round (left in, a +1% change would read +0.99%); its first call is not read, and three
    rounds are measured, whether two calls counted alike or they never did."""
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_concurrency.measure import driver

    monkeypatch.setattr(BenchmarkFixture, "_precisions", {})
    monkeypatch.setattr(callgrind.Callgrind, "before_round", lambda self: None)
    counter = _Instructions()
    monkeypatch.setattr(callgrind.Callgrind, "round_timer", lambda self: counter.round_timer())
    bench = _counted_fixture(counter, min_rounds=5)
    driver.WarmUntilStable(bench, callgrind.Callgrind())
    calls = []

    def work():
        calls.append(1)
        counter.work()
        if not settles:  # each call 1% more than the last: two never agree within WARM
            counter.total += counter.WORK * 0.01 * len(calls)

    bench(work)
    rounds, iterations = bench.stats.stats.data, bench.stats.iterations
    reading_share = counter.READING / (counter.READING + iterations * counter.WORK)
    assert 0.005 < reading_share <= driver.READING_SHARE, iterations
    assert len(rounds) == callgrind.Callgrind.ROUNDS[0] == 3
    if settles:  # the reading's own instructions are not the call's
        assert rounds == [counter.WORK] * 3
    # one call unread, those read until two agree (at most MAX_WARMUP), then the rounds, and no
    # call of pytest-benchmark's calibration (and one more, of the test's own result)
    read = 2 if settles else callgrind.Callgrind.MAX_WARMUP
    assert bench.extra_info["warmup_rounds"] == read
    assert len(calls) == 1 + read + len(rounds) * iterations + 1


@pytest.mark.parametrize("work", [2e7, 2e8], ids=["large", "heavy"])
def test_a_call_that_dwarfs_a_reading_has_its_two_agreeing_warm_up_counts_as_its_rounds(
    monkeypatch, work
):
    """One call a round is read in the warm-up as in a round, so the two warm-up counts that agree
    are its rounds, and it is called no more; one of ``HEAVY`` instructions or more is then left
    uninstrumented until the next reading (pytest-benchmark's call for its result)."""
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_concurrency.measure import driver

    monkeypatch.setattr(BenchmarkFixture, "_precisions", {})
    monkeypatch.setattr(callgrind.Callgrind, "before_round", lambda self: None)
    paused = []
    monkeypatch.setattr(callgrind.Callgrind, "pause", lambda self: paused.append(len(calls)))
    counter = _Instructions()
    counter.WORK = work
    monkeypatch.setattr(callgrind.Callgrind, "round_timer", lambda self: counter.round_timer())
    bench = _counted_fixture(counter, min_rounds=5)
    driver.WarmUntilStable(bench, callgrind.Callgrind())
    calls: list[int] = []

    def call():
        calls.append(1)
        counter.work()

    bench(call)
    assert bench.stats.iterations == 1 and bench.extra_info["warmup_rounds"] == 2
    assert bench.stats.stats.data == [work] * 2  # the reading's own instructions taken off
    assert len(calls) == 1 + 2 + 1  # unread, the two read, pytest-benchmark's for its result
    assert paused == ([3] if work >= driver.HEAVY else [])  # before the call for its result


@pytest.mark.parametrize("work", [29_000.0, 31_000.0], ids=["two calls a round", "one"])
def test_a_calls_count_is_the_same_whatever_calls_a_round_it_got(monkeypatch, work):
    """A call near where one call a round becomes two (the reading at most 1% of a round): with
    the reading's own count left in, a call read more where it got one (yarl's ipv6 URL benchmark:
    258,101 against 255,577, and whichever test ran first got one). A round's count has the
    reading taken off, so a call counts what it runs."""
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_concurrency.measure import driver

    monkeypatch.setattr(BenchmarkFixture, "_precisions", {})
    monkeypatch.setattr(callgrind.Callgrind, "before_round", lambda self: None)
    counter = _Instructions()
    counter.WORK = work  # the reading's 300 are 1% of 30,000: the step lies between the two
    monkeypatch.setattr(callgrind.Callgrind, "round_timer", lambda self: counter.round_timer())
    bench = _counted_fixture(counter, min_rounds=5)
    driver.WarmUntilStable(bench, callgrind.Callgrind())
    bench(counter.work)
    assert bench.stats.iterations == (2 if work < 30_000 else 1)
    assert set(bench.stats.stats.data) == {work}


def test_a_call_whose_warm_up_never_settles_is_counted_in_rounds_of_its_own(monkeypatch):
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_concurrency.measure import driver

    monkeypatch.setattr(BenchmarkFixture, "_precisions", {})
    monkeypatch.setattr(callgrind.Callgrind, "before_round", lambda self: None)
    counter = _Instructions()
    counter.WORK = 2e7
    monkeypatch.setattr(callgrind.Callgrind, "round_timer", lambda self: counter.round_timer())
    bench = _counted_fixture(counter, min_rounds=5)
    driver.WarmUntilStable(bench, callgrind.Callgrind())
    calls: list[int] = []

    def call():  # 0.3% fewer each call up to the warm-up's last read, then alike
        calls.append(1)
        counter.total += 2e7 * (1 - 0.003 * min(len(calls), 6))

    bench(call)
    # no two of the warm-up's reads agree within REPLAYED_WITHIN: three rounds of its own
    assert bench.extra_info["warmup_rounds"] == callgrind.Callgrind.MAX_WARMUP
    assert len(set(bench.stats.stats.data)) == 1 and len(bench.stats.stats.data) == 3
    assert len(calls) == 1 + callgrind.Callgrind.MAX_WARMUP + 3 + 1


DUMP = """version: 1
creator: callgrind-3.19.0
events: Ir
summary: 1500
ob=(1) /usr/lib/libpython3.11.so.1.0
fn=(1) _PyEval_EvalFrameDefault
0 1000
fn=(2) PyObject_Malloc
0 300
ob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
fn=(3) memcpy
0 200
"""


@pytest.mark.parametrize("apart", [True, False], ids=["apart", "its process failed"])
def test_profiles_handed_over_are_read_outside_the_counted_process(tmp_path, monkeypatch, apart):
    """A counted session run whole under valgrind hands each test's last dump over and reads them
    all at its end in one process that valgrind does not trace (a dump took 0.3 s to read there);
    if that process fails, they are read where they are, slowly but read."""
    dumps = [tmp_path / f"callgrind.1.{n}" for n in (1, 2)]
    for dump in dumps:
        dump.write_text(DUMP)
    expected = profile.read(str(dumps[0]))
    assert expected["profile"][0] == ["_PyEval_EvalFrameDefault", "libpython3.11", 1000]
    if apart:  # not here: in the process of its own

        def not_here(path, top=profile.FUNCTIONS):
            raise AssertionError(f"{path} read in the counted process")

        monkeypatch.setattr(profile, "read", not_here)
    else:
        monkeypatch.setattr(sys, "executable", "/bin/false")
    extras = [{"profile_dump": str(d), "other": n} for n, d in enumerate(dumps)]
    extras.append({"other": 2})  # a test that handed nothing over
    callgrind.Callgrind().received_apart(extras)
    assert extras == [
        {**expected, "other": 0},
        {**expected, "other": 1},
        {"other": 2},
    ]
    assert not any(d.exists() for d in dumps)  # read once, then gone


@pytest.mark.slow
@needs_valgrind
def test_a_suites_pytest_timeout_is_stretched_in_the_counted_processes(pytester):
    """FastAPI 0.165's ``timeout = 20`` stopped its tests counted (30-50x slower): a test must
    pass counted as it passes at full speed. About 60 s (one counted test, one more layout, started
    as a process so that both kinds of counted process read the limit)."""
    pytester.makeini("[pytest]\ntimeout = 4\n")
    pytester.makepyfile(
        test_plain="""
        def work():
            return sum(i * i for i in range(200_000))  # ~20 ms here, about 1 s a call counted

        def test_plain(benchmark):
            assert benchmark.pedantic(work, rounds=2) == 2666646666700000
    """
    )
    result = pytester.runpytest_subprocess(
        "--benchmark-only",
        "--concurrency-measure=instructions",
        "--concurrency-layouts=2",
        "--concurrency-layouts-from=start",
        "-p",
        "timeout",
        timeout=900,
    )
    result.assert_outcomes(passed=1)
    assert "Timeout" not in result.stdout.str()
