"""Docker backend: one hardened container per sandbox, its agent driven over one exec attach.

Each container idles (``sleep infinity`` under Docker's init, which also reaps orphans). The
agent is started once per container with an exec whose stdin, stdout and stderr are attached;
that hijacked API connection is the sandbox's byte stream for its whole life, so a run costs a
frame on an open socket instead of a ``docker exec`` (~85 ms). The host never uses the
container's network (there is none): the Docker API socket is the only channel.

Hardening (design §4) is on by default and every knob is a :class:`DockerOptions` field:
no network, read-only root, sized tmpfs for ``/tmp`` and ``/work``, all capabilities dropped
but the agent's six, ``no-new-privileges``, Docker's default seccomp profile, pids, memory
(swap included) and CPU quotas, ulimits, private IPC, a sized ``/dev/shm``, capped logs, a
minimal environment, reaping labels, and one read-only host mount: the agent package.

Deviation from the design's "unprivileged ``user``": the agent's exec runs as root *inside*
the container, holding only SETUID, SETGID, KILL, DAC_OVERRIDE, FOWNER and CHOWN. It needs
them to give every run its own unprivileged uid (which drops all capabilities, so CapEff of
sandbox code is 0), to kill a timed-out run by uid (catching ``setsid`` escapes a group kill
misses), and to empty the work dir between tenants whatever modes the code left. Sandbox code
thus never runs as root and cannot signal the agent, which an agent sharing the code's uid
could not prevent. ``no-new-privileges`` stops any way back up through setuid binaries. The
container's own user stays root too: Docker gives an exec the capabilities it computed for the
container's user, so a non-root container user would leave the agent with none.
"""

from __future__ import annotations

import io
import logging
import math
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import docker
import docker.errors
import docker.types
import tenacity
from anyio.abc import ByteStream, SocketStream

from gem_sandbox import agent
from gem_sandbox.images import default_image
from gem_sandbox.sandbox.backends.base import (
    UIDS_PER_SANDBOX,
    Backend,
    Box,
    SandboxSpec,
    allocate_uid_base,
)
from gem_sandbox.sandbox.errors import SandboxUnavailable

