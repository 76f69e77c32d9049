"""Exhausting a resource is the code's own failure: it gets a typed verdict (never
``infra_error``), the sandbox next to it does not notice, and nothing outlives the run."""

from __future__ import annotations

import pytest

from gem_sandbox.sandbox.result import ExecResult
from tests.security.harness import LIMITS, LINEAR_FORKS, PIDS, S, case

pytestmark = pytest.mark.anyio

ANY_HONEST = (S.OK, S.ERROR, S.TIMEOUT, S.KILLED, S.OOM, S.OUTPUT_LIMIT)


def _at_most(limit: int):
    def check(result: ExecResult) -> None:
        count = int(result.stdout.split()[-1])
        assert count <= limit, f"the run reached {count}, past the sandbox's limit of {limit}: {result!r}"

    return check


def _prompt(seconds: float):
    def check(result: ExecResult) -> None:
        assert result.duration_ms < seconds * 1000, f"the run took {result.duration_ms:.0f} ms: {result!r}"

    return check


def _stdout_in(*choices: str):
    def check(result: ExecResult) -> None:
        assert result.stdout.strip() in choices, f"stdout {result.stdout!r}, expected one of {choices}: {result!r}"

    return check


PROCESS_BOMBS = [
    case(
        "linear_forks_stop_at_the_pids_limit",
        "python",
        LINEAR_FORKS,
        S.OK,
        expect=_at_most(PIDS),
    ),
    case(
        "thread_bomb_stops_at_the_pids_limit",
        "python",
        """
        import threading, time
        threading.stack_size(64 * 1024)
        started = 0
        for _ in range(@PIDS@ * 3):
            try:
                threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            except RuntimeError:
                break
            started += 1
        print(started)
        import os; os._exit(0)
        """,
        S.OK,
        expect=_at_most(PIDS),
    ),
    case(
        "python_fork_bomb",
        "python",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        (S.TIMEOUT, S.KILLED, S.ERROR),
        timeout=1.5,
        bounded_pids=True,
    ),
    case(
        "bash_fork_bomb",
        "bash",
        ":(){ :|:& };:\nsleep 1",
        ANY_HONEST,
        timeout=1.5,
        bounded_pids=True,
    ),
    case(
        "background_sleep_flood_is_killed_at_the_deadline",
        "bash",
        "for i in $(seq 1 300); do sleep 30 & done 2>/dev/null\nwait",
        (S.TIMEOUT,),
        timeout=1.0,
    ),
]


@pytest.mark.parametrize("case", PROCESS_BOMBS)
async def test_process_and_thread_bombs_are_contained(harness, case):
    await harness.verify(case)


MEMORY_BOMBS = [
    case(
        "bytearray_growth",
        "python",
        "x = []\nwhile True:\n    x.append(bytearray(16 * 2 ** 20))",
        (S.OOM, S.ERROR, S.KILLED),
        timeout=3.0,
    ),
    case(
        "one_huge_allocation",
        "python",
        "x = bytearray(10 ** 10)",
        (S.OOM, S.ERROR, S.KILLED),
    ),
    case(
        "memory_spread_over_children",
        "python",
        """
        import os
        kids = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                try:
                    x = bytearray(100 * 2 ** 20)
                    for i in range(0, len(x), 4096):
                        x[i] = 1
                except MemoryError:
                    os._exit(3)
                os._exit(0)
            kids.append(pid)
        codes = [os.waitpid(k, 0)[1] for k in kids]
        print(codes)
        """,
        ANY_HONEST,
        timeout=3.0,
    ),
    case(
        "memory_bomb_in_a_kernel_cell",
        "kernel",
        "x = []\nwhile True:\n    x.append(bytearray(16 * 2 ** 20))",
        (S.OOM, S.ERROR, S.KILLED),
        timeout=3.0,
    ),
]


@pytest.mark.parametrize("case", MEMORY_BOMBS)
async def test_memory_bombs_get_a_typed_verdict(harness, case):
    await harness.verify(case)


FILL = """
import errno, os
def fill(directory):
    chunk = b'x' * 2 ** 20
    n = 0
    while n < 400:
        try:
            with open(os.path.join(directory, 'fill%d' % n), 'wb') as f:
                for _ in range(16):
                    f.write(chunk)
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        n += 1
    return 'never full'
print(fill(@DIR@))
"""

DISK_FILLS = [
    case("work_dir_fill", "python", FILL.replace("@DIR@", "'/work'"), S.OK, expect=_stdout_in("ENOSPC", "EDQUOT")),
    case("tmp_fill", "python", FILL.replace("@DIR@", "'/tmp'"), S.OK, expect=_stdout_in("ENOSPC", "EDQUOT")),
    case("dev_shm_fill", "python", FILL.replace("@DIR@", "'/dev/shm'"), S.OK, expect=_stdout_in("ENOSPC", "EDQUOT")),
    case(
        "inode_fill_with_empty_files",
        "python",
        """
        import os, time
        os.mkdir('/tmp/inodes')
        deadline = time.monotonic() + 1.0
        n = 0
        try:
            while time.monotonic() < deadline:
                for _ in range(500):
                    open('/tmp/inodes/%d' % n, 'w').close()
                    n += 1
        except OSError as exc:
            print('stopped', exc.errno)
        print(n)
        """,
        S.OK,
        timeout=3.0,
    ),
    case(
        "one_huge_file_past_rlimit_fsize_from_bash",
        "bash",
        "head -c 200M /dev/zero > /work/huge\necho \"head: $?\"\nexit 1",
        (S.ERROR, S.KILLED),
        timeout=3.0,
    ),
    case(
        "sparse_file_past_rlimit_fsize",
        "python",
        "f = open('/work/sparse', 'wb')\nf.truncate(10 ** 11)",
        (S.ERROR, S.KILLED),
    ),
]


