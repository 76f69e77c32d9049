"""The Docker backend's lifecycle: launching a container with its agent attached, killing it,
diagnosing its death, reaping orphans.

The steps that talk to the daemon are blocking and run through :class:`.daemon.Daemon` in
worker threads; what a container is made with comes from :mod:`.container`, its stream from
:mod:`.attach`, its labels from :mod:`.reaping`. A launch is shielded from cancellation and
every failure path removes what it made, so no container is left without an owner's handle.
"""

from __future__ import annotations

import logging
import socket
import time

import anyio
import anyio.lowlevel
import anyio.to_thread
import docker
import docker.errors
from anyio.abc import SocketStream

from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.backends.docker import reaping
from gem_sandbox.sandbox.backends.docker.attach import AttachStream, take_socket
from gem_sandbox.sandbox.backends.docker.container import (
    DockerOptions,
    agent_argv,
    container_kwargs,
)
from gem_sandbox.sandbox.backends.docker.daemon import Daemon, is_transient
from gem_sandbox.sandbox.backends.docker.images import default_image
from gem_sandbox.sandbox.backends.uids import UidRange, claim_uid_range
from gem_sandbox.sandbox.errors import SandboxUnavailable

log = logging.getLogger(__name__)


class DockerBackend(Backend):
    """Launches hardened containers; safe to share between pools and event loop tasks."""

    name = "docker"

    def __init__(self, options: DockerOptions | None = None) -> None:
        self.options = options or DockerOptions()
        self._daemon = Daemon(self.options.api_timeout_s, self.options.retry_s)
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
                container_id, raw, pending, uids = await self._daemon.call(self._start, spec)
            except docker.errors.APIError as exc:  # transient ones were retried already
                raise SandboxUnavailable(f"Docker refused to start a sandbox: {exc}") from exc
            try:
                sock = await SocketStream.from_socket(raw)
            except BaseException:
                raw.close()
                await self._daemon.call(self._remove, container_id)
                uids.release()
                raise
            box = DockerBox(self, container_id, AttachStream(sock, pending), uids)
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await box.kill()
            raise
        return box

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        return await self._daemon.call(self._reap, pool_label)

    async def aclose(self) -> None:
        await self._daemon.aclose()

    # --- blocking parts, run in worker threads -----------------------------------------

    def _start(self, spec: SandboxSpec) -> tuple[str, socket.socket, bytes, UidRange]:
        """Create a container whose process is the agent, attach to it, start it; return the
        attach socket (ours alone), any stream bytes already read with the HTTP response, and
        the container's uids. Attaching before the start means no byte of the agent's is
        missed, and there is no exec to pay for (a ``docker exec`` costs ~45 ms here)."""
        uids = claim_uid_range()
        try:
            client = self._daemon.client()
            container = client.containers.create(
                self._image_for(spec),
                **container_kwargs(self.options, spec, agent_argv(spec, uids.base, uids.count)),
            )
        except BaseException:
            uids.release()  # nothing was started
            raise
        raw = None
        try:
            attached = client.api.attach_socket(
                container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            raw, pending = take_socket(attached)
            container.start()
        except BaseException:
            if raw is not None:
                raw.close()
            try:
                self._remove(container.id)
            except docker.errors.DockerException:
                pass  # the daemon is in trouble; its labels let reap_orphans() find it later
            else:
                uids.release()  # else they stay claimed: the container may run them
            raise
        return container.id, raw, pending, uids

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
            self._daemon.client().api.remove_container(container_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: a removal is already in progress
                raise
            self._wait_removed(container_id)

    def _wait_removed(self, container_id: str) -> None:
        """Another removal is under way (the daemon's auto-remove, once the agent stopped the
        container): the sandbox is gone only when it is done, so wait for that."""
        api = self._daemon.client().api
        deadline = time.monotonic() + self.options.retry_s
        while time.monotonic() < deadline:
            try:
                api.inspect_container(container_id)
            except docker.errors.NotFound:
                return
            time.sleep(0.05)

    def _reap(self, pool_label: str | None) -> int:
        found = reaping.orphans(self._daemon.client().api, pool_label)
        for container_id in found:
            self._remove(container_id)
        return len(found)

    def _exit_reason(self, container_id: str) -> str | None:
        """One attempt, no retries: this diagnoses a failure and must answer quickly."""
        api = self._daemon.client().api
        try:
            state = api.inspect_container(container_id)["State"]
        except docker.errors.NotFound:
            return "removed"
        except Exception as exc:
            if is_transient(exc):
                return f"the Docker daemon does not answer ({exc})"
            raise
        if state["OOMKilled"]:
            return "OOMKilled"
        if not state["Running"]:
            return f"the agent exited with code {state['ExitCode']}"
        return None


class DockerBox(Box):
    """A running container whose agent's attach stream is :attr:`stream`. Its uid range goes
    back once the container is removed."""

    def __init__(
        self,
        backend: DockerBackend,
        container_id: str,
        stream: AttachStream,
        uids: UidRange,
    ) -> None:
        self.id = container_id
        self.stream = stream
        self._backend = backend
        self._uids = uids

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.stream.aclose()
            try:
                await self._backend._daemon.call(self._backend._remove, self.id)
            except SandboxUnavailable as exc:
                # No daemon, so nothing runs it either; a restarted daemon does not restart it
                # (no restart policy) and reap_orphans() removes it once this process is gone.
                # Its uids stay claimed all the same: the container may still be there.
                log.warning("could not remove container %s: %s", self.id[:12], exc)
                return
            self._uids.release()

    async def exit_reason(self) -> str | None:
        reason = await anyio.to_thread.run_sync(self._backend._exit_reason, self.id)
        if reason is None:
            return None
        agent_log = self.stream.log_tail()
        return f"{reason}; agent log: {agent_log}" if agent_log else reason
