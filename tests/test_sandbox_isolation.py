"""What a run cannot do: outlive its deadline, exhaust the sandbox, be root, reach a network,
or leave anything behind for the next tenant once the sandbox is reset."""

from __future__ import annotations

import socket

import anyio
import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import sandbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio

# Lists the sandbox's processes other than this lister and its parent (a run of its own).
LIST_PROCESSES = """
import os
me = os.getpid()
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) != me:
        try:
            print(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode().strip())
        except OSError:
            pass
"""

ESCAPES = """
setsid sleep 301 &
(sleep 302 &)
python3 -c 'import os, time; os.fork() or (os.setsid(), os.fork() or time.sleep(303))' &
sleep 305
"""


async def sleepers(sandbox: Sandbox) -> list[str]:
    """The sleeps that runs started (not the container's own ``docker-init -- sleep infinity``)."""
    listing = (await sandbox.run(LIST_PROCESSES)).stdout
    return [line for line in listing.splitlines() if "sleep" in line and "sleep infinity" not in line]


async def test_timeout_kills_grandchildren_and_setsid_escapes(sandbox: Sandbox):
    result = await sandbox.run(ESCAPES, "bash", timeout=1.0)
    assert result.status is Status.TIMEOUT
    assert await sleepers(sandbox) == []
    assert (await sandbox.stats())["processes"] == 0


async def test_background_processes_die_when_the_run_ends(sandbox: Sandbox):
    code = (
        "import subprocess\n"
        "quiet = {'stdout': subprocess.DEVNULL, 'stderr': subprocess.DEVNULL}\n"
        "subprocess.Popen(['setsid', 'sleep', '306'], **quiet)"
    )
    assert (await sandbox.run(code)).status is Status.OK
    assert await sleepers(sandbox) == []


async def test_a_background_job_holding_stdout_does_not_hold_the_run_open(sandbox: Sandbox):
    result = await sandbox.run("(sleep 0.05; echo soon; sleep 307; echo never) &\necho early", "bash", timeout=20)
    assert (result.status, result.stdout) == (Status.OK, "early\nsoon\n")
    assert result.duration_ms < 5000
    assert await sleepers(sandbox) == []


async def test_fork_bomb_is_contained_and_the_next_run_is_clean(sandbox: Sandbox):
    result = await sandbox.run(":(){ :|:& };:", "bash", timeout=2.0)
    assert "fork" in result.stderr  # it hit the process limit (the script itself exits at once)
    assert (await sandbox.stats())["processes"] == 0
    assert (await sandbox.run("print('alive')")).stdout == "alive\n"


async def test_python_fork_bomb_is_contained(sandbox: Sandbox):
    """The verdict waits a second for the bomb's processes to die; under load the killing
    goes on after it, and is done well within a reset's time."""
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    assert (await sandbox.run(code, timeout=2.0)).status is Status.TIMEOUT
    with anyio.fail_after(6):
        while (await sandbox.stats())["processes"]:
            await anyio.sleep(0.1)


async def test_memory_bomb_is_contained_and_the_next_run_is_clean(sandbox: Sandbox):
    code = "x = []\nwhile True:\n    x.append(bytearray(10 ** 7))"
    result = await sandbox.run(code, limits=RunLimits(run_memory_mb=256))
    assert (result.status, result.exit_code) == (Status.ERROR, 1)  # MemoryError under RLIMIT_AS
    assert (await sandbox.run("print(sum(range(10)))")).stdout == "45\n"


async def test_runs_are_unprivileged(sandbox: Sandbox):
    code = (
        "import os\n"
        "caps = [line for line in open('/proc/self/status') if line.startswith('CapEff')]\n"
        "print(os.getuid(), os.geteuid(), caps)"
    )
    uid, euid, caps = (await sandbox.run(code)).stdout.split(" ", 2)
    assert uid == euid and int(uid) != 0
    assert caps.strip() == "['CapEff:\\t0000000000000000\\n']"


