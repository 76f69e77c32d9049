"""Snapshots and forks of live sandboxes on root and rootless bubblewrap, Docker and e2b: what a
branch carries (files, modes and links, kernel objects, shell state), that branches diverge,
and that what cannot be carried is refused with the parent left as it was."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

from gem_sandbox.sandbox.errors import AgentError, ForkError, SandboxCrashed, SnapshotNotFound, SnapshotUnsupported
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import BACKENDS, SPEC, backend_for, e2b_endpoint  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio

CONFIG = PoolConfig(max_size=10, min_idle=2, spec=SPEC)

PARENT_KERNEL = """
import json
import numpy as np

table = np.arange(100_000, dtype="float64")
offset = 3

def shifted(value):
    return value + offset

class Counter:
    def __init__(self):
        self.hits = 0
    def hit(self):
        self.hits += 1
        return self.hits

counter = Counter()
counter.hit()
squares = {n: n * n for n in range(10)}
total = lambda: float(table.sum())
notes = open("notes.txt")
notes.readline()
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=BACKENDS)
async def pool(request: pytest.FixtureRequest) -> AsyncIterator[SandboxPool]:
    async with SandboxPool(backend_for(request), CONFIG) as opened:
        await opened.wait_ready()
        yield opened


async def _parent(sandbox) -> None:
    await sandbox.write_files(
        {"notes.txt": "first\nsecond\n", "bin/tool.sh": "echo tool", "deep/a/b/c.txt": "c"},
        executable=["bin/tool.sh"],
    )
    result = await sandbox.kernel_exec(PARENT_KERNEL)
    assert result.status is Status.OK, result.stderr
    result = await sandbox.shell(
        "ln -s notes.txt latest && ln -s /etc/hostname outside && echo d > deep/a/b/d.txt && chmod 640 deep/a/b/d.txt"
        " && echo scratch > /tmp/scratch.txt && cd deep/a"
        " && export STAGE=forked && LOCAL=kept && greet() { echo \"hello $1\"; }"
    )
    assert result.status is Status.OK, result.stderr


async def test_eight_branches_each_start_from_the_parent_and_diverge(pool: SandboxPool):
    n = 3 if pool.backend.name == "e2b" else 8  # the e2b endpoint's own pool holds fewer
    async with pool.lease() as parent:
        await _parent(parent)
        branches = await parent.fork(n)
        try:
            assert len({b.id for b in branches} | {parent.id}) == n + 1
            for index, branch in enumerate(branches):
                result = await branch.kernel_exec(
                    f"table[0] = {index}; print(shifted(1), counter.hit(), squares[9], total() > 0, notes.readline().strip())"
                )
                assert (result.status, result.stdout) == (Status.OK, "4 2 81 True second\n"), result.stderr
                result = await branch.shell(
                    'echo "$(basename "$PWD") $STAGE $LOCAL $(greet you)"; cd ../..;'
                    " stat -c '%A %n' latest outside deep/a/b/d.txt bin/tool.sh; readlink latest outside; cat /tmp/scratch.txt;"
                    f" echo {index} > notes.txt"
                )
                assert result.stdout.splitlines() == [
                    "a forked kept hello you",
                    "lrwxrwxrwx latest",
                    "lrwxrwxrwx outside",
                    "-rw-rw---- deep/a/b/d.txt",
                    "-rwxrwxr-x bin/tool.sh",
                    "notes.txt",
                    "/etc/hostname",
                    "scratch",
                ], result.stderr
            for index, branch in enumerate(branches):  # each kept what it did, and only that
                assert (await branch.kernel_exec("print(int(table[0]), counter.hits)")).stdout == f"{index} 2\n"
                assert await branch.read_files(["notes.txt"]) == {"notes.txt": f"{index}\n".encode()}
            assert (await parent.kernel_exec("print(int(table[0]), counter.hits)")).stdout == "0 1\n"
            assert await parent.read_files(["notes.txt"]) == {"notes.txt": b"first\nsecond\n"}
        finally:
            for branch in branches:
                await pool.release(branch)


async def test_a_snapshot_restores_many_times_and_expires(pool: SandboxPool):
    async with pool.lease() as sandbox:
        await sandbox.kernel_exec("state = {'step': 1}")
        await sandbox.shell("cd /tmp && export MARK=1")
        snapshot = await sandbox.snapshot(ttl=60)
        short = await sandbox.snapshot(ttl=0.2)
    assert (snapshot.kernels, snapshot.shells) == (("default",), ("default",))
    assert snapshot.expires - snapshot.created == pytest.approx(60)
    for _ in range(3):
        async with pool.lease() as _unrelated:  # the pool's other tenants do not disturb it
            pass
        restored = await pool.restore(snapshot)
        try:
            assert (await restored.kernel_exec("state['step'] += 1; print(state)")).stdout == "{'step': 2}\n"
            assert (await restored.shell('echo "$PWD $MARK"')).stdout == "/tmp 1\n"
        finally:
            await pool.release(restored)
    await anyio.sleep(0.3)
    with pytest.raises(SnapshotNotFound):
        await pool.restore(short)
    await pool.drop_snapshot(snapshot)
    with pytest.raises(SnapshotNotFound):
        await pool.restore(snapshot)


