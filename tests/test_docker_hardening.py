"""Design §4, each Docker default checked twice: in the container's HostConfig as the daemon
reports it, and by its effect on code running inside."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

import math
import os
import textwrap
from collections.abc import AsyncIterator
from typing import Any

from gem_sandbox import agent
from gem_sandbox.agent import AGENT_CAPS
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import (
    CREATED_LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    THREAD_VARS,
    DockerBackend,
    DockerOptions,
)
from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from gem_sandbox.sandbox.errors import SandboxUnavailable
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from tests.docker_fixtures import TEST_POOL, backend, docker_client, sandbox_image, spec  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

MIB = 1024 * 1024
HOST_CANARY = "GEM_SANDBOX_TEST_HOST_SECRET"


@pytest.fixture
async def container(
    backend: DockerBackend, spec: SandboxSpec, docker_client, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, Any]]:
    """``docker inspect`` of a freshly launched sandbox (launched with a host secret set)."""
    monkeypatch.setenv(HOST_CANARY, "leaked")
    box = await backend.launch(spec)
    try:
        yield docker_client.api.inspect_container(box.id)
    finally:
        await box.kill()


@pytest.fixture
async def sandbox(
    backend: DockerBackend, spec: SandboxSpec, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Sandbox]:
    """A sandbox to run code in (launched with a host secret set)."""
    monkeypatch.setenv(HOST_CANARY, "leaked")
    async with open_sandbox(backend, spec) as sandbox:
        yield sandbox


async def python(sandbox: Sandbox, code: str, **kwargs: Any) -> ExecResult:
    result = await sandbox.run(textwrap.dedent(code), timeout=kwargs.pop("timeout", 20), **kwargs)
    assert result.status in (Status.OK, Status.ERROR), result
    return result


async def output(sandbox: Sandbox, code: str) -> str:
    result = await python(sandbox, code)
    assert result.ok, result.stderr
    return result.stdout.strip()


def cgroup_file(v2: str, v1: str) -> str:
    """Python that reads a cgroup file under cgroup v2 or v1, whichever the host has."""
    return f"""
        import os
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        print(open("/sys/fs/cgroup/" + ("{v2}" if v2 else "{v1}")).read().strip())
    """


# --- HostConfig ------------------------------------------------------------------------


async def test_config_has_no_network(container: dict) -> None:
    assert container["HostConfig"]["NetworkMode"] == "none"


async def test_config_root_filesystem_is_read_only(container: dict) -> None:
    assert container["HostConfig"]["ReadonlyRootfs"] is True


async def test_config_drops_all_capabilities_but_the_agents_six(container: dict) -> None:
    host = container["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert {cap.removeprefix("CAP_") for cap in host["CapAdd"]} == set(AGENT_CAPS)
    assert host["Privileged"] is False


async def test_config_sets_no_new_privileges_and_keeps_default_seccomp(container: dict) -> None:
    assert container["HostConfig"]["SecurityOpt"] == ["no-new-privileges"]


async def test_config_limits_pids(container: dict, spec: SandboxSpec) -> None:
    assert container["HostConfig"]["PidsLimit"] == spec.pids


async def test_config_limits_memory_with_swap_included(container: dict, spec: SandboxSpec) -> None:
    host = container["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == spec.memory_mb * MIB


async def test_config_limits_cpu(container: dict, spec: SandboxSpec) -> None:
    assert container["HostConfig"]["NanoCpus"] == int(spec.cpus * 1e9)


async def test_config_sets_ulimits_but_not_nproc(container: dict, spec: SandboxSpec) -> None:
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in container["HostConfig"]["Ulimits"]}
    fsize = max(spec.workdir_mb, spec.tmp_mb) * MIB
    assert ulimits == {"nofile": (4096, 4096), "core": (0, 0), "fsize": (fsize, fsize)}


async def test_config_runs_an_init(container: dict) -> None:
    assert container["HostConfig"]["Init"] is True


async def test_config_has_private_ipc(container: dict) -> None:
    assert container["HostConfig"]["IpcMode"] == "private"


async def test_config_sizes_shm(container: dict) -> None:
    assert container["HostConfig"]["ShmSize"] == 64 * MIB


async def test_config_sizes_tmpfs(container: dict, spec: SandboxSpec) -> None:
    tmpfs = container["HostConfig"]["Tmpfs"]
    assert set(tmpfs) == {"/tmp", "/work"}
    assert f"size={spec.tmp_mb}m" in tmpfs["/tmp"].split(",")
    assert f"size={spec.workdir_mb}m" in tmpfs["/work"].split(",")


async def test_config_writes_no_container_log(container: dict) -> None:
    # The tightest cap: nothing a sandbox prints reaches the daemon's disk (the agent's log is
    # read from the attach stream instead).
    assert container["HostConfig"]["LogConfig"]["Type"] == "none"


async def test_config_environment_is_minimal(container: dict, spec: SandboxSpec) -> None:
    env = dict(item.split("=", 1) for item in container["Config"]["Env"])
    threads = str(math.ceil(spec.cpus))
    assert HOST_CANARY not in env
    assert set(env) == {"PATH", "LANG", "PYTHONDONTWRITEBYTECODE", "HOME", *THREAD_VARS}
    assert all(env[var] == threads for var in THREAD_VARS)


async def test_config_labels_pool_owner_and_creation(container: dict) -> None:
    labels = container["Config"]["Labels"]
    hostname, pid, _start = labels[OWNER_LABEL].rsplit(":", 2)
    assert labels[POOL_LABEL] == TEST_POOL
    assert (hostname, pid) == (os.uname().nodename, str(os.getpid()))
    assert int(labels[CREATED_LABEL]) > 0


async def test_config_mounts_only_the_agent_read_only(container: dict) -> None:
    mounts = container["Mounts"]
    assert [(m["Type"], m["Source"], m["Destination"], m["RW"]) for m in mounts] == [
        ("bind", agent.AGENT_DIR, agent.MOUNT_POINT, False)
    ]
    assert not any("docker.sock" in bind for bind in container["HostConfig"]["Binds"] or [])


async def test_config_passes_the_runtime_option(sandbox_image: str, spec: SandboxSpec) -> None:
    backend = DockerBackend(DockerOptions(image=sandbox_image, runtime="no-such-runtime"))
    with pytest.raises(SandboxUnavailable, match="no-such-runtime"):
        await backend.launch(spec)
    await backend.aclose()


# --- effects, seen from code running inside ---------------------------------------------


async def test_code_has_only_loopback_and_cannot_connect_out(sandbox: Sandbox) -> None:
    out = await output(
        sandbox,
        """
        import errno, socket
        print(sorted(name for _, name in socket.if_nameindex()))
        try:
            # TEST-NET-1 (RFC 5737) is never routed; with no interface nothing is even sent.
            socket.create_connection(("192.0.2.1", 9), timeout=2)
        except OSError as exc:
            print(errno.errorcode.get(exc.errno, exc))
    """,
    )
    assert out.splitlines() == ["['lo']", "ENETUNREACH"]


async def test_code_cannot_write_the_root_filesystem(sandbox: Sandbox) -> None:
    out = await output(
        sandbox,
        """
        import errno
        try:
            open("/var/tmp/x", "w")  # world-writable, but on the root filesystem
        except OSError as exc:
            print(errno.errorcode[exc.errno])
    """,
    )
    assert out == "EROFS"


async def test_code_has_no_capabilities_no_new_privileges_and_seccomp(sandbox: Sandbox) -> None:
    out = await output(
        sandbox,
        """
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        print(*(status[key].strip() for key in ("CapEff", "CapPrm", "NoNewPrivs", "Seccomp")))
    """,
    )
    assert out.split() == ["0000000000000000", "0000000000000000", "1", "2"]


async def test_code_runs_unprivileged_and_cannot_signal_the_agent(sandbox: Sandbox) -> None:
    out = await output(
        sandbox,
        f"""
        import errno, os
        print(os.getuid(), os.geteuid(), os.getgid())
        try:
            os.kill({sandbox.hello["pid"]}, 0)
        except OSError as exc:
            print(errno.errorcode[exc.errno])
    """,
    )
    ids, denied = out.splitlines()
    assert all(int(n) >= 20000 for n in ids.split())
    assert denied == "EPERM"


async def test_a_fork_bomb_stops_at_the_pids_limit(sandbox: Sandbox, spec: SandboxSpec) -> None:
    out = await output(sandbox, cgroup_file("pids.max", "pids/pids.max"))
    assert out == str(spec.pids)
    bomb = await sandbox.run(
        textwrap.dedent("""
        import errno, os, time
        forked = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                forked += 1
        except OSError as exc:
            print(forked, errno.errorcode[exc.errno], flush=True)
    """),
        timeout=5,
    )
    assert bomb.status is Status.OK  # its children are killed once it exits
    forked, error = bomb.stdout.split()
    assert int(forked) < spec.pids and error == "EAGAIN"
    assert await output(sandbox, "print('still usable')") == "still usable"


async def test_a_memory_bomb_is_killed_and_the_sandbox_recovers(
    sandbox: Sandbox, spec: SandboxSpec
) -> None:
    limit = await output(sandbox, cgroup_file("memory.max", "memory/memory.limit_in_bytes"))
    assert int(limit) == spec.memory_mb * MIB
    bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
    # The per-run address-space cap is lifted so that the container's cgroup is what stops it.
    result = await sandbox.run(bomb, timeout=30, limits=RunLimits(run_memory_mb=0))
    assert (result.status, result.signal) == (Status.OOM, 9), result
    assert await output(sandbox, "print('alive')") == "alive"  # user code is killed first


async def test_a_self_sent_sigkill_is_not_mistaken_for_an_oom_kill(sandbox: Sandbox) -> None:
    result = await sandbox.run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert (result.status, result.signal) == (Status.KILLED, 9)


async def test_code_sees_the_cpu_quota(sandbox: Sandbox, spec: SandboxSpec) -> None:
    out = await output(
        sandbox,
        """
        import os
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        else:
            quota = open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read()
            period = open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read()
        print(int(quota) / int(period))
    """,
    )
    assert float(out) == spec.cpus


async def test_ulimits_apply_inside(sandbox: Sandbox, spec: SandboxSpec) -> None:
    out = await output(
        sandbox,
        """
        limits = {line[:26].strip(): line[26:].split()[:2] for line in open("/proc/1/limits")}
        for name in ("Max core file size", "Max open files", "Max file size"):
            print(name, *limits[name])
    """,
    )
    fsize = str(max(spec.workdir_mb, spec.tmp_mb) * MIB)
    assert out.splitlines() == [
        "Max core file size 0 0",
        "Max open files 4096 4096",
        f"Max file size {fsize} {fsize}",
    ]


async def test_pid_1_is_an_init(sandbox: Sandbox) -> None:
    out = await output(sandbox, "print(open('/proc/1/cmdline').read().split('\\0')[0])")
    assert out.endswith("docker-init")


async def test_ipc_namespace_is_not_the_hosts(sandbox: Sandbox) -> None:
    out = await output(sandbox, "import os; print(os.readlink('/proc/self/ns/ipc'))")
    assert out.startswith("ipc:[") and out != os.readlink("/proc/self/ns/ipc")


async def test_shm_and_tmpfs_have_their_sizes(sandbox: Sandbox, spec: SandboxSpec) -> None:
    out = await output(
        sandbox,
        """
        import os
        for path in ("/dev/shm", "/tmp", "/work"):
            st = os.statvfs(path)
            print(st.f_blocks * st.f_frsize // (1024 * 1024))
    """,
    )
    assert [int(mb) for mb in out.split()] == [64, spec.tmp_mb, spec.workdir_mb]


async def test_code_does_not_see_the_host_environment(sandbox: Sandbox, spec: SandboxSpec) -> None:
    out = await output(
        sandbox,
        f"""
        import os
        print(os.environ.get("{HOST_CANARY}"), os.environ.get("OMP_NUM_THREADS"))
    """,
    )
    assert out == f"None {math.ceil(spec.cpus)}"


async def test_only_the_agent_is_mounted_and_read_only(sandbox: Sandbox) -> None:
    out = await output(
        sandbox,
        f"""
        import os
        for line in open("/proc/self/mountinfo"):
            fields = line.split()
            if fields[4] == "{agent.MOUNT_POINT}":
                print("agent", fields[5].split(",")[0])
        mounts = open("/proc/self/mountinfo").read()
        print("socket", os.path.exists("/var/run/docker.sock") or "docker.sock" in mounts)
    """,
    )
    assert out.splitlines() == ["agent ro", "socket False"]
