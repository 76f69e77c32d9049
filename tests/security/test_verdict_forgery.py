"""A run cannot forge its verdict: status, exit code and signal come from the kernel's wait
status and the agent's own observations, never from bytes the code writes (design §3)."""

from __future__ import annotations

import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.result import ExecResult
from tests.security.harness import S, Context, case

pytestmark = pytest.mark.anyio

# A plausible "the run passed" frame for every request id a forger might guess, as the agent
# would frame it (length-prefixed JSON header, stdout payload).
FORGED_FRAMES = r"""
import json, struct
def frame(header, payload=b''):
    head = json.dumps(header, separators=(',', ':')).encode()
    return struct.pack('>I', 4 + len(head) + len(payload)) + struct.pack('>I', len(head)) + head + payload
FRAMES = b''.join(
    frame(dict(id=i, ok=True, status='ok', exit_code=0, signal=None, stdout_bytes=3,
               stderr_bytes=0, stdout_len=3, truncated=False, duration_ms=1.0, cpu_ms=1.0), b'ok\n')
    for i in range(1, 200)
)
"""


def _no_signal(result: ExecResult) -> None:
    assert result.signal is None, f"an exit(1) reported as a signal: {result!r}"


def _stdout_is(text: str):
    def check(result: ExecResult) -> None:
        assert result.stdout == text, f"stdout {result.stdout!r}, expected {text!r}: {result!r}"

    return check


FORGED_NOTES = [
    case(
        "fd3_exit_note_then_failed_assertion",
        "python",
        "import os; os.write(3, b'0 0\\n'); raise AssertionError('tests failed')",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "fd3_exit_note_ignoring_ebadf_then_failed_assertion",
        "python",
        """
        import os
        try:
            os.write(3, b'0 0\\n')
        except OSError:
            pass
        raise AssertionError('tests failed')
        """,
        S.ERROR,
        exit_code=1,
    ),
    case(
        "exit_note_on_every_inherited_fd_then_exit_1",
        "python",
        """
        import os
        for fd in range(256):
            try:
                os.write(fd, b'0 0\\n0 0.000\\n')
            except OSError:
                pass
        raise SystemExit(1)
        """,
        S.ERROR,
        exit_code=1,
        expect=_no_signal,
    ),
    case(
        "exit_note_then_stdio_closed_then_exit_1",
        "python",
        """
        import os, time
        for fd in range(3, 256):
            try:
                os.write(fd, b'0 0\\n')
            except OSError:
                pass
        for fd in (0, 1, 2):
            os.close(fd)
        time.sleep(0.3)
        os._exit(1)
        """,
        S.ERROR,
        exit_code=1,
    ),
    case(
        "forged_protocol_frames_on_every_inherited_fd_then_exit_1",
        "python",
        FORGED_FRAMES
        + """
import os
for fd in range(256):
    try:
        os.write(fd, FRAMES)
    except OSError:
        pass
raise SystemExit(1)
""",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "forged_protocol_frames_on_stdout_and_stderr_then_exit_1",
        "python",
        FORGED_FRAMES
        + """
import os, sys
sys.stdout.buffer.write(FRAMES); sys.stdout.flush()
sys.stderr.buffer.write(FRAMES); sys.stderr.flush()
raise SystemExit(1)
""",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "bash_writes_exit_notes_to_every_fd_then_exit_1",
        "bash",
        """
        for fd in $(seq 0 255); do { printf '0 0\\n' >&"$fd"; } 2>/dev/null; done
        exit 1
        """,
        S.ERROR,
        exit_code=1,
    ),
]


@pytest.mark.parametrize("case", FORGED_NOTES)
async def test_notes_and_frames_written_by_the_run_do_not_change_its_verdict(harness, case):
    await harness.verify(case)


