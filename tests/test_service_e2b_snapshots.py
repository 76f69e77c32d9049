"""e2b's pause and resume, snapshots and fork on the e2b-compatible endpoint (docs/service.md),
driven by the unmodified ``e2b`` SDK against a real service with the Docker backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import e2b
import pytest

from gem_sandbox.service.state import Service
from tests.service_fixtures import BETA, docker_client, sandbox_image, serving  # noqa: F401 - fixtures
from tests.test_service_e2b import sdk

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
async def service(sandbox_image: str) -> AsyncIterator[Service]:  # noqa: F811
    async with serving("docker", sandbox_image, e2b_compatible=True) as running:
        yield running


async def listed(service: Service, *states: str, key: str | None = None) -> dict[str, str]:
    """Sandbox id -> state, of those the key's token lists in ``states``."""
    options = sdk(service, key) if key else sdk(service)
    query = e2b.SandboxQuery(state=[e2b.SandboxState(state) for state in states])
    return {s.sandbox_id: s.state.value for s in await e2b.AsyncSandbox.list(query=query, **options).next_items()}


async def test_pause_keeps_files_and_resume_runs_the_same_sandbox_again(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(metadata={"run": "1"}, **sdk(service))
    await sandbox.files.write("/home/user/notes.txt", "before pause")
    assert await sandbox.pause() is True
    assert not await sandbox.is_running()
    assert await listed(service, "paused") == {sandbox.sandbox_id: "paused"}
    assert await listed(service, "running") == {}
    assert (await sandbox.get_info()).state.value == "paused"
    assert await e2b.AsyncSandbox.pause(sandbox.sandbox_id, **sdk(service)) is False  # already paused

    resumed = await e2b.AsyncSandbox.connect(sandbox.sandbox_id, **sdk(service))
    assert resumed.sandbox_id == sandbox.sandbox_id
    assert await sandbox.is_running() and await resumed.is_running()
    assert await resumed.files.read("/home/user/notes.txt") == "before pause"
    assert (await resumed.commands.run("cat notes.txt")).stdout == "before pause"
    assert await listed(service, "running", "paused") == {sandbox.sandbox_id: "running"}
    assert (await resumed.get_info()).metadata == {"run": "1"}
    await resumed.kill()


async def test_a_paused_sandbox_can_be_killed(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.pause()
    assert await sandbox.kill() is True
    assert await listed(service, "running", "paused") == {}
    with pytest.raises(e2b.SandboxNotFoundException):
        await e2b.AsyncSandbox.connect(sandbox.sandbox_id, **sdk(service))


async def test_a_running_command_is_refused_by_pause_not_lost(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    command = await sandbox.commands.run("sleep 60", background=True)
    with pytest.raises(e2b.SandboxException, match="running commands"):
        await sandbox.pause()
    assert await sandbox.is_running()
    await command.kill()
    await sandbox.kill()


async def test_snapshots_are_created_listed_restored_twice_and_deleted(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.write("/home/user/state.txt", "snapped")
    first = await sandbox.create_snapshot()
    await sandbox.files.write("/home/user/state.txt", "later")
    other = await e2b.AsyncSandbox.create(**sdk(service))
    second = await other.create_snapshot(name="mine")
    assert second.names == ["mine"]
    await other.kill()  # a snapshot outlives its sandbox; the token holds 4 sandboxes at most

    every = await e2b.AsyncSandbox.list_snapshots(**sdk(service)).next_items()
    assert {s.snapshot_id for s in every} == {first.snapshot_id, second.snapshot_id}
    of_first = await sandbox.list_snapshots().next_items()
    assert [s.snapshot_id for s in of_first] == [first.snapshot_id]

    copies = [await e2b.AsyncSandbox.create(first.snapshot_id, **sdk(service)) for _ in range(2)]
    assert [await c.files.read("/home/user/state.txt") for c in copies] == ["snapped", "snapped"]
    await copies[0].files.write("/home/user/state.txt", "diverged")
    assert await copies[1].files.read("/home/user/state.txt") == "snapped"
    assert await sandbox.files.read("/home/user/state.txt") == "later"
    named = await e2b.AsyncSandbox.create("mine", **sdk(service))
    assert await named.is_running()

    assert await e2b.AsyncSandbox.delete_snapshot(first.snapshot_id, **sdk(service)) is True
    assert await e2b.AsyncSandbox.delete_snapshot(first.snapshot_id, **sdk(service)) is False
    remaining = await e2b.AsyncSandbox.list_snapshots(**sdk(service)).next_items()
    assert [s.snapshot_id for s in remaining] == [second.snapshot_id]
    with pytest.raises(e2b.SandboxException):
        await e2b.AsyncSandbox.create(first.snapshot_id, **sdk(service))


async def test_fork_makes_independent_copies_of_a_running_sandbox(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.write("/home/user/state.txt", "parent")
    [single] = await sandbox.fork()
    assert isinstance(single, e2b.AsyncSandbox) and single.sandbox_id != sandbox.sandbox_id
    pair = await e2b.AsyncSandbox.fork(sandbox.sandbox_id, count=2, timeout=60, **sdk(service))
    forks = [single, *pair]
    assert all(isinstance(f, e2b.AsyncSandbox) for f in forks)
    assert len({f.sandbox_id for f in forks}) == 3
    for index, fork in enumerate(forks):
        assert await fork.files.read("/home/user/state.txt") == "parent"
        await fork.files.write("/home/user/state.txt", f"fork {index}")
    assert [await f.files.read("/home/user/state.txt") for f in forks] == ["fork 0", "fork 1", "fork 2"]
    assert await sandbox.files.read("/home/user/state.txt") == "parent"
    assert await sandbox.is_running()


async def test_forking_a_killed_sandbox_is_not_found(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.kill()
    with pytest.raises(e2b.SandboxNotFoundException):
        await sandbox.fork()


async def test_another_token_sees_no_paused_sandbox_snapshot_or_fork(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    snapshot = await sandbox.create_snapshot(name="private")
    [fork] = await sandbox.fork()
    await sandbox.pause()
    beta = sdk(service, BETA.secret)
    assert await listed(service, "running", "paused", key=BETA.secret) == {}
    assert await e2b.AsyncSandbox.list_snapshots(**beta).next_items() == []
    for name in (snapshot.snapshot_id, "private"):
        with pytest.raises(e2b.SandboxException):
            await e2b.AsyncSandbox.create(name, **beta)
    assert await e2b.AsyncSandbox.delete_snapshot(snapshot.snapshot_id, **beta) is False
    with pytest.raises(e2b.SandboxNotFoundException):
        await e2b.AsyncSandbox.connect(sandbox.sandbox_id, **beta)
    with pytest.raises(e2b.SandboxNotFoundException):
        await e2b.AsyncSandbox.fork(fork.sandbox_id, **beta)
    assert await e2b.AsyncSandbox.kill(sandbox.sandbox_id, **beta) is False
    assert await listed(service, "paused") == {sandbox.sandbox_id: "paused"}
