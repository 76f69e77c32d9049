"""The stateless fast path: ``pool.run`` skips the reset only when the agent found the sandbox
clean right after the run, and whatever a run leaves (files, IPC, processes) still never
reaches the next caller, who gets the same sandbox (a pool of one)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from tests.sandbox_fixtures import BACKENDS, make_backend

pytestmark = pytest.mark.anyio

# What the next caller looks for: it prints every trace it finds, nothing when clean.
LOOK = """
import os, subprocess
for d in ('/work', '/tmp', '/dev/shm', '/dev/mqueue'):
    for name in os.listdir(d):
        print('file', d, name)
for line in open('/proc/sysvipc/shm').read().splitlines()[1:]:
    print('shm', line.split()[:2])
mine = {os.getpid(), os.getppid()}
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) not in mine:
        try:
            uid = int(open('/proc/%s/status' % pid).read().split('Uid:')[1].split()[0])
        except (OSError, IndexError):
            continue
        if uid not in (0, os.getuid()) and uid >= 1000:
            print('process', pid, open('/proc/%s/cmdline' % pid).read())
"""

LEFTOVERS = {
    "a file in the work dir": "open('left.txt', 'w').write('secret')",
    "a file in /tmp": "open('/tmp/left', 'w').write('secret')",
    "a file in /dev/shm": "open('/dev/shm/left', 'w').write('secret')",
    "a System V segment": (
        "import ctypes; libc = ctypes.CDLL(None)\n"
        "assert libc.shmget(0x5EC0FF, 4096, 0o1666) >= 0"
    ),
    "a daemon that left its session": (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/bin/sleep', ['sleep', '300'])\n"
        "    os._exit(0)\n"
        "os.wait()"
    ),
}


@pytest.fixture(params=BACKENDS)
async def pool(request: pytest.FixtureRequest) -> AsyncIterator[SandboxPool]:
    async with SandboxPool(make_backend(request.param), PoolConfig(min_idle=1, max_size=1)) as p:
        await p.wait_ready(60)
        yield p


async def test_a_run_that_leaves_nothing_skips_the_reset(pool: SandboxPool):
    for _ in range(5):
        result = await pool.run("print(sum(range(10)))")
        assert result.ok and result.stdout == "45\n"
    stats = pool.statistics()
    assert (stats.clean_returns, stats.resets, stats.launched) == (5, 0, 1)


@pytest.mark.parametrize("planted", sorted(LEFTOVERS))
async def test_what_a_run_leaves_is_reset_away_before_the_next_caller(pool: SandboxPool, planted: str):
    first = await pool.run(LEFTOVERS[planted])
    assert first.ok, first
    after = await pool.run(LOOK)
    assert after.ok and after.stdout == "", after
    stats = pool.statistics()
    assert stats.launched == 1 and stats.resets + stats.clean_returns == 2
    if planted.startswith("a file"):  # the run's end removes what its uid or token owns
        assert stats.resets == 1  # but files are only removed by a reset


async def test_files_given_with_the_run_are_gone_for_the_next_caller(pool: SandboxPool):
    given = await pool.run("print(open('data.txt').read())", files={"data.txt": "secret"})
    assert given.stdout == "secret\n"
    assert (await pool.run(LOOK)).stdout == ""
    assert pool.statistics().resets == 1


async def test_a_failing_or_killed_run_is_handed_on_clean_too(pool: SandboxPool):
    assert (await pool.run("raise SystemExit(3)")).exit_code == 3
    assert (await pool.run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")).status == "killed"
    assert (await pool.run("while True: pass", timeout=0.5)).status == "timeout"
    assert (await pool.run(LOOK)).stdout == ""
    assert pool.statistics().clean_returns == 4