AGENT_TARGETS = [
    case(
        "write_forged_frames_into_the_agents_fds",
        "python",
        FORGED_FRAMES
        + """
import glob, os
paths = set(glob.glob('/proc/@AGENT_PID@/fd/*')) | set('/proc/@AGENT_PID@/fd/%d' % i for i in range(64))
opened = 0
for path in sorted(paths):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    opened += 1
    try:
        os.write(fd, FRAMES)
    except OSError:
        pass
print('opened', opened)
raise SystemExit(1)
""",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "write_forged_frames_into_every_other_process_fds",
        "python",
        FORGED_FRAMES
        + """
import glob, os
me = str(os.getpid())
for path in glob.glob('/proc/[0-9]*/fd/*'):
    if path.split('/')[2] == me:
        continue
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        os.write(fd, FRAMES)
    except OSError:
        pass
raise SystemExit(1)
""",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "the_agents_memory_cannot_be_opened",
        "python",
        """
        import os
        for mode in (os.O_RDONLY, os.O_RDWR):
            try:
                fd = os.open('/proc/@AGENT_PID@/mem', mode)
            except OSError:
                continue
            raise SystemExit('ESCAPED: opened the agent memory with mode %d' % mode)
        print('denied')
        raise SystemExit(1)
        """,
        S.ERROR,
        exit_code=1,
        expect=_stdout_is("denied\n"),
    ),
    case(
        "the_agents_environ_and_fd_table_cannot_be_read",
        "python",
        """
        import os
        found = []
        for path in ('/proc/@AGENT_PID@/environ', '/proc/@AGENT_PID@/fd', '/proc/@AGENT_PID@/fdinfo/0'):
            try:
                if os.path.isdir(path):
                    os.listdir(path)
                else:
                    open(path, 'rb').read()
                found.append(path)
            except OSError:
                pass
        if found:
            raise SystemExit('ESCAPED: read %s' % found)
        print('denied')
        """,
        S.OK,
        exit_code=0,
    ),
]


@pytest.mark.parametrize("case", AGENT_TARGETS)
async def test_the_agents_descriptors_and_memory_are_out_of_reach(harness, case):
    await harness.verify(case)


MARKERS = [
    case("prints_MemoryError_then_exit_1", "python", "print('MemoryError')\nraise SystemExit(1)", S.ERROR, exit_code=1),
    case(
        "prints_bad_alloc_on_both_streams_then_exit_1",
        "python",
        "import sys\nprint('std::bad_alloc')\n"
        "sys.stderr.write('terminate called after throwing an instance of std::bad_alloc\\n')\nraise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "writes_Killed_to_stderr_then_exit_1",
        "python",
        "import sys\nsys.stderr.write('Killed\\n')\nraise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "fake_memoryerror_traceback_then_exit_1",
        "python",
        "import sys\nsys.stderr.write('Traceback (most recent call last):\\n  File \"<string>\", line 1\\nMemoryError\\n')\n"
        "raise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "fake_timeout_messages_then_exit_1",
        "python",
        "import sys\nprint('TimeoutError: timed out')\n"
        "sys.stderr.write('timeout: the monitored command dumped core\\nTimed out\\n')\nraise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "bash_prints_Killed_and_exits_137",
        "bash",
        "echo Killed >&2\necho 'Out of memory: Killed process 1' >&2\nexit 137",
        S.ERROR,
        exit_code=137,
        signal=None,
    ),
    case(
        "bash_prints_segfault_and_exits_139",
        "bash",
        "echo 'Segmentation fault (core dumped)' >&2\nexit 139",
        S.ERROR,
        exit_code=139,
        signal=None,
    ),
    case("raises_MemoryError_without_allocating", "python", "raise MemoryError('fake')", S.ERROR, exit_code=1),
]


@pytest.mark.parametrize("case", MARKERS)
async def test_printed_oom_and_timeout_markers_do_not_set_the_status(harness, case):
    await harness.verify(case)


PASSES = [
    case(
        "prints_ok_PASSED_and_0_0_then_exit_1",
        "python",
        "print('ok')\nprint('PASSED')\nprint('0 0')\nprint('=== 10 passed in 0.01s ===')\nraise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "prints_all_tests_passed_then_exit_3",
        "python",
        "print('All tests passed!')\nimport sys; sys.exit(3)",
        S.ERROR,
        exit_code=3,
    ),
    case("exit_0_after_printing_FAILED", "python", "print('FAILED')\nexit(0)", S.OK, exit_code=0),
    case("os_exit_0_after_a_failed_check", "python", "import os\nprint('AssertionError')\nos._exit(0)", S.OK, exit_code=0),
    case("bash_echo_PASSED_then_false", "bash", "echo PASSED\nfalse", S.ERROR, exit_code=1),
]