async def test_concurrent_runs_have_distinct_uids(sandbox: Sandbox):
    if sandbox.hello["isolation"] != "uid":
        pytest.skip("the agent is not root here: runs share its uid")
    uids = []

    async def one() -> None:
        uids.append(
            (await sandbox.run("import os, time; time.sleep(0.3); print(os.getuid())")).stdout
        )

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert len(set(uids)) == 3


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP", "SIGTERM", "SIGINT", "SIGHUP"])
async def test_a_run_cannot_signal_the_agent(sandbox: Sandbox, sig: str):
    # Denied where runs have their own uid; dropped by the kernel where the agent is the
    # sandbox's pid 1 (rootless). Either way the run's verdict is its own and the agent lives.
    if sandbox.hello["isolation"] == "token" and sandbox.hello["pid"] != 1:
        pytest.skip("SECURITY.md (e2b backend): an agent started unprivileged, as the project's e2b endpoint starts it, shares its uid with its runs")
    code = (
        f"import os, signal\ntry:\n    os.kill({sandbox.hello['pid']}, signal.{sig})\n"
        "except PermissionError:\n    pass\nraise SystemExit(3)"
    )
    result = await sandbox.run(code)
    assert (result.status, result.exit_code) == (Status.ERROR, 3)
    assert await sandbox.ping() > 0
    assert (await sandbox.run("print('alive')")).stdout == "alive\n"


async def test_there_is_no_network_but_loopback(sandbox: Sandbox):
    with socket.socket() as listener:  # a host service the sandbox must not reach
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "print([name for _, name in socket.if_nameindex()])\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "except OSError as exc:\n    print(type(exc).__name__)"
        )
        result = await sandbox.run(code)
    assert result.stdout == "['lo']\nConnectionRefusedError\n"


async def test_reset_leaves_no_files_processes_kernels_or_shell_state(sandbox: Sandbox):
    await sandbox.write_files({"dir/file.txt": "data"})
    await sandbox.run("for d in ('/tmp', '/dev/shm'):\n    open(d + '/left', 'w').write('x')")
    await sandbox.run(
        "mkdir -p deep/er && touch deep/er/f && chmod 500 deep/er && ln -s /etc/passwd link", "bash"
    )
    await sandbox.kernel_exec("secret = 42")
    await sandbox.shell("export SECRET=42; cd /tmp; setsid sleep 307 & sleep 308 &")
    assert (await sandbox.stats())["processes"] >= 3

    await sandbox.reset()

    stats = await sandbox.stats()
    assert (stats["processes"], stats["kernels"], stats["shells"]) == (0, [], [])
    listing = await sandbox.run(
        f"import os; print([os.listdir(d) for d in ({sandbox.hello['workdir']!r}, '/tmp', '/dev/shm')])"
    )
    assert listing.stdout == "[[], [], []]\n"
    assert (await sandbox.kernel_exec("secret")).status is Status.ERROR
    assert (await sandbox.shell('echo "[$SECRET]"; pwd')).stdout == f"[]\n{sandbox.hello['workdir']}\n"
    assert await sleepers(sandbox) == []


async def test_reset_when_idle_succeeds_repeatedly(sandbox: Sandbox):
    for _ in range(3):
        await sandbox.reset()
    assert (await sandbox.run("print('ok')")).ok


async def test_the_agent_returns_to_its_idle_size_after_a_reset(sandbox: Sandbox):
    await sandbox.reset()
    idle = (await sandbox.stats())["rss_kb"]
    for _ in range(3):
        await sandbox.run("import sys; sys.stdout.write('x' * (40 << 20))")
        await sandbox.write_files({"big": b"y" * (16 << 20)})
        await sandbox.read_files(["big"])
        await sandbox.reset()
    assert (await sandbox.stats())["rss_kb"] < idle + 4096
