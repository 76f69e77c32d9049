"""``commands`` of the unmodified ``e2b`` SDK against the e2b-compatible endpoint (Docker
backend): foreground and background commands, their output and exit codes, stdin, kill,
list and timeouts; and the e2b backend itself, whose agent runs inside such a sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import e2b
import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.backends.e2b import E2BBackend, E2BOptions
from gem_sandbox.sandbox.result import Status
from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, docker_client, sandbox_image, serving  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
async def service(sandbox_image: str) -> AsyncIterator[Service]:  # noqa: F811
    async with serving("docker", sandbox_image, e2b_compatible=True) as running:
        yield running


def sdk(service: Service) -> dict[str, Any]:
    return {"api_url": service.url, "sandbox_url": service.url, "api_key": ALPHA.secret}


@pytest.fixture
async def sandbox(service: Service) -> AsyncIterator[e2b.AsyncSandbox]:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    yield sandbox
    await sandbox.kill()


async def test_a_command_answers_its_output_and_exit_code(sandbox: e2b.AsyncSandbox) -> None:
    result = await sandbox.commands.run("echo out; echo err >&2")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 0)
    with pytest.raises(e2b.CommandExitException) as failed:
        await sandbox.commands.run("echo 'exit status 0'; exit 3")
    assert (failed.value.exit_code, failed.value.stdout) == (3, "exit status 0\n")


async def test_output_streams_to_callbacks_while_it_runs(sandbox: e2b.AsyncSandbox) -> None:
    seen: list[tuple[float, str]] = []
    result = await sandbox.commands.run(
        "echo first; sleep 1; echo second", on_stdout=lambda text: seen.append((anyio.current_time(), text))
    )
    assert [text for _, text in seen] == ["first\n", "second\n"] and result.exit_code == 0
    assert seen[1][0] - seen[0][0] > 0.5


async def test_a_background_command_takes_stdin_and_can_be_killed(sandbox: e2b.AsyncSandbox) -> None:
    handle = await sandbox.commands.run("cat", background=True, stdin=True)
    await sandbox.commands.send_stdin(handle.pid, "piped\n")
    listed = await sandbox.commands.list()
    assert [p.pid for p in listed] == [handle.pid]
    await anyio.sleep(0.5)
    assert await sandbox.commands.kill(handle.pid)
    with pytest.raises(e2b.CommandExitException) as killed:
        await handle.wait()
    assert killed.value.stdout == "piped\n" and killed.value.exit_code == -1
    assert await sandbox.commands.list() == []
    assert not await sandbox.commands.kill(handle.pid)


async def test_a_command_outlives_its_stream_and_can_be_connected_to_again(sandbox: e2b.AsyncSandbox) -> None:
    handle = await sandbox.commands.run("read line; echo got $line; sleep 0.5; echo done", background=True, stdin=True)
    await handle.disconnect()
    again = await sandbox.commands.connect(handle.pid)
    await sandbox.commands.send_stdin(handle.pid, "x\n")
    result = await again.wait()
    assert (result.stdout, result.exit_code) == ("got x\ndone\n", 0)
    assert await sandbox.commands.list() == []
    with pytest.raises(e2b.NotFoundException):
        await sandbox.commands.connect(handle.pid)


async def test_a_command_past_its_timeout_is_a_timeout(sandbox: e2b.AsyncSandbox) -> None:
    with pytest.raises(e2b.TimeoutException):
        await sandbox.commands.run("sleep 30", timeout=1)


async def test_a_command_whose_sandbox_is_killed_says_the_sandbox_is_gone(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    handle = await sandbox.commands.run("sleep 60", background=True)
    await sandbox.kill()
    with pytest.raises(e2b.SandboxException, match="killed or reached its end of life"):
        await handle.wait()


async def test_runs_never_gain_privileges(sandbox: e2b.AsyncSandbox) -> None:
    as_root = await sandbox.commands.run("id -u", user="root")  # e2b's backend asks for root
    assert as_root.stdout.strip() != "0"
    with pytest.raises(e2b.CommandExitException) as sudo:
        await sandbox.commands.run("sudo true")
    assert sudo.value.exit_code != 0


async def test_a_pty_is_a_terminal_that_takes_input_and_resizes(sandbox: e2b.AsyncSandbox) -> None:
    seen = bytearray()
    terminal = await sandbox.pty.create(e2b.PtySize(rows=24, cols=80), on_data=seen.extend)
    await sandbox.pty.send_stdin(terminal.pid, b"stty size; echo $HOME\n")
    with anyio.fail_after(10):
        while b"24 80" not in seen:
            await anyio.sleep(0.05)
    await sandbox.pty.resize(terminal.pid, e2b.PtySize(rows=30, cols=100))
    async with sandbox.pty.stream_input(terminal.pid) as typed:  # ordered input, as one stream
        await typed.send(b"stty size; ")
        await typed.send(b"exit 3\n")
    with pytest.raises(e2b.CommandExitException) as ended:
        await terminal.wait()
    assert (ended.value.exit_code, b"30 100" in seen, b"/home/user" in seen) == (3, True, True)


async def test_input_streams_in_order_to_a_commands_stdin(sandbox: e2b.AsyncSandbox) -> None:
    handle = await sandbox.commands.run("cat", background=True, stdin=True)
    async with sandbox.commands.stream_input(handle.pid) as typed:
        for part in ("one ", "two ", "three"):
            await typed.send(part)
    await sandbox.commands.close_stdin(handle.pid)
    assert (await handle.wait()).stdout == "one two three"
    with pytest.raises(e2b.NotFoundException):
        async with sandbox.commands.stream_input(handle.pid) as late:
            await late.send("gone")


async def test_files_written_are_seen_by_commands(sandbox: e2b.AsyncSandbox) -> None:
    await sandbox.files.write("/home/user/data.txt", "41")
    result = await sandbox.commands.run("echo $(( $(cat data.txt) + 1 ))", envs={"UNUSED": "1"})
    assert result.stdout == "42\n"


async def test_commands_run_in_the_home_dir_the_files_api_names(sandbox: e2b.AsyncSandbox) -> None:
    await sandbox.files.write("/home/user/sub/x.txt", "in sub")
    result = await sandbox.commands.run("pwd; echo $HOME; cat /home/user/sub/x.txt")
    assert result.stdout == "/home/user\n/home/user\nin sub"
    assert (await sandbox.commands.run("pwd", cwd="/home/user/sub")).stdout == "/home/user/sub\n"


async def test_the_e2b_backend_runs_its_agent_in_an_e2b_sandbox(service: Service) -> None:
    options = E2BOptions(api_key=ALPHA.secret, api_url=service.url, sandbox_url=service.url)
    async with Runtime(E2BBackend(options), max_size=1, min_idle=1) as runtime:
        result = await runtime.run("import sys; print(sys.argv[0] == '-c' or 'ran')")
        assert result.status is Status.OK, result
        async with runtime.lease() as leased:
            await leased.write_files({"a.txt": "x"})
            assert (await leased.shell("cat a.txt")).stdout == "x"
            timed_out = await leased.run("import time; time.sleep(10)", timeout=1)
            assert timed_out.status is Status.TIMEOUT
        assert runtime.backend == "e2b"
    assert await e2b.AsyncSandbox.list(**sdk(service)).next_items() == []


async def test_the_e2b_backend_kills_sandboxes_whose_owner_died(service: Service) -> None:
    import socket

    from gem_sandbox.sandbox.backends.base import POOL_LABEL
    from gem_sandbox.sandbox.backends.e2b import OWNER_KEY
    from gem_sandbox.sandbox.backends.owners import owner_id

    dead = f"{socket.gethostname()}:999999999:1"  # no such process on this host
    orphan = await e2b.AsyncSandbox.create(metadata={POOL_LABEL: "p", OWNER_KEY: dead}, **sdk(service))
    mine = await e2b.AsyncSandbox.create(metadata={POOL_LABEL: "p", OWNER_KEY: owner_id()}, **sdk(service))
    backend = E2BBackend(E2BOptions(api_key=ALPHA.secret, api_url=service.url, sandbox_url=service.url))
    assert await backend.reap_orphans("p") == 1
    assert [s.sandbox_id for s in await e2b.AsyncSandbox.list(**sdk(service)).next_items()] == [mine.sandbox_id]
    assert not await orphan.is_running()
    await mine.kill()
