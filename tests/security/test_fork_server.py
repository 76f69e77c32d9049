"""Runs fork from the zygote, a process that never holds a tenant's data, not from the agent
(uid mode: Docker and bubblewrap as root). What an earlier tenant's code, stdin and output
passed through the agent is not in a later run's memory, and no run can reach the zygote."""

from __future__ import annotations

import os
import secrets
import signal

import anyio
import pytest

from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import make_backend

pytestmark = pytest.mark.anyio

UID_MODE = [pytest.param("docker", marks=pytest.mark.docker), "local"]
SECRET = "zygote-" + secrets.token_hex(12)

# Counts the secret in this process's writable memory. The pattern is built at run time from
# its reverse, so the scanner holds it exactly once (plus ``extra`` copies it makes itself).
SCAN = f"""
import ctypes
pattern = {SECRET[::-1]!r}[::-1].encode()
extra = [bytes(bytearray(pattern)) for _ in range({{extra}})]
found = 0
with open("/proc/self/maps") as maps:
    for line in maps:
        span, perms = line.split()[:2]
        low, high = (int(x, 16) for x in span.split("-"))
        if perms.startswith("rw") and "[v" not in line and high - low < 512 << 20:
            found += ctypes.string_at(low, high - low).count(pattern)
print(found)
"""


@pytest.fixture(params=UID_MODE)
async def pool(request: pytest.FixtureRequest):
    async with SandboxPool(make_backend(request.param), PoolConfig(min_idle=1, max_size=1)) as p:
        await p.wait_ready(60)
        yield p


async def _count(pool: SandboxPool, extra: int = 0) -> int:
    result = await pool.run(SCAN.format(extra=extra))
    assert result.ok, result
    return int(result.stdout)


async def test_an_earlier_tenants_code_stdin_and_output_are_not_in_a_later_runs_memory(pool: SandboxPool):
    baseline = await _count(pool)
    assert await _count(pool, extra=3) >= baseline + 3  # the scanner finds copies that exist
    async with pool.lease() as sandbox:
        held = f"kept = {SECRET!r}\nprint(kept * 3)\nprint(input())"
        result = await sandbox.run(held, stdin=SECRET + "\n")
        assert result.stdout.count(SECRET) == 4
        assert (await sandbox.kernel_exec(f"k = {SECRET!r}; k")).stdout.count(SECRET) == 1
        assert (await sandbox.shell(f"echo {SECRET}")).stdout.count(SECRET) == 1
    assert pool.statistics().launched == 1  # the same sandbox, reset
    assert await _count(pool) == baseline


async def test_no_run_can_signal_or_trace_the_zygote(pool: SandboxPool):
    probe = """
import os, signal
zygote = os.getppid()
agent = int(open('/proc/%d/stat' % zygote).read().rsplit(')', 1)[1].split()[1])
outcomes = []
for pid in (zygote, agent):
    for attempt in (lambda: os.kill(pid, signal.SIGKILL), lambda: open('/proc/%d/mem' % pid, 'rb').read(1),
                    lambda: os.listdir('/proc/%d/fd' % pid)):
        try:
            attempt()
            outcomes.append('reached %d' % pid)
        except OSError as exc:
            outcomes.append(type(exc).__name__)
print(sorted(set(outcomes)))
"""
    result = await pool.run(probe)
    assert result.stdout == "['PermissionError']\n", result
    assert (await pool.run("print(1)")).stdout == "1\n"


async def test_a_dead_zygote_takes_its_sandbox_down_as_infra_error():
    """Only the infrastructure can kill the zygote (no run can reach it): the agent then stops,
    runs in flight come back ``infra_error``, and the pool replaces the sandbox."""
    from gem_sandbox.sandbox.backends.local import bwrap_processes

    async with SandboxPool(make_backend("local"), PoolConfig(min_idle=1, max_size=1)) as pool:
        await pool.wait_ready(60)
        async with pool.lease() as sandbox:
            init = next(p.pid for p in bwrap_processes() if p.box == sandbox.id and p.init)
            agent = _children(init)[0]
            zygote = _children(agent)[0]
            async with anyio.create_task_group() as tg:

                async def sleeper() -> None:
                    result = await sandbox.run("import time; time.sleep(30)", timeout=60)
                    assert result.status is Status.INFRA_ERROR, result

                tg.start_soon(sleeper)
                await anyio.sleep(0.5)
                os.kill(zygote, signal.SIGKILL)
        with anyio.fail_after(30):
            assert (await pool.run("print(2)")).stdout == "2\n"
        assert pool.statistics().launched == 2


def _children(pid: int) -> list[int]:
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(name))
        except OSError:
            continue
    return sorted(found)
