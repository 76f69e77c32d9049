"""What a local sandbox (bubblewrap as root, uid mode) keeps resident, process by process: the
memory figures of ``gem-sandbox bench footprint`` are sums over exactly these.

Idle: bwrap's launcher, bwrap's init, the agent, its zygote, and one child the zygote has
prepared for the next run. Stateful: one more, the kernel, forked by the zygote and running
as a tenant's uid; a reset takes it away again.
"""

from __future__ import annotations

import os

import anyio
import pytest

from benchmarks.footprint import local_processes, pss_kb
from gem_sandbox.sandbox.backends.local import LocalBackend
from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from tests.sandbox_fixtures import SPEC

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="uid mode: bubblewrap started as root"),
]


@pytest.fixture
async def sandbox():
    problem = LocalBackend.check()
    if problem:
        pytest.skip(problem)
    async with open_sandbox(LocalBackend(), SPEC) as sb:
        assert (await sb.run("print(1)")).ok  # as a pooled sandbox idles: it has run once
        yield sb


def _status(pid: int) -> tuple[int, int]:
    """(parent pid, real uid)."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["PPid"]), int(fields["Uid"].split()[0])


def _shape(sandbox: Sandbox) -> dict[int, tuple[int, int]]:
    """Each process of the sandbox: pid -> (parent pid, uid)."""
    pids = local_processes([sandbox.id])[sandbox.id]
    return {pid: _status(pid) for pid in pids}


def _children(shape: dict[int, tuple[int, int]], parent: int) -> list[int]:
    return sorted(pid for pid, (ppid, _) in shape.items() if ppid == parent)


async def _settled(sandbox: Sandbox, processes: int) -> dict[int, tuple[int, int]]:
    """The shape once it has ``processes`` processes: the spare child is prepared after the
    run's answer, so it may still be on its way."""
    with anyio.fail_after(10):
        while True:
            shape = await anyio.to_thread.run_sync(_shape, sandbox)
            if len(shape) >= processes:
                return shape
            await anyio.sleep(0.05)


def _chain(shape: dict[int, tuple[int, int]]) -> tuple[int, int, int, int]:
    """bwrap's launcher, its init, the agent and the zygote, each the only child of the one
    before: the root of ``shape`` and down."""
    (launcher,) = [pid for pid, (ppid, _) in shape.items() if ppid not in shape]
    (init,) = _children(shape, launcher)
    (agent,) = _children(shape, init)
    (zygote,) = _children(shape, agent)
    return launcher, init, agent, zygote


async def test_an_idle_sandbox_is_bwrap_twice_the_agent_its_zygote_and_one_prepared_child(sandbox: Sandbox):
    shape = await _settled(sandbox, 5)
    *_, zygote = _chain(shape)
    (prepared,) = _children(shape, zygote)
    assert len(shape) == 5
    assert _children(shape, prepared) == []
    assert {uid for _, uid in shape.values()} == {0}  # nothing runs as a tenant yet
    assert pss_kb(list(shape)) > 0


async def test_a_kernel_is_one_more_process_a_child_of_the_zygote_as_a_tenants_uid(sandbox: Sandbox):
    assert (await sandbox.kernel_exec("x = 41")).ok
    shape = await _settled(sandbox, 6)
    *_, zygote = _chain(shape)
    under_zygote = _children(shape, zygote)
    assert len(shape) == 6 and len(under_zygote) == 2
    uids = sorted(shape[pid][1] for pid in under_zygote)
    assert uids[0] == 0 and uids[1] != 0  # the prepared child, and the kernel as its tenant
    result = await sandbox.kernel_exec("x + 1")
    assert result.ok and result.stdout.strip() == "42"


async def test_a_reset_leaves_an_idle_sandbox_again(sandbox: Sandbox):
    assert (await sandbox.kernel_exec("x = 41")).ok
    await _settled(sandbox, 6)
    await sandbox.reset()
    shape = await _settled(sandbox, 5)
    *_, zygote = _chain(shape)
    assert len(shape) == 5 and len(_children(shape, zygote)) == 1
    assert {uid for _, uid in shape.values()} == {0}


async def test_sandboxes_are_watched_without_a_thread_each():
    """Each launcher's exit is watched through its pidfd (backends/local/spawn.py), not by a
    thread blocked in waitpid: 2,000 sandboxes would be 2,000 threads."""
    import threading

    backend = LocalBackend()
    async with open_sandbox(backend, SPEC) as first:
        assert (await first.run("print(1)")).ok  # worker threads the launch uses now exist
        before = threading.active_count()
        async with open_sandbox(backend, SPEC) as second, open_sandbox(backend, SPEC) as third:
            assert (await second.run("print(2)")).ok and (await third.run("print(3)")).ok
            assert threading.active_count() == before


async def test_where_the_kernel_has_no_pidfds_sandboxes_start_as_before(monkeypatch: pytest.MonkeyPatch):
    from gem_sandbox.sandbox.backends.local import spawn

    monkeypatch.setattr(spawn, "PIDFDS", False)  # Linux before 5.3
    async with open_sandbox(LocalBackend(), SPEC) as sb:
        assert not isinstance(sb.box.process, spawn.WatchedProcess)
        assert (await sb.run("print(1)")).stdout == "1\n"
