"""What a sandbox container is made with: the hardened settings (design §4), the agent's argv.

Pure functions from :class:`DockerOptions` and a :class:`SandboxSpec` to the arguments of
``containers.create`` and of the agent's exec, so every hardening default is read (and
tested) in one place, apart from talking to the daemon.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import docker.types

from gem_sandbox import agent
from gem_sandbox.sandbox.backends.base import MIB, SandboxSpec
from gem_sandbox.sandbox.backends.docker import reaping

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class DockerOptions:
    """Container settings beyond the per-sandbox :class:`SandboxSpec`. Defaults are hardened."""

    image: str | None = None  # None: spec.image, else the newest built gem-sandbox image
    runtime: str | None = None  # e.g. "runsc" for gVisor; None = the daemon's default (runc)
    network_mode: str = "none"
    read_only: bool = True
    cap_add: tuple[str, ...] = agent.AGENT_CAPS  # after dropping ALL
    security_opt: tuple[str, ...] = ("no-new-privileges",)  # seccomp stays Docker's default
    init: bool = True
    ipc_mode: str = "private"
    shm_mb: int = 64
    nofile: int = 4096
    # A json-file cap; None (the default) turns container logs off: the daemon would otherwise
    # JSON-encode every protocol byte to disk (reading 8 MB of files took 244 ms, not 54), and
    # the host keeps the agent's log from the attach stream anyway (AttachStream.log_tail).
    log_max_size: str | None = None
    api_timeout_s: float = 30.0  # one Docker API call
    retry_s: float = 20.0  # how long transient daemon errors are retried


def container_kwargs(opts: DockerOptions, spec: SandboxSpec, agent_argv: list[str]) -> dict[str, Any]:
    """Everything ``containers.create`` gets besides the image: the hardened host config, and
    the agent as the container's process (under Docker's init), its stdin kept open."""
    threads = str(spec.threads)
    log_config = (
        docker.types.LogConfig(type="json-file", config={"max-size": opts.log_max_size})
        if opts.log_max_size
        else docker.types.LogConfig(type="none")
    )
    return dict(
        command=agent_argv,
        user="0:0",
        # Attached before it starts, stdin only once: when the host's attach connection
        # closes, however the host ended, the agent reads EOF and exits, the container stops
        # and the daemon removes it. A host killed outright leaves nothing behind.
        stdin_open=True,
        detach=False,
        auto_remove=True,
        name=f"gem-sandbox-{secrets.token_hex(6)}",
        working_dir=agent.START_DIR,
        environment={"HOME": "/work", **{var: threads for var in THREAD_VARS}},
        labels=reaping.labels(spec),
        network_mode=opts.network_mode,
        sysctls={} if opts.network_mode == "host" else {"net.ipv4.tcp_max_tw_buckets": "0"},  # agent.netns
        read_only=opts.read_only,
        tmpfs={
            "/tmp": f"size={spec.tmp_mb}m,mode=1777,exec,nosuid,nodev",
            "/work": f"size={spec.workdir_mb}m,mode=1777,exec,nosuid,nodev",
        },
        mounts=[
            docker.types.Mount(agent.MOUNT_POINT, agent.AGENT_DIR, type="bind", read_only=True)
        ],
        cap_drop=["ALL"],
        cap_add=list(opts.cap_add),
        security_opt=list(opts.security_opt),
        pids_limit=spec.pids,
        mem_limit=spec.memory_mb * MIB,
        memswap_limit=spec.memory_mb * MIB,
        nano_cpus=int(spec.cpus * 1e9),
        ulimits=[
            docker.types.Ulimit(name="nofile", soft=opts.nofile, hard=opts.nofile),
            docker.types.Ulimit(name="core", soft=0, hard=0),
            docker.types.Ulimit(name="fsize", soft=_fsize(spec), hard=_fsize(spec)),
        ],
        init=opts.init,
        ipc_mode=opts.ipc_mode,
        shm_size=opts.shm_mb * MIB,
        log_config=log_config,
        **({"runtime": opts.runtime} if opts.runtime else {}),
    )


def agent_argv(spec: SandboxSpec, uid_base: int, uid_count: int) -> list[str]:
    """Each container gets a uid range of its own (see
    :mod:`gem_sandbox.sandbox.backends.uids`), so RLIMIT_NPROC and the kernel's other per-uid
    counters are per sandbox; the OOM-kill count of the container's memory cgroup makes
    ``oom`` the kernel's verdict."""
    return agent.command(
        uid_base=uid_base,
        uid_count=uid_count,
        nproc=spec.pids,
        threads=spec.threads,
        scratch=agent.SCRATCH_DIRS,
        oom_counter="auto",
    )


def _fsize(spec: SandboxSpec) -> int:
    """No file can outgrow the largest writable tmpfs anyway; fail the write early instead."""
    return max(spec.workdir_mb, spec.tmp_mb) * MIB
