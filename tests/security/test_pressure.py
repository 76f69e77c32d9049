"""The agent under pressure: whatever a run does to the sandbox's processes, files and
descriptors, while the host's load average is 20+, the agent answers a ping within a second
throughout, and the run ends with the code's own verdict (never ``infra_error``, which trainers
mask) before the host's deadline for it. The sandbox then resets clean for the next tenant, or
its reset says the sandbox must be retired (more files to remove than a reset's time allows).
A tenant's network state never reaches the next one: not even a connection in TIME_WAIT,
which the agent turns off where it can and a reset otherwise refuses (the pool replaces it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from gem_sandbox.sandbox.errors import SandboxCrashed
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import ExecResult
from tests.security.harness import LIMITS, LINEAR_FORKS, PIDS, SPEC, S, Harness

pytestmark = pytest.mark.anyio

PING_BOUND_MS = 1000.0  # the bound on a ping's round trip while a run presses
HOST_LOAD = 20  # CPU-bound host processes beside the tests: a load average of 20+
HONEST = frozenset({S.OK, S.ERROR, S.TIMEOUT, S.KILLED, S.OOM, S.OUTPUT_LIMIT})


@pytest.fixture(scope="module")
def host_load() -> Iterator[None]:
    """A load average of 20+: busy host processes, niced so that the other work on the
    machine still gets its share; all killed afterwards."""
    spinners = [
        subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while 1: pass"])
        for _ in range(HOST_LOAD)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


@pytest.fixture
async def sandbox(harness: Harness, host_load: None) -> AsyncIterator[Sandbox]:
    async with open_sandbox(harness.backend, SPEC) as sb:
        yield sb


async def _pressed(sb: Sandbox, code: str, language: str, timeout: float) -> tuple[ExecResult, float]:
    """Run ``code`` while pinging the agent back to back; the result and the slowest ping
    (ms)."""
    worst = 0.0
    result: ExecResult | None = None
    async with anyio.create_task_group() as tg:

        async def ping() -> None:
            nonlocal worst
            while True:
                worst = max(worst, await sb.ping(timeout=30))
                await anyio.sleep(0.02)

        tg.start_soon(ping)
        result = await sb.run(textwrap.dedent(code), language, timeout=timeout, limits=LIMITS)
        tg.cancel_scope.cancel()
    assert result is not None
    return result, worst


async def _require_pid_bound(sb: Sandbox) -> None:
    """A bomb is only detonated where the sandbox bounds its processes."""
    result = await sb.run(LINEAR_FORKS.replace("@PIDS@", str(PIDS)), timeout=5)
    await sb.reset()
    forked = int(result.stdout.split()[-1]) if result.stdout.split() else -1
    if not 0 <= forked <= PIDS:
        pytest.fail(f"a run forked {forked} processes past the limit of {PIDS}; not detonating a bomb")


PRESSURES = [
    pytest.param(
        "python",
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        3.0,
        {S.TIMEOUT, S.KILLED, S.ERROR},
        True,
        id="fork_bomb",
    ),
    pytest.param(
        "python",
        """
        import threading, time
        while True:
            try:
                threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
            except Exception:
                pass
        """,
        3.0,
        {S.TIMEOUT, S.KILLED, S.ERROR, S.OOM},
        True,
        id="thread_bomb",
    ),
    pytest.param(
        "bash",
        """
        cd "$(dirname "$0")"
        exec python3 -c '
        import os, time
        end, i = time.monotonic() + 4.0, 0
        while time.monotonic() < end:
            try:
                os.close(os.open("f%d" % i, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError:
                pass
            i += 1
        '
        """,
        4.5,
        HONEST,
        False,
        id="file_flood_in_scratch_dir",
    ),
    pytest.param(
        "python",
        """
        import os, tempfile
        top = tempfile.mkdtemp()
        i = 0
        while True:
            try:
                os.mkdir("%s/%d" % (top, i))
            except OSError:
                pass
            i += 1
        """,
        4.0,
        {S.TIMEOUT, S.OOM},  # on Docker the tmpfs's inodes are the container's memory
        False,
        id="inode_flood_in_tmp",
    ),
    pytest.param(
        "python",
        """
        import os
        os.mkdir("huge")
        open("huge/0", "w").close()
        for i in range(1, 200000):
            os.link("huge/0", "huge/%d" % i)
        print(len(os.listdir("huge")))
        """,
        30.0,
        {S.OK},
        False,
        id="huge_directory",
    ),
    pytest.param(
        "python",
        """
        import os
        for _ in range(10000):
            os.mkdir("d")
            os.chdir("d")
        open("bottom", "w").close()
        print("deep")
        """,
        30.0,
        {S.OK},
        False,
        id="deep_tree",
    ),
    pytest.param(
        "python",
        """
        import os, socket, time
        held = []
        while True:
            try:
                held.extend(socket.socketpair())
                held.extend(os.pipe())
            except OSError:
                break
        print(len(held) > 100)
        time.sleep(60)
        """,
        3.0,
        {S.TIMEOUT},
        False,
        id="fd_exhaustion",
    ),
]


@pytest.mark.parametrize(("language", "code", "timeout", "statuses", "bomb"), PRESSURES)
async def test_the_agent_stays_responsive_and_the_verdict_honest(
    sandbox: Sandbox, language: str, code: str, timeout: float, statuses: set[S], bomb: bool
) -> None:
    if bomb:
        await _require_pid_bound(sandbox)
    result, worst_ping_ms = await _pressed(sandbox, code, language, timeout)
    assert result.status in statuses, f"{result.status.value}, expected one of {sorted(statuses)}: {result!r}"
    assert worst_ping_ms < PING_BOUND_MS, f"a ping took {worst_ping_ms:.0f} ms while the run pressed"
    try:
        await sandbox.reset(timeout=30)
    except SandboxCrashed as exc:  # more left than a reset may take to remove: retired
        assert "could not be emptied" in str(exc), exc
        return
    after = await sandbox.run("import os; print(os.listdir('.'))", timeout=10)
    assert (after.status, after.stdout) == (S.OK, "[]\n"), after


SERVE_AND_CLOSE = """
import socket
server = socket.socket()
server.bind(("127.0.0.1", 8000))
server.listen(1)
client = socket.create_connection(("127.0.0.1", 8000))
conn, _ = server.accept()
conn.close()  # the server's end closes first: its side of port 8000 is the one in TIME_WAIT
client.close()
server.close()
print("served")
"""

BIND = """
import socket
s = socket.socket()
s.bind(("127.0.0.1", 8000))
s.listen(1)
print("bound")
"""

LISTEN_IN_BACKGROUND = """
import os, socket, time
if os.fork() == 0:
    os.setsid()
    s = socket.socket()
    s.bind(("127.0.0.1", 8000))
    s.listen(1)
    time.sleep(600)
time.sleep(0.2)
print("listening")
"""


async def _tenant_after(harness: Harness, first: str) -> ExecResult:
    """Run ``first`` as one tenant of a pool of one sandbox, then :data:`BIND` as the next:
    the same sandbox once its reset verified it clean, or its replacement."""
    config = PoolConfig(min_idle=1, max_size=1, spec=SPEC, limits=LIMITS, health_interval=3600.0)
    async with SandboxPool(harness.backend, config) as pool:
        async with pool.lease() as sb:
            done = await sb.run(first, timeout=10)
            assert done.status is S.OK, done
        async with pool.lease() as sb:
            return await sb.run(BIND, timeout=10)


async def test_the_next_tenant_binds_the_port_of_a_connection_the_last_one_closed(
    harness: Harness,
) -> None:
    bound = await _tenant_after(harness, SERVE_AND_CLOSE)
    assert (bound.status, bound.stdout) == (S.OK, "bound\n"), bound


async def test_the_next_tenant_binds_the_port_a_process_of_the_last_one_listened_on(
    harness: Harness,
) -> None:
    bound = await _tenant_after(harness, LISTEN_IN_BACKGROUND)
    assert (bound.status, bound.stdout) == (S.OK, "bound\n"), bound
