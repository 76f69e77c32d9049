"""Every kind of pool behaves as a :class:`Pool` lending :class:`LeasedSandbox`es: one set of
tests, run against the local pool (bubblewrap), the Docker pool, the remote pool over a real
pool service on loopback, and the Ray pool over a real Ray cluster on this machine.

Each kind keeps one pool open for the module; the test of closing opens a pool of its own.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.backends.base import POOL_LABEL
from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.errors import FileTransferError, ForkError, SandboxError, SnapshotNotFound
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.protocols import LeasedSandbox, Pool
from gem_sandbox.sandbox.result import Status
from tests.service_fixtures import ALPHA, serving

pytestmark = pytest.mark.anyio

CONFIG = PoolConfig(max_size=2, min_idle=1, acquire_timeout=60)

#: Whether nothing of a closed pool is left, given the pool and the sandboxes it lent.
Gone = Callable[[Any, list[LeasedSandbox]], Awaitable[bool]]


@dataclass
class Kind:
    """A kind of pool: how to make one on this kind's far side, the label it reports, and how
    to tell that nothing of a closed one is left there."""

    label: str
    make: Callable[[], Any]
    gone: Gone


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def _no_bwrap_left(pool: Any, sandboxes: list[LeasedSandbox]) -> bool:
    ids = {sandbox.id for sandbox in sandboxes}
    return not [p for p in await anyio.to_thread.run_sync(bwrap_processes) if p.box in ids]


def _local() -> Kind:
    problem = LocalBackend.check()
    if problem:
        pytest.skip(problem)
    return Kind("local", lambda: SandboxPool(LocalBackend(), CONFIG), _no_bwrap_left)


def _docker(request: pytest.FixtureRequest) -> Kind:
    from gem_sandbox.sandbox.backends.docker import DockerBackend

    problem = DockerBackend.check()
    if problem:
        pytest.skip(problem)
    config = defaults.with_options(CONFIG, {"image": request.getfixturevalue("sandbox_image")})
    client = request.getfixturevalue("docker_client")

    async def no_container_left(pool: Any, sandboxes: list[LeasedSandbox]) -> bool:
        labelled = {"label": f"{POOL_LABEL}={pool.name}"}
        return not await anyio.to_thread.run_sync(lambda: client.containers.list(all=True, filters=labelled))

    return Kind("docker", lambda: SandboxPool(DockerBackend(), config), no_container_left)


async def _remote(stack: AsyncExitStack) -> Kind:
    from gem_sandbox.sandbox.remote import RemotePool

    if LocalBackend.check():
        pytest.skip(LocalBackend.check())
    service = await stack.enter_async_context(serving("local", pool_options={"max_size": 2, "min_idle": 1}))

    async def no_lease_left(pool: Any, sandboxes: list[LeasedSandbox]) -> bool:
        return service.runtime.statistics().leased == 0

    return Kind("remote", lambda: RemotePool(service.url, ALPHA.secret, CONFIG), no_lease_left)


def _ray(stack: ExitStack) -> Kind:
    ray = pytest.importorskip("ray")
    from gem_sandbox.sandbox.cluster import NodeSettings, RayPool, placement
    from gem_sandbox.sandbox.cluster.loopback import LoopbackCluster

    if LocalBackend.check():
        pytest.skip(LocalBackend.check())
    cluster = stack.enter_context(LoopbackCluster())
    for signum in (signal.SIGINT, signal.SIGTERM):  # ray.init sets handlers its shutdown leaves
        stack.callback(signal.signal, signum, signal.getsignal(signum))
    cluster.join()
    stack.callback(ray.shutdown)
    name = f"conformance{os.getpid()}"
    placed = placement.place(name, NodeSettings("local", {"max_size": 2, "min_idle": 1}))
    assert [p.state for p in placed] == ["ready"], placement.table(placed)
    stack.callback(placement.remove, name)

    async def no_lease_left(pool: Any, sandboxes: list[LeasedSandbox]) -> bool:
        described = [p.described for p in await anyio.to_thread.run_sync(placement.status, name)]
        return all(d is not None and d["leases_held"] == 0 for d in described)

    return Kind("ray", lambda: RayPool(name, CONFIG), no_lease_left)


@pytest.fixture(
    scope="module",
    params=[
        "local",
        pytest.param("docker", marks=pytest.mark.docker),
        "remote",
        pytest.param("ray", marks=pytest.mark.ray),
    ],
)
async def kind(request: pytest.FixtureRequest) -> AsyncIterator[Kind]:
    with ExitStack() as sync_stack:
        async with AsyncExitStack() as stack:
            if request.param == "local":
                yield _local()
            elif request.param == "docker":
                yield _docker(request)
            elif request.param == "remote":
                yield await _remote(stack)
            else:
                yield _ray(sync_stack)


@pytest.fixture(scope="module")
async def pool(kind: Kind) -> AsyncIterator[Pool]:
    async with kind.make() as opened:
        await opened.wait_ready()
        yield opened


# -- the shapes ------------------------------------------------------------------------------


async def test_the_pool_and_what_it_lends_meet_the_protocols(kind: Kind, pool: Pool):
    assert isinstance(pool, Pool) and pool.backend_name == kind.label
    async with pool.lease() as sandbox:
        assert isinstance(sandbox, LeasedSandbox)
        assert sandbox.alive and sandbox.id and sandbox.backend in ("local", "docker")


# -- stateless runs --------------------------------------------------------------------------


async def test_a_run_that_succeeds_is_ok_with_its_output(pool: Pool):
    result = await pool.run("import sys; print(sys.stdin.read() * 2)", stdin="ab")
    assert (result.status, result.exit_code, result.stdout) == (Status.OK, 0, "abab\n")


async def test_a_run_that_fails_is_an_error_with_its_exit_code(pool: Pool):
    result = await pool.run("echo no >&2; exit 3", "bash")
    assert (result.status, result.exit_code, result.stderr) == (Status.ERROR, 3, "no\n")


async def test_a_run_past_its_timeout_is_a_timeout(pool: Pool):
    result = await pool.run("import time; time.sleep(30)", timeout=1)
    assert result.status is Status.TIMEOUT


async def test_a_run_reads_the_files_it_is_given(pool: Pool):
    result = await pool.run("print(open('d/in.txt').read())", files={"d/in.txt": "41"})
    assert result.stdout == "41\n"


async def test_nothing_of_a_run_carries_over_to_the_next(pool: Pool):
    await pool.run("open('left.txt', 'w').write('x')")
    result = await pool.run("import os; print(os.path.exists('left.txt'))")
    assert result.stdout == "False\n"


# -- leases ----------------------------------------------------------------------------------


async def test_a_lease_keeps_its_files_between_calls(pool: Pool):
    async with pool.lease() as sandbox:
        await sandbox.write_files({"notes/a.txt": "kept"})
        result = await sandbox.run("print(open('notes/a.txt').read())")
    assert result.stdout == "kept\n"


async def test_a_lease_keeps_its_shell_directory_and_exports(pool: Pool):
    async with pool.lease() as sandbox:
        await sandbox.shell("mkdir -p sub && cd sub && export GREETING=hi")
        result = await sandbox.shell('echo "$(basename "$PWD") $GREETING"')
    assert (result.status, result.stdout) == (Status.OK, "sub hi\n")


async def test_a_lease_keeps_its_kernel_state(pool: Pool):
    async with pool.lease() as sandbox:
        await sandbox.kernel_exec("answer = 41")
        result = await sandbox.kernel_exec("print(answer + 1)")
    assert (result.status, result.stdout) == (Status.OK, "42\n")


async def test_files_written_read_back_the_same(pool: Pool):
    files = {"bin/blob": bytes(range(256)) * 64, "text/utf8.txt": "ünïcode\n"}
    async with pool.lease() as sandbox:
        await sandbox.write_files(files)
        back = await sandbox.read_files(list(files))
    assert back == {"bin/blob": files["bin/blob"], "text/utf8.txt": "ünïcode\n".encode()}


async def test_reading_a_missing_file_raises(pool: Pool):
    async with pool.lease() as sandbox:
        with pytest.raises(FileTransferError):
            await sandbox.read_files(["absent.txt"])


async def test_release_gives_the_seat_back_and_the_next_tenant_starts_clean(pool: Pool):
    sandbox = await pool.acquire()
    await sandbox.write_files({"secret.txt": "mine"})
    assert pool.statistics().leased == 1
    await pool.release(sandbox)
    assert pool.statistics().leased == 0
    async with pool.lease() as other:
        result = await other.run("import os; print(os.listdir('.'))")
    assert result.stdout == "[]\n"


async def test_releasing_what_the_pool_did_not_lend_raises(pool: Pool):
    with pytest.raises(SandboxError):
        await pool.release(object())


async def test_statistics_count_the_leases(pool: Pool):
    before = pool.statistics().leases
    for _ in range(2):
        async with pool.lease():
            pass
    assert pool.statistics().leases == before + 2


# -- snapshots and forks ---------------------------------------------------------------------


async def test_a_fork_starts_from_the_parents_state_and_then_diverges(pool: Pool):
    async with pool.lease() as parent:
        await parent.write_files({"notes.txt": "parent"})
        await parent.kernel_exec("seen = ['parent']")
        await parent.shell("mkdir -p sub && cd sub && export STAGE=forked")
        [branch] = await parent.fork(1)
        try:
            assert branch.id != parent.id
            result = await branch.kernel_exec("seen.append('branch'); print(seen)")
            assert result.stdout == "['parent', 'branch']\n"
            result = await branch.shell('echo "$(basename "$PWD") $STAGE $(cat ../notes.txt)"; echo b > ../notes.txt')
            assert result.stdout == "sub forked parent\n"
            assert (await parent.kernel_exec("print(seen)")).stdout == "['parent']\n"
            assert await parent.read_files(["notes.txt"]) == {"notes.txt": b"parent"}
        finally:
            await pool.release(branch)


async def test_a_snapshot_outlives_its_lease_and_restores_until_dropped(pool: Pool):
    async with pool.lease() as sandbox:
        await sandbox.kernel_exec("total = 41")
        snapshot = await sandbox.snapshot()
    assert snapshot.kernels == ("default",) and snapshot.size > 0
    for _ in range(2):
        restored = await pool.restore(snapshot)
        try:
            assert (await restored.kernel_exec("total += 1; print(total)")).stdout == "42\n"
        finally:
            await pool.release(restored)
    await pool.drop_snapshot(snapshot)
    with pytest.raises(SnapshotNotFound):
        await pool.restore(snapshot)


async def test_a_fork_past_the_pools_room_makes_nothing_and_leaves_the_parent(pool: Pool):
    async with pool.lease() as parent:
        await parent.kernel_exec("kept = 1")
        with pytest.raises(ForkError):
            await parent.fork(CONFIG.max_size)  # the parent holds one of them
        assert pool.statistics().leased == 1
        assert (await parent.kernel_exec("print(kept)")).stdout == "1\n"


# -- closing ---------------------------------------------------------------------------------


async def test_closing_ends_every_lease_and_leaves_nothing(kind: Kind):
    async with kind.make() as pool:
        await pool.wait_ready()
        held = [await pool.acquire(), await pool.acquire()]  # max_size: every sandbox it has
        await pool.aclose()
        assert not any(sandbox.alive for sandbox in held)
        assert pool.statistics().leased == 0
        with pytest.raises(SandboxError):
            await pool.acquire(timeout=1)
    with anyio.fail_after(30):
        while not await kind.gone(pool, held):
            await anyio.sleep(0.2)
