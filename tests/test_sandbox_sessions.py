"""Kernels (persistent Python namespaces) and shell sessions (persistent bash)."""

from __future__ import annotations

import anyio
import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import sandbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio


async def test_kernel_namespace_persists_between_commands(sandbox: Sandbox):
    await sandbox.kernel_exec("import math\nx = 20")
    result = await sandbox.kernel_exec("print(math.sqrt(x + 5))")
    assert (result.status, result.stdout) == (Status.OK, "5.0\n")


async def test_kernel_shows_the_value_of_a_final_expression(sandbox: Sandbox):
    assert (await sandbox.kernel_exec("x = [1, 2]\nx + [3]")).stdout == "[1, 2, 3]\n"


async def test_kernel_captures_output_of_subprocesses(sandbox: Sandbox):
    result = await sandbox.kernel_exec("import os\nos.system('echo from-a-shell; echo oops >&2')")
    assert (result.stdout, result.stderr) == ("from-a-shell\n0\n", "oops\n")


async def test_kernel_output_can_stream_as_it_is_written(sandbox: Sandbox):
    heard: list[tuple[float, int, bytes]] = []
    code = "import sys, time\nprint('first', flush=True)\ntime.sleep(0.6)\nprint('late', file=sys.stderr)"
    result = await sandbox.kernel_exec(code, on_output=lambda fd, data: heard.append((anyio.current_time(), fd, data)))
    ended = anyio.current_time()
    assert [(fd, data) for _, fd, data in heard] == [(1, b"first\n"), (2, b"late\n")]
    assert ended - heard[0][0] > 0.4  # heard while the command still ran
    assert (result.status, result.stdout, result.stderr) == (Status.OK, "first\n", "late\n")
    assert (await sandbox.kernel_exec("print('quiet')")).stdout == "quiet\n"  # not streamed unless asked


async def test_kernel_exception_is_error_and_the_namespace_survives(sandbox: Sandbox):
    await sandbox.kernel_exec("kept = 'yes'")
    failed = await sandbox.kernel_exec("raise ValueError('boom')")
    assert failed.status is Status.ERROR
    assert failed.stderr.endswith("ValueError: boom\n") and 'File "<cell>", line 1' in failed.stderr
    assert (await sandbox.kernel_exec("kept")).stdout == "'yes'\n"


async def test_kernel_timeout_interrupts_and_the_namespace_survives(sandbox: Sandbox):
    await sandbox.kernel_exec("kept = 1")
    result = await sandbox.kernel_exec(
        "import time\nprint('started', flush=True)\ntime.sleep(60)", timeout=0.5
    )
    assert result.status is Status.TIMEOUT
    assert result.stdout == "started\n" and "KeyboardInterrupt" in result.stderr
    assert (await sandbox.kernel_exec("kept")).stdout == "1\n"


async def test_kernel_that_ignores_the_interrupt_is_replaced(sandbox: Sandbox):
    await sandbox.kernel_exec("kept = 1")
    stuck = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    assert (await sandbox.kernel_exec(stuck, timeout=0.5)).status is Status.TIMEOUT
    after = await sandbox.kernel_exec("print('kept' in globals())")
    assert (after.status, after.stdout) == (Status.OK, "False\n")


async def test_kernel_restart_clears_the_namespace(sandbox: Sandbox):
    await sandbox.kernel_exec("kept = 1")
    await sandbox.kernel_restart()
    assert (await sandbox.kernel_exec("print('kept' in globals())")).stdout == "False\n"


async def test_kernels_are_separate_by_name(sandbox: Sandbox):
    await sandbox.kernel_exec("x = 'a'", kernel="a")
    await sandbox.kernel_exec("x = 'b'", kernel="b")
    assert (await sandbox.kernel_exec("x", kernel="a")).stdout == "'a'\n"


async def test_shell_keeps_cwd_and_exports_between_commands(sandbox: Sandbox):
    await sandbox.shell("mkdir -p sub && cd sub && export GREETING=hi && LOCAL=no")
    result = await sandbox.shell(
        "echo \"$(pwd) $GREETING $LOCAL\"; bash -c 'echo child sees $GREETING'"
    )
    assert result.stdout == f"{sandbox.hello['workdir']}/sub hi no\nchild sees hi\n"


async def test_shell_separates_stdout_stderr_and_exit_code(sandbox: Sandbox):
    result = await sandbox.shell("echo out; echo err >&2; (exit 7)")
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        Status.ERROR,
        7,
        "out\n",
        "err\n",
    )


async def test_shell_commands_do_not_read_the_next_command(sandbox: Sandbox):
    assert (await sandbox.shell("cat; echo done")).stdout == "done\n"
    assert (await sandbox.shell("echo next")).stdout == "next\n"


async def test_shell_multiline_commands_and_syntax_errors(sandbox: Sandbox):
    assert (await sandbox.shell("for i in 1 2; do\n  echo $i\ndone")).stdout == "1\n2\n"
    assert (await sandbox.shell("echo 'unterminated")).status is Status.ERROR
    assert (await sandbox.shell("echo fine")).stdout == "fine\n"


async def test_shell_timeout_kills_the_command_but_keeps_the_session(sandbox: Sandbox):
    await sandbox.shell("export KEPT=1; cd /tmp")
    result = await sandbox.shell("echo before; sleep 60", timeout=0.5)
    assert (result.status, result.stdout) == (Status.TIMEOUT, "before\n")
    assert (await sandbox.shell("echo $KEPT $(pwd)")).stdout == "1 /tmp\n"


async def test_shell_busy_in_a_builtin_loop_is_restarted_on_timeout(sandbox: Sandbox):
    await sandbox.shell("export KEPT=1")
    assert (await sandbox.shell("while true; do :; done", timeout=0.5)).status is Status.TIMEOUT
    after = await sandbox.shell('echo "[$KEPT]"')
    assert (after.status, after.stdout) == (Status.OK, "[]\n")


async def test_shell_exit_ends_the_session_and_the_next_starts_fresh(sandbox: Sandbox):
    await sandbox.shell("export KEPT=1")
    assert (await sandbox.shell("exit 3")).exit_code == 3
    assert (await sandbox.shell('echo "[$KEPT]"')).stdout == "[]\n"


async def test_shell_sessions_are_separate_by_name(sandbox: Sandbox):
    await sandbox.shell("cd /tmp", session="a")
    assert (await sandbox.shell("pwd", session="b")).stdout == sandbox.hello["workdir"] + "\n"
    assert (await sandbox.shell("pwd", session="a")).stdout == "/tmp\n"


async def test_shell_output_flood_is_stopped(sandbox: Sandbox):
    result = await sandbox.shell("yes", timeout=30)
    assert result.status is Status.OUTPUT_LIMIT and result.stdout.startswith("y\ny\n")
    assert (await sandbox.shell("echo recovered")).stdout == "recovered\n"