POOL_LABEL = "gem-sandbox.pool"
OWNER_LABEL = "gem-sandbox.owner"
CREATED_LABEL = "gem-sandbox.created"
AGENT_CAPS = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "FOWNER", "CHOWN")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_MIB = 1024 * 1024
_LOG_TAIL = 8 * 1024  # bytes of the agent's stderr kept for exit_reason()
_T = TypeVar("_T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DockerOptions:
    """Container settings beyond the per-sandbox :class:`SandboxSpec`. Defaults are hardened."""

    image: str | None = None  # None: spec.image, else the newest built gem-sandbox image
    runtime: str | None = None  # e.g. "runsc" for gVisor; None = the daemon's default (runc)
    network_mode: str = "none"
    read_only: bool = True
    cap_add: tuple[str, ...] = AGENT_CAPS  # after dropping ALL
    security_opt: tuple[str, ...] = ("no-new-privileges",)  # seccomp stays Docker's default
    init: bool = True
    ipc_mode: str = "private"
    shm_mb: int = 64
    nofile: int = 4096
    log_max_size: str | None = "1m"  # json-file cap; None turns container logs off
    api_timeout_s: float = 30.0  # one Docker API call
    retry_s: float = 20.0  # how long transient daemon errors are retried


class DockerBackend(Backend):
    """Launches hardened containers; safe to share between pools and event loop tasks."""

    name = "docker"

    def __init__(self, options: DockerOptions | None = None) -> None:
        self.options = options or DockerOptions()
        self._client: docker.DockerClient | None = None
        self._client_lock = threading.Lock()
        self._image: str | None = None

    @classmethod
    def check(cls) -> str | None:
        try:
            client = docker.from_env(timeout=5)
            try:
                client.ping()
            finally:
                client.close()
        except docker.errors.DockerException as exc:
            return f"no Docker daemon answers ({exc}); start it (systemctl start docker)"
        if default_image() is None:
            return "the sandbox image is not built; run `gem-sandbox images build`"
        return None

    async def launch(self, spec: SandboxSpec) -> Box:
        # Shielded: a launch cancelled halfway would otherwise leave a running container that
        # no one owns a handle to (and whose owner is alive, so reaping will not find it).
        with anyio.CancelScope(shield=True):
            try:
                container_id, exec_id, raw, pending = await self._blocking(self._start, spec)
            except docker.errors.APIError as exc:  # transient ones were retried already
                raise SandboxUnavailable(f"Docker refused to start a sandbox: {exc}") from exc
            try:
                sock = await SocketStream.from_socket(raw)
            except BaseException:
                raw.close()
                await self._blocking(self._remove, container_id)
                raise
            box = DockerBox(self, container_id, exec_id, _AttachStream(sock, pending))
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await box.kill()
            raise
        return box

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        return await self._blocking(self._reap, pool_label)

    async def aclose(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            await anyio.to_thread.run_sync(client.close)

    # --- blocking parts, run in worker threads -----------------------------------------

    def _start(self, spec: SandboxSpec) -> tuple[str, str, socket.socket, bytes]:
        """Create and start a container and its agent; return the attach socket (ours alone)
        and any stream bytes already read with the HTTP response."""
        client = self._api()
        container = client.containers.create(self._image_for(spec), **self._container_kwargs(spec))
        try:
            container.start()
            exec_id = client.api.exec_create(
                container.id, _agent_argv(spec), stdin=True, user="0:0", workdir=agent.START_DIR
            )["Id"]
            raw, pending = _take_socket(client.api.exec_start(exec_id, socket=True))
        except BaseException:
            try:
                self._remove(container.id)
            except docker.errors.DockerException:
                pass  # the daemon is in trouble; its labels let reap_orphans() find it later
            raise
        return container.id, exec_id, raw, pending

    def _container_kwargs(self, spec: SandboxSpec) -> dict[str, Any]:
        """Everything ``containers.create`` gets besides the image: the hardened host config."""
        opts = self.options
        threads = str(_threads(spec))
        log_config = (
            docker.types.LogConfig(type="json-file", config={"max-size": opts.log_max_size})
            if opts.log_max_size
            else docker.types.LogConfig(type="none")
        )
        return dict(
            command=["sleep", "infinity"],
            name=f"gem-sandbox-{secrets.token_hex(6)}",
            working_dir="/work",
            environment={"HOME": "/work", **{var: threads for var in THREAD_VARS}},
            labels={
                POOL_LABEL: "default",
                **spec.labels,
                OWNER_LABEL: owner_id(),
                CREATED_LABEL: str(int(time.time())),
            },
            network_mode=opts.network_mode,
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
            mem_limit=spec.memory_mb * _MIB,
            memswap_limit=spec.memory_mb * _MIB,
            nano_cpus=int(spec.cpus * 1e9),
            ulimits=[
                docker.types.Ulimit(name="nofile", soft=opts.nofile, hard=opts.nofile),
                docker.types.Ulimit(name="core", soft=0, hard=0),
                docker.types.Ulimit(name="fsize", soft=_fsize(spec), hard=_fsize(spec)),
            ],
            init=opts.init,
            ipc_mode=opts.ipc_mode,
            shm_size=opts.shm_mb * _MIB,
            log_config=log_config,
            **({"runtime": opts.runtime} if opts.runtime else {}),
        )

    def _image_for(self, spec: SandboxSpec) -> str:
        image = spec.image or self.options.image or self._image or default_image()
        if image is None:
            raise SandboxUnavailable(
                "no gem-sandbox image is built; run `gem-sandbox images build` (works offline)"
            )
        if not (spec.image or self.options.image):
            self._image = image
        return image

    def _remove(self, container_id: str) -> None:
        try:
            self._api().api.remove_container(container_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: a removal is already in progress
                raise

    def _reap(self, pool_label: str | None) -> int:
        labels = [OWNER_LABEL] + ([f"{POOL_LABEL}={pool_label}"] if pool_label else [])
        found = self._api().api.containers(all=True, filters={"label": labels})
        orphans = [c["Id"] for c in found if _owner_is_dead(c["Labels"][OWNER_LABEL])]
        for container_id in orphans:
            self._remove(container_id)
        return len(orphans)

    def _exit_reason(self, container_id: str, exec_id: str) -> str | None:
        """One attempt, no retries: this diagnoses a failure and must answer quickly."""
        api = self._api().api
        try:
            state = api.inspect_container(container_id)["State"]
            agent_exec = api.exec_inspect(exec_id)
        except docker.errors.NotFound:
            return "removed"
        except Exception as exc:
            if _is_transient(exc):
                return f"the Docker daemon does not answer ({exc})"
            raise
        if state["OOMKilled"]:
            return "OOMKilled"
        if not state["Running"]:
            return f"container exited with code {state['ExitCode']}"
        if not agent_exec["Running"]:
            return f"agent exited with code {agent_exec['ExitCode']}"
        return None

    # --- the Docker client and its retries -----------------------------------------------

    async def _blocking(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(self._retrying, fn, *args)

    def _retrying(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Call ``fn`` retrying transient daemon errors with a fresh client each time; when
        the daemon stays away, raise :class:`SandboxUnavailable` saying so."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_is_transient),
            stop=tenacity.stop_after_delay(self.options.retry_s),
            wait=tenacity.wait_exponential(multiplier=0.1, max=2.0),
            before_sleep=lambda _: self._drop_client(),
            reraise=True,
        )
        try:
            return retrying(fn, *args)
        except Exception as exc:
            if _is_transient(exc):
                raise SandboxUnavailable(
                    f"the Docker daemon did not answer for {self.options.retry_s:.0f}s ({exc}); "
                    "check that it runs (`docker info`) and that DOCKER_HOST points at it"
                ) from exc
            raise

    def _api(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client is None:
                self._client = docker.from_env(timeout=self.options.api_timeout_s, max_pool_size=32)
            return self._client

    def _drop_client(self) -> None:
        """Forget the client so the next attempt reconnects (and renegotiates the API version)
        after a daemon restart."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


class DockerBox(Box):
    """A running container whose agent's attach stream is :attr:`stream`."""

    def __init__(
        self, backend: DockerBackend, container_id: str, exec_id: str, stream: _AttachStream
    ) -> None:
        self.id = container_id
        self.exec_id = exec_id
        self.stream = stream
        self._backend = backend

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.stream.aclose()
            try:
                await self._backend._blocking(self._backend._remove, self.id)
            except SandboxUnavailable as exc:
                # No daemon, so nothing runs it either; a restarted daemon does not restart it
                # (no restart policy) and reap_orphans() removes it once this process is gone.
                log.warning("could not remove container %s: %s", self.id[:12], exc)

    async def exit_reason(self) -> str | None:
        reason = await anyio.to_thread.run_sync(self._backend._exit_reason, self.id, self.exec_id)
        if reason is None:
            return None
        agent_log = self.stream.log_tail()
        return f"{reason}; agent log: {agent_log}" if agent_log else reason


class _AttachStream(ByteStream):
    """The agent's stdout from Docker's multiplexed attach stream (8-byte frame headers:
    stream kind, 3 zero bytes, big-endian length). Stdin is not multiplexed, so sends are
    raw. The agent's stderr is its log: the last few KiB are kept for :meth:`log_tail`."""

    def __init__(self, sock: SocketStream, pending: bytes) -> None:
        self._sock = sock
        self._buffer = bytearray(pending)
        self._kind = 0
        self._left = 0  # bytes of the current frame not yet returned
        self._log = bytearray()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            while self._left == 0:
                while len(self._buffer) < 8:
                    self._buffer += await self._sock.receive()
                self._kind, self._left = struct.unpack(">BxxxI", self._buffer[:8])
                del self._buffer[:8]
            if not self._buffer:
                self._buffer += await self._sock.receive()
            chunk = bytes(self._buffer[: min(self._left, max_bytes, len(self._buffer))])
            del self._buffer[: len(chunk)]
            self._left -= len(chunk)
            if self._kind == 1:
                return chunk
            self._log = (self._log + chunk)[-_LOG_TAIL:]

    async def send(self, item: bytes) -> None:
        await self._sock.send(item)

    async def send_eof(self) -> None:
        await self._sock.send_eof()

    async def aclose(self) -> None:
        await self._sock.aclose()

    def log_tail(self) -> str:
        return self._log.decode("utf-8", errors="replace").strip()


def _take_socket(attached: Any) -> tuple[socket.socket, bytes]:
    """Detach the hijacked connection that ``exec_start(socket=True)`` returns from the SDK."""
    raw = getattr(attached, "_sock", None)
    if not isinstance(raw, socket.socket):
        raise SandboxUnavailable(
            f"cannot attach over this Docker connection ({type(attached).__name__}); "
            "use a unix:// or tcp:// DOCKER_HOST"
        )
    response = attached._response
    try:
        return _detach(raw, response.raw._fp.fp)
    finally:
        response.close()
        attached.close()


def _detach(raw: socket.socket, reader: io.BufferedReader) -> tuple[socket.socket, bytes]:
    """A dup of the connection's socket, ours alone, plus the bytes the HTTP reader buffered
    past the response headers: the agent's hello can arrive in the same read."""
    raw.setblocking(False)  # so peek() returns what is buffered instead of waiting for more
    return raw.dup(), reader.peek()


def _is_transient(exc: BaseException) -> bool:
    """Daemon trouble worth retrying (connection refused or reset, 5xx, timeouts), as opposed
    to a request the daemon refused (4xx), which would fail the same way again."""
    if isinstance(exc, docker.errors.APIError):
        return exc.status_code is None or exc.status_code >= 500
    # requests' connection errors and timeouts are OSErrors too
    return isinstance(exc, (docker.errors.DockerException, OSError))


def owner_id() -> str:
    """``hostname:pid:start time``; the start time tells a dead owner from a reused pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def _owner_is_dead(owner: str) -> bool:
    hostname, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if hostname != socket.gethostname() or not pid.isdigit():
        return False  # another machine's (or another pid namespace's) container: not ours to judge
    return _start_time(int(pid)) != started


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _agent_argv(spec: SandboxSpec) -> list[str]:
    """Each container gets a uid range of its own (see :func:`allocate_uid_base`), so
    RLIMIT_NPROC and the kernel's other per-uid counters are per sandbox; the OOM-kill
    count of the container's memory cgroup makes ``oom`` the kernel's verdict."""
    return agent.command(
        uid_base=allocate_uid_base(),
        uid_count=UIDS_PER_SANDBOX,
        nproc=spec.pids,
        threads=_threads(spec),
        scratch=["/dev/shm", "/dev/mqueue"],
        oom_counter="auto",
    )


def _threads(spec: SandboxSpec) -> int:
    return max(1, math.ceil(spec.cpus))


def _fsize(spec: SandboxSpec) -> int:
    """No file can outgrow the largest writable tmpfs anyway; fail the write early instead."""
    return max(spec.workdir_mb, spec.tmp_mb) * _MIB