@pytest.mark.parametrize("case", DISK_FILLS)
async def test_disk_and_inode_fills_stop_at_the_sandboxes_own_limits(harness, case):
    await harness.verify(case)


def _capped(result: ExecResult) -> None:
    cap = LIMITS.max_output_bytes
    assert result.truncated, f"output past the cap not marked truncated: {result.stdout_bytes} bytes"
    assert len(result.stdout.encode()) <= 4 * cap and len(result.stderr.encode()) <= 4 * cap, (
        f"kept {len(result.stdout)} + {len(result.stderr)} characters past a {cap} byte cap"
    )


FLOODS = [
    case(
        "stdout_flood_without_newlines",
        "python",
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
        S.OUTPUT_LIMIT,
        expect=_capped,
    ),
    case(
        "binary_stdout_flood",
        "python",
        "import os\nwhile True:\n    os.write(1, os.urandom(65536))",
        S.OUTPUT_LIMIT,
        expect=_capped,
    ),
    case(
        "stderr_flood",
        "python",
        "import os\nwhile True:\n    os.write(2, b'E' * 65536)",
        S.OUTPUT_LIMIT,
        expect=_capped,
    ),
    case("bash_yes_flood", "bash", "yes", S.OUTPUT_LIMIT, expect=_capped),
    case("bash_urandom_flood", "bash", "cat /dev/urandom", S.OUTPUT_LIMIT, expect=_capped),
    case(
        "flood_from_a_shell_session",
        "shell",
        "head -c 100000000 /dev/zero | tr '\\0' x",
        S.OUTPUT_LIMIT,
        expect=_capped,
    ),
]


@pytest.mark.parametrize("case", FLOODS)
async def test_output_floods_are_capped(harness, case):
    await harness.verify(case)


DEADLINES = [
    case(
        "python_loop_ignoring_sigterm_and_sigint",
        "python",
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass",
        S.TIMEOUT,
        timeout=1.0,
        expect=_prompt(3.0),
    ),
    case(
        "bash_loop_trapping_term",
        "bash",
        "trap '' TERM INT HUP\nwhile :; do :; done",
        S.TIMEOUT,
        timeout=1.0,
        expect=_prompt(3.0),
    ),
    case(
        "tree_of_sigterm_ignoring_children",
        "python",
        """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _ in range(8):
            if os.fork() == 0:
                os.setsid()
                while True:
                    time.sleep(0.01)
        while True:
            time.sleep(0.01)
        """,
        S.TIMEOUT,
        timeout=1.0,
        expect=_prompt(3.0),
    ),
    case(
        "shell_command_ignoring_sigterm",
        "shell",
        "trap '' TERM INT; while :; do :; done",
        (S.TIMEOUT,),
        timeout=1.0,
    ),
]


@pytest.mark.parametrize("case", DEADLINES)
async def test_loops_ignoring_signals_end_at_the_deadline_with_their_whole_tree(harness, case):
    await harness.verify(case)


ORPHANS = [
    case(
        "setsid_sleep_outlives_nothing",
        "python",
        "import subprocess\nsubprocess.Popen(['setsid', 'sleep', '301'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
        S.OK,
        exit_code=0,
    ),
    case(
        "python_double_fork_daemon",
        "python",
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.chdir('/')
                for fd in range(3):
                    os.close(fd)
                time.sleep(302)
            os._exit(0)
        time.sleep(0.1)
        """,
        S.OK,
        exit_code=0,
    ),
    case(
        "bash_nohup_and_disown",
        "bash",
        "nohup sleep 303 >/dev/null 2>&1 &\n(setsid sleep 304 &)\nsleep 305 & disown\necho started",
        S.OK,
        exit_code=0,
    ),
    case(
        "pile_of_zombies",
        "python",
        """
        import os, time
        made = 0
        for _ in range(40):
            try:
                if os.fork() == 0:
                    os._exit(0)
            except OSError:
                break
            made += 1
        time.sleep(0.3)
        print(made)
        """,
        S.OK,
        exit_code=0,
        timeout=3.0,
    ),
    case(
        "background_child_closes_stdout_and_sleeps",
        "python",
        """
        import os, time
        if os.fork() == 0:
            os.close(1)
            os.close(2)
            time.sleep(306)
            os._exit(0)
        print('main done')
        """,
        S.OK,
        exit_code=0,
        expect=_prompt(2.0),
    ),
    case(
        "background_job_holding_stdout_open",
        "bash",
        "(sleep 307; echo never) &\necho early",
        S.OK,
        exit_code=0,
        expect=_prompt(2.0),
    ),
    case(
        "stopped_child_left_behind",
        "python",
        "import os, signal, time\npid = os.fork()\nif pid == 0:\n    time.sleep(308)\nos.kill(pid, signal.SIGSTOP)\ntime.sleep(0.1)",
        S.OK,
        exit_code=0,
    ),
]


@pytest.mark.parametrize("case", ORPHANS)
async def test_orphans_daemons_and_zombies_end_with_the_run(harness, case):
    await harness.verify(case)


OTHER_LIMITS = [
    case(
        "file_descriptor_exhaustion",
        "python",
        "import os\nfds = []\ntry:\n    while True:\n        fds.extend(os.pipe())\nexcept OSError as exc:\n    print('stopped', exc.errno)\nraise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "cpu_burn_until_the_deadline",
        "python",
        "while True:\n    pass",
        S.TIMEOUT,
        timeout=1.0,
        expect=_prompt(3.0),
    ),
]


@pytest.mark.parametrize("case", OTHER_LIMITS)
async def test_other_per_run_limits_give_a_typed_verdict(harness, case):
    await harness.verify(case)
