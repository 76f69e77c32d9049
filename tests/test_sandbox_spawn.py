"""Spawned programs (``Sandbox.spawn``): output that streams while they run, stdin kept open,
signals, optional deadlines, and verdicts from the same observations as a run's. On every
backend of the behaviour suite."""

from __future__ import annotations

import signal

import anyio
import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.spawned import Process
from gem_sandbox.sandbox.errors import ProcessEnded, UnsupportedLanguage
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import sandbox  # noqa: F401 - the fixture

pytestmark = pytest.mark.anyio


async def collected(process: Process) -> tuple[bytes, bytes]:
    out, err = b"", b""
    async for fd, data in process.output():
        if fd == 1:
            out += data
        else:
            err += data
    return out, err


async def test_output_arrives_while_the_program_runs(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("echo one; sleep 1; echo two >&2")
    chunks = process.output()
    assert await chunks.__anext__() == (1, b"one\n")
    assert process.running
    assert [chunk async for chunk in chunks] == [(2, b"two\n")]
    result = await process.wait()
    assert (result.status, result.exit_code, result.stdout_bytes, result.stderr_bytes) == (Status.OK, 0, 4, 4)


async def test_stdin_stays_open_for_writes_until_closed(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("cat", stdin_open=True)
    await process.write("first\n")
    chunks = process.output()
    assert await chunks.__anext__() == (1, b"first\n")
    await process.write(b"\x00\xffsecond", eof=True)
    assert b"".join([data async for _, data in chunks]) == b"\x00\xffsecond"
    assert (await process.wait()).status is Status.OK


async def test_a_program_on_a_pty_has_a_terminal_of_its_size(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn(
        "test -t 0 && test -t 1 && stty size && read line && echo got $line && stty size",
        stdin_open=True,
        pty=(24, 80),
    )
    seen = b""
    async for _, data in process.output():
        seen += data
        if b"24 80" in seen:
            break
    await process.resize(30, 100)
    await process.write("hi\n")  # the terminal echoes it, as terminals do
    out, err = await collected(process)
    result = await process.wait()
    assert (result.status, result.exit_code, err) == (Status.OK, 0, b"")
    assert (seen + out).replace(b"\r\n", b"\n").split(b"\n")[:4] == [b"24 80", b"hi", b"got hi", b"30 100"]


async def test_a_signal_ends_it_as_killed(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("sleep 30")
    await process.signal(signal.SIGKILL)
    result = await process.wait()
    assert (result.status, result.signal) == (Status.KILLED, signal.SIGKILL)


async def test_its_deadline_is_a_timeout_and_none_means_none(sandbox: Sandbox) -> None:  # noqa: F811
    bounded = await sandbox.spawn("sleep 30", timeout=0.5)
    unbounded = await sandbox.spawn("sleep 1.5; echo done")
    assert (await bounded.wait()).status is Status.TIMEOUT
    assert await collected(unbounded) == (b"done\n", b"")
    assert (await unbounded.wait()).status is Status.OK


async def test_its_exit_status_is_the_verdict_whatever_it_prints(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("echo 'exit status 0'; echo ok >&2; exit 3")
    await collected(process)
    result = await process.wait()
    assert (result.status, result.exit_code) == (Status.ERROR, 3)


async def test_writing_to_an_ended_program_raises(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("true")
    await process.wait()
    with pytest.raises(ProcessEnded):
        await process.write("late")
    with pytest.raises(ProcessEnded):
        await process.signal(signal.SIGTERM)


async def test_a_reset_ends_a_running_program(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("sleep 30")
    await sandbox.reset()
    with anyio.fail_after(5):
        result = await process.wait()
    assert result.status is Status.KILLED


async def test_python_spawns_and_streams_too(sandbox: Sandbox) -> None:  # noqa: F811
    code = "import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint(sys.stdin.readline().strip())"
    process = await sandbox.spawn(code, "python", stdin_open=True)
    chunks = process.output()
    assert await chunks.__anext__() == (1, b"a\n")
    await process.write("from stdin\n", eof=True)
    assert [data async for _, data in chunks] == [b"from stdin\n"]
    assert (await process.wait()).ok


async def test_an_unknown_language_raises_at_spawn(sandbox: Sandbox) -> None:  # noqa: F811
    with pytest.raises(UnsupportedLanguage):
        await sandbox.spawn("x", "cobol")


async def test_the_sandbox_is_clean_after_a_spawned_program(sandbox: Sandbox) -> None:  # noqa: F811
    process = await sandbox.spawn("sleep 100 & echo started")
    await collected(process)
    await process.wait()
    assert (await sandbox.stats())["processes"] == 0