@pytest.mark.parametrize(
    ("setup", "named"),
    [
        ("shell:sleep 300 &", "process"),
        ("kernel:import subprocess; child = subprocess.Popen(['sleep', '300'])", "process"),
        ("kernel:numbers = (n for n in range(3))", "generator"),
        ("shell:mkfifo /tmp/pipe", "tmp/pipe"),
        ("kernel:from multiprocessing import shared_memory; block = shared_memory.SharedMemory(create=True, size=64)", "/dev/shm"),
    ],
)
async def test_what_a_snapshot_cannot_carry_is_refused_and_the_parent_goes_on(pool: SandboxPool, setup, named):
    where, code = setup.split(":", 1)
    async with pool.lease() as parent:
        await parent.kernel_exec("kept = 'yes'")
        await parent.shell("export KEPT=yes")
        result = await (parent.shell(code) if where == "shell" else parent.kernel_exec(code))
        assert result.status is Status.OK, result.stderr
        for attempt in (parent.snapshot(), parent.fork(2)):
            with pytest.raises(SnapshotUnsupported, match=named):
                await attempt
        assert pool.statistics().leased == 1
        assert (await parent.kernel_exec("print(kept)")).stdout == "yes\n"
        assert (await parent.shell("echo $KEPT")).stdout == "yes\n"


@pytest.mark.parametrize(
    ("busy", "named"),
    [
        ("run", "still going"),
        ("kernel_exec", "kernel 'default' is running a command"),
        ("shell", "shell session 'default' is running a command"),
    ],
)
async def test_a_fork_of_a_sandbox_mid_command_is_refused(pool: SandboxPool, busy, named):
    code = "sleep 3" if busy == "shell" else "import time; time.sleep(3)"
    async with pool.lease() as parent:
        if busy != "run":
            await getattr(parent, busy)("pass" if busy == "kernel_exec" else "true")
        async with anyio.create_task_group() as tg:
            tg.start_soon(getattr(parent, busy), code)
            await anyio.sleep(0.5)
            with pytest.raises(SnapshotUnsupported, match=named):
                await parent.fork(1)
            tg.cancel_scope.cancel()
        assert pool.statistics().leased == 1


async def test_no_room_and_dead_parents_give_typed_errors_and_make_nothing(pool: SandboxPool):
    async with pool.lease() as parent:
        await parent.kernel_exec("x = 1")
        with pytest.raises(ForkError, match="room"):
            await parent.fork(CONFIG.max_size)
        with pytest.raises(ValueError):
            await parent.fork(0)
        assert pool.statistics().leased == 1
        assert (await parent.kernel_exec("print(x)")).stdout == "1\n"
    dead = await pool.acquire()
    try:
        await dead.box.kill()
        deadline = time.monotonic() + 10
        while dead.alive and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        with pytest.raises(SandboxCrashed):
            await dead.fork(1)
    finally:
        await pool.release(dead)
    assert pool.statistics().leased == 0


async def test_a_restore_takes_only_a_sandbox_at_rest_and_a_stream_the_agent_made(pool: SandboxPool):
    async with pool.lease() as parent:
        await parent.write_files({"a.txt": "a"})
        await parent.kernel_exec("k = 1")
        _, data = await parent.capture()
        with pytest.raises(AgentError, match="not_clean"):
            await parent.load(data)
        async with pool.lease() as fresh:
            await fresh.write_files({"a.txt": "old", "b.txt": "gone after the restore"})
            await fresh.load(data)
            assert (await fresh.shell("ls; cat a.txt")).stdout == "a.txt\na"
            await fresh.reset()
            for bad in (b"not a tar", data[:600]):
                with pytest.raises(AgentError, match="bad_request"):
                    await fresh.load(bad)
            assert (await fresh.run("print('still fine')")).stdout == "still fine\n"


async def test_a_snapshot_past_its_size_limit_is_refused(pool: SandboxPool):
    async with pool.lease() as parent:
        made = await parent.shell("for n in 1 2 3 4 5 6; do head -c 10000000 /dev/zero > big$n.bin; done")
        assert made.status is Status.OK, made.stderr
        with pytest.raises(SnapshotUnsupported, match="limit"):
            await parent.snapshot()
        assert (await parent.shell("cat big*.bin | wc -c")).stdout == "60000000\n"


async def test_a_branch_that_fails_to_load_makes_no_branch_and_leaves_the_parent(pool: SandboxPool):
    trap = "class Trap:\n    def __reduce__(self):\n        return (open, ('/nonexistent/state',))\n\ntrap = Trap()"
    async with pool.lease() as parent:
        await parent.kernel_exec(trap)
        with pytest.raises(ForkError, match="nonexistent"):
            await parent.fork(2)
        assert pool.statistics().leased == 1
        assert (await parent.kernel_exec("print(type(trap).__name__)")).stdout == "Trap\n"
