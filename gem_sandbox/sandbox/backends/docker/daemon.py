"""The Docker daemon as the backend sees it: one shared SDK client, calls in worker threads,
transient failures retried.

The SDK is blocking, so every call runs in a worker thread off the event loop. A daemon that
restarts or stalls must cost a retry (with a fresh client, which renegotiates the API
version), not a failed launch; one that stays away is :class:`SandboxUnavailable`, saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
import docker
import docker.errors
import tenacity

from gem_sandbox.sandbox.errors import SandboxUnavailable

_T = TypeVar("_T")


class Daemon:
    """The client of one backend; safe to share between threads and event loop tasks."""

    def __init__(self, api_timeout_s: float, retry_s: float) -> None:
        self.api_timeout_s = api_timeout_s
        self.retry_s = retry_s
        self._client: docker.DockerClient | None = None
        self._lock = threading.Lock()

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread, with :meth:`retrying`."""
        return await anyio.to_thread.run_sync(self.retrying, fn, *args)

    def retrying(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Call ``fn`` retrying transient daemon errors with a fresh client each time; when
        the daemon stays away, raise :class:`SandboxUnavailable` saying so."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_delay(self.retry_s),
            wait=tenacity.wait_exponential(multiplier=0.1, max=2.0),
            before_sleep=lambda _: self._drop(),
            reraise=True,
        )
        try:
            return retrying(fn, *args)
        except Exception as exc:
            if is_transient(exc):
                raise SandboxUnavailable(
                    f"the Docker daemon did not answer for {self.retry_s:.0f}s ({exc}); "
                    "check that it runs (`docker info`) and that DOCKER_HOST points at it"
                ) from exc
            raise

    def client(self) -> docker.DockerClient:
        """The shared client, connected on first use. Blocking: call it in a worker thread."""
        with self._lock:
            if self._client is None:
                self._client = docker.from_env(timeout=self.api_timeout_s, max_pool_size=32)
            return self._client

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._drop)

    def _drop(self) -> None:
        """Forget the client so the next attempt reconnects (and renegotiates the API version)
        after a daemon restart."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def is_transient(exc: BaseException) -> bool:
    """Daemon trouble worth retrying (connection refused or reset, 5xx, timeouts), as opposed
    to a request the daemon refused (4xx), which would fail the same way again."""
    if isinstance(exc, docker.errors.APIError):
        return exc.status_code is None or exc.status_code >= 500
    # requests' connection errors and timeouts are OSErrors too
    return isinstance(exc, (docker.errors.DockerException, OSError))
