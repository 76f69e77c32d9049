"""The bubblewrap backend itself: its namespaces, and what the host sees when a sandbox's
agent dies, hangs or is closed."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time

import anyio
import pytest

from gem_sandbox.sandbox.backends.local import BOX_VAR, LocalBackend, bwrap_processes
from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from gem_sandbox.sandbox.errors import SandboxCrashed
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import (  # noqa: F401  (local_sandbox is a fixture)
    SPEC,
    agent_host_pid,
    host_processes_matching,
    local_sandbox,
    until_host_processes_match,
)

pytestmark = pytest.mark.anyio


def test_check_says_whether_bubblewrap_works():
    problem = LocalBackend.check()
    if shutil.which("bwrap") is None:
        assert problem is not None and "apt-get install bubblewrap" in problem
    else:
        assert problem is None


async def test_cpp_is_offered_exactly_when_gxx_is_installed(local_sandbox: Sandbox):
    has_gxx = shutil.which("g++", path="/usr/bin:/bin") is not None
    assert ("cpp" in local_sandbox.hello["languages"]) == has_gxx


async def test_a_sandbox_sees_only_its_own_processes(local_sandbox: Sandbox):
    result = await local_sandbox.run(
        "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    )
    pids = eval(result.stdout)
    assert (
        pids[:2] == [1, 2] and len(pids) <= 5
    )  # bwrap's init, the agent, its spare child, this run
    assert local_sandbox.hello["pid"] == 2


async def test_the_host_is_read_only_and_its_secrets_absent(local_sandbox: Sandbox):
    code = (
        "import os\n"
        "for path in ('/usr/evil', '/etc/evil', '/evil'):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
        "roots = open('/etc/passwd').read().count(':0:0:')\n"
        "print(os.path.exists('/root'), os.listdir('/home'), roots)"
    )
    result = await local_sandbox.run(code)
    assert result.stdout.splitlines()[-1] == "False ['user'] 1"  # e2b's home dir, a link to /work
    assert "open" not in result.stdout and result.stdout.count("Error") == 3


async def test_sandboxes_get_distinct_uid_ranges():
    if os.geteuid() != 0:
        pytest.skip("uid ranges are used only when the host side is root")
    async with open_sandbox(LocalBackend(), SPEC) as a, open_sandbox(LocalBackend(), SPEC) as b:
        uid_a = (await a.run("import os; print(os.getuid())")).stdout
        uid_b = (await b.run("import os; print(os.getuid())")).stdout
    assert uid_a != uid_b


async def test_killed_agent_fails_the_inflight_run_with_infra_error(local_sandbox: Sandbox):
    results = []

    async def long_run() -> None:
        results.append(await local_sandbox.run("import time; time.sleep(30)", timeout=30))

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_run)
        await anyio.sleep(0.3)
        os.kill(agent_host_pid(local_sandbox), signal.SIGKILL)
    assert results[0].status is Status.INFRA_ERROR
    assert not local_sandbox.alive
    assert (await local_sandbox.run("print(1)")).status is Status.INFRA_ERROR
    with pytest.raises(SandboxCrashed):
        await local_sandbox.ping()


async def test_a_bad_frame_ends_the_agent_and_fails_later_runs(local_sandbox: Sandbox):
    await local_sandbox.box.stream.send(b"\xff\xff\xff\xff garbage")
    with anyio.fail_after(5):
        while local_sandbox.alive:
            await anyio.sleep(0.01)
    assert (await local_sandbox.run("print(1)")).status is Status.INFRA_ERROR


async def test_wedged_agent_fails_a_run_by_its_deadline_plus_grace(local_sandbox: Sandbox):
    os.kill(agent_host_pid(local_sandbox), signal.SIGSTOP)
    started = time.monotonic()
    result = await local_sandbox.run("print(1)", timeout=0.5)
    assert result.status is Status.INFRA_ERROR and "did not answer" in result.stderr
    assert time.monotonic() - started < 0.5 + local_sandbox.grace + 0.5
    assert not local_sandbox.alive


async def test_closing_a_sandbox_kills_everything_in_it():
    tag = f".{secrets.randbelow(10**9):09d}"  # in these sleeps' command lines only: no host process has it
    async with open_sandbox(LocalBackend(), SPEC) as sb:
        await sb.shell(f"setsid sleep 311{tag} & sleep 312{tag} &")
        await sb.kernel_exec(f"import subprocess; p = subprocess.Popen(['sleep', '313{tag}'])")
        await until_host_processes_match(tag, 3)
    await sb.close()  # again: closing is idempotent
    assert host_processes_matching(tag) == []
    assert [p for p in bwrap_processes() if p.box == sb.id] == []


async def test_reap_orphans_kills_sandbox_inits_whose_launcher_died():
    # A launcher without --die-with-parent, killed while its init waits: the init lives on.
    block_r, block_w = os.pipe()
    launcher = subprocess.Popen(
        ["bwrap", "--unshare-pid", "--ro-bind", "/usr", "/usr", "--setenv", BOX_VAR, "local-orphan"]
        + ["--block-fd", str(block_r), "--", "/usr/bin/true"],
        pass_fds=[block_r],
    )
    os.close(block_r)
    with anyio.fail_after(5):
        while not (
            inits := [p.pid for p in bwrap_processes() if p.box == "local-orphan" and p.init]
        ):
            await anyio.sleep(0.01)
    launcher.kill()
    launcher.wait()
    assert os.path.exists(f"/proc/{inits[0]}")

    assert await LocalBackend().reap_orphans() >= 1
    with anyio.fail_after(5):
        while any(p.box == "local-orphan" for p in bwrap_processes()):
            await anyio.sleep(0.01)
    os.close(block_w)


async def test_reap_orphans_spares_live_sandboxes(local_sandbox: Sandbox):
    await LocalBackend().reap_orphans()
    assert (await local_sandbox.run("print('alive')")).stdout == "alive\n"


async def test_a_sandbox_that_cannot_start_raises_sandbox_crashed():
    with pytest.raises(SandboxCrashed, match="before saying hello"):
        async with open_sandbox(LocalBackend(python="/nonexistent/python3"), SPEC):
            pass