@pytest.mark.parametrize("case", PASSES)
async def test_the_exit_status_decides_not_the_printed_result(harness, case):
    await harness.verify(case)


SIGNALS = [
    case("sigkill_self_is_killed_not_oom", "python", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", S.KILLED, signal=9),
    case(
        "prints_MemoryError_then_sigkill_self_is_killed_not_oom",
        "python",
        "import os, signal, sys\nprint('MemoryError')\nsys.stderr.write('Killed\\n')\nos.kill(os.getpid(), signal.SIGKILL)",
        S.KILLED,
        signal=9,
    ),
    case("sigsegv_self_is_killed", "python", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", S.KILLED, signal=11),
    case(
        "self_sent_sigxcpu_is_not_a_timeout",
        "python",
        "import os, signal\nsignal.signal(signal.SIGXCPU, signal.SIG_DFL)\nos.kill(os.getpid(), signal.SIGXCPU)",
        S.KILLED,
        signal=24,
    ),
    case("bash_kill_9_self_is_killed", "bash", "kill -9 $$", S.KILLED, signal=9),
]


@pytest.mark.parametrize("case", SIGNALS)
async def test_a_self_inflicted_signal_is_reported_as_that_signal(harness, case):
    await harness.verify(case)


MONKEYPATCHES = [
    case(
        "patched_sys_exit_and_excepthook_then_assertion",
        "python",
        "import sys\nsys.exit = lambda *a: None\nsys.excepthook = lambda *a: None\nraise AssertionError('tests failed')",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "patched_os_exit_and_write_then_assertion",
        "python",
        "import os\nos._exit = lambda *a: None\nos.write = lambda *a: 0\nraise AssertionError('tests failed')",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "patched_builtins_and_assert_then_exit_1",
        "python",
        """
        import builtins
        builtins.AssertionError = type('AssertionError', (BaseException,), {})
        builtins.exit = builtins.quit = lambda *a: None
        builtins.print = lambda *a, **k: None
        builtins.__import__ = None
        raise SystemExit(1)
        """,
        S.ERROR,
        exit_code=1,
    ),
    case(
        "patched_stdio_objects_then_exit_1",
        "python",
        """
        import sys
        class Broken:
            def write(self, *a): raise OSError('broken')
            def flush(self): raise OSError('broken')
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = Broken()
        raise SystemExit(1)
        """,
        S.ERROR,
    ),
]


@pytest.mark.parametrize("case", MONKEYPATCHES)
async def test_a_monkeypatched_runtime_cannot_report_success(harness, case):
    await harness.verify(case)


async def _kernel_forges_later_statuses(sb: Sandbox, ctx: Context) -> ExecResult:
    forged = await sb.kernel_exec(
        "import os\nfor seq in range(1, 200):\n    os.write(3, b'%d 0\\n' % seq)", timeout=2
    )
    assert forged.status is not S.INFRA_ERROR, f"{forged!r}"
    return await sb.kernel_exec("raise AssertionError('tests failed')", timeout=2)


async def _shell_forges_later_statuses(sb: Sandbox, ctx: Context) -> ExecResult:
    forged = await sb.shell('for seq in $(seq 1 200); do echo "$seq 0" >&3; done', timeout=2)
    assert forged.status is not S.INFRA_ERROR, f"{forged!r}"
    return await sb.shell("false", timeout=2)


SESSIONS = [
    case("kernel_cell_forges_status_lines_for_later_cells", "action", _kernel_forges_later_statuses, S.ERROR),
    case(
        "shell_command_forges_status_lines_for_later_commands",
        "action",
        _shell_forges_later_statuses,
        S.ERROR,
        exit_code=1,
    ),
]


@pytest.mark.parametrize("case", SESSIONS)
async def test_a_session_cannot_forge_the_status_of_a_later_command(harness, case):
    await harness.verify(case)
