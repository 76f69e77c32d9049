"""The stateless fast path: ``pool.run`` skips the reset only when the agent found the sandbox
clean right after the run, and whatever a run leaves (files, IPC, processes) still never
reaches the next caller, who gets the same sandbox (a pool of one)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from tests.sandbox_fixtures import HOST_BACKENDS, make_backend

pytestmark = pytest.mark.anyio

# What the next caller looks for: it prints every trace it finds, nothing when clean.
LOOK = """
import os, subprocess
for d in ('/work', '/tmp', '/dev/shm', '/dev/mqueue'):
    for name in os.listdir(d):
        if os.path.join(d, name) != os.getcwd():  # a shared run's own dir
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


@pytest.fixture(params=HOST_BACKENDS)  # the pool-level checks read this host's /proc
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


# --- runs that share a sandbox (runs_per_sandbox > 1; uid mode) ------------------------------

SHARING = [pytest.param("docker", marks=pytest.mark.docker), "local"]


@pytest.fixture(params=SHARING)
async def shared_pool(request: pytest.FixtureRequest) -> AsyncIterator[SandboxPool]:
    config = PoolConfig(min_idle=1, max_size=1, runs_per_sandbox=4)
    async with SandboxPool(make_backend(request.param), config) as p:
        await p.wait_ready(60)
        yield p


# How many runs the sandbox holds now: each has a dir of its own in /tmp.
BESIDE = """
import os, time
time.sleep(0.3)
print(sum(name.startswith('.gem-home-') for name in os.listdir('/tmp')))
time.sleep(0.3)
"""


async def test_runs_share_one_sandbox_up_to_the_limit(shared_pool: SandboxPool):
    results = []

    async def one() -> None:
        results.append(await shared_pool.run(BESIDE))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one)
    assert all(r.ok for r in results) and len(results) == 8, results
    together = [int(r.stdout) for r in results]
    assert max(together) == 4, together  # four at once on the one sandbox, never more
    assert shared_pool.statistics().launched == 1


NEIGHBOUR_SECRET = "neighbour-secret-7f3a"

# Plants its secret everywhere it may write, then waits for the prober beside it.
PLANTER = f"""
import os, time
secret = {NEIGHBOUR_SECRET!r}
open('mine.txt', 'w').write(secret)
open(os.path.join(os.environ['TMPDIR'], 'tmp.txt'), 'w').write(secret)
open('/tmp/planted', 'w').write(secret)
print(os.getcwd() != '/work', oct(os.stat('.').st_mode & 0o777), oct(os.stat('mine.txt').st_mode & 0o777))
time.sleep(1.5)
"""

# Looks for the planter's files, processes and cwd, and tries to write where it would read.
PROBER = f"""
import os, signal, time
time.sleep(0.5)
found = []
for top in ('/tmp', '/work'):
    for root, dirs, names in os.walk(top):
        for name in names:
            try:
                if {NEIGHBOUR_SECRET!r} in open(os.path.join(root, name)).read():
                    found.append(os.path.join(root, name))
            except OSError:
                pass
for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:
    try:
        os.kill(int(pid), 0)
        if int(open('/proc/%s/status' % pid).read().split('Uid:')[1].split()[0]) != os.getuid():
            found.append('could signal ' + pid)
    except (OSError, IndexError):
        pass
try:
    open('/work/x', 'w')
    found.append('wrote /work')
except OSError:
    pass
print(found)
"""


async def test_a_run_cannot_reach_the_one_beside_it(shared_pool: SandboxPool):
    results: dict[str, object] = {}

    async def run(name: str, code: str) -> None:
        results[name] = await shared_pool.run(code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "planter", PLANTER)
        tg.start_soon(run, "prober", PROBER)
    planter, prober = results["planter"], results["prober"]
    assert planter.stdout == "True 0o700 0o600\n", planter  # its own dir, its files private
    assert prober.ok and prober.stdout == "[]\n", prober  # /tmp/planted is 0600 and the planter's
    assert shared_pool.statistics().launched == 1
    after = await shared_pool.run(LOOK)
    assert after.stdout == "", after  # the last run out found /tmp/planted: the pool reset it
    assert shared_pool.statistics().resets == 1


async def test_a_run_may_use_its_cwd_and_tempfile_and_leaves_nothing(shared_pool: SandboxPool):
    code = (
        "import tempfile, os\n"
        "open('out.txt', 'w').write('x')\n"
        "with tempfile.NamedTemporaryFile() as f: f.write(b'y')\n"
        "print(sorted(os.listdir('.')))"
    )
    assert (await shared_pool.run(code)).stdout == "['out.txt']\n"
    assert (await shared_pool.run(LOOK)).stdout == ""
    stats = shared_pool.statistics()
    assert (stats.resets, stats.clean_returns) == (0, 2)
