"""The client side of the pool service (docs/service.md, "Remote runtime"): :class:`RemotePool`
and the :class:`RemoteSandbox` leases it hands out, which a :class:`~gem_sandbox.runtime.Runtime`
given a service URL uses in place of a local pool, so tools, envs and the GEM drop-in run on the
service unchanged.

Each logical request is retried (tenacity: exponential backoff with jitter, a few attempts, a
bounded time) when the connection fails or the service answers that it did nothing and when to
come back (429, 503, honouring ``Retry-After``). A request that changes something carries one
``Idempotency-Key`` on every attempt, so a retry gets the first attempt's answer instead of
running the code twice, and an ``X-Request-Timeout`` saying how long the client waits, so the
service answers 503 instead of keeping it waiting for a sandbox past that. What still fails
ends as a local pool's failure would: a run as an ``infra_error`` result, anything else as a
typed error (:func:`_error` maps the service's error answers to the sandbox layer's errors).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from gem_sandbox.agent.protocol import text_bytes
from gem_sandbox.sandbox.errors import (
    BackendNotAvailable,
    FileTransferError,
    ForkError,
    PoolClosed,
    RemoteUnsupported,
    SandboxCrashed,
    SandboxError,
    SandboxUnavailable,
    ServiceAuthError,
    ServiceRequestError,
    ServiceUnreachable,
    SnapshotNotFound,
    SnapshotUnsupported,
    UnsafePath,
    UnsupportedLanguage,
)
from gem_sandbox.sandbox.held import HeldPool, HeldSandbox
from gem_sandbox.sandbox.limits import CONTROL_TIMEOUT, SNAPSHOT_TIMEOUT, RunLimits
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot

log = logging.getLogger(__name__)

KEY_HEADER = "Idempotency-Key"
DEADLINE_HEADER = "X-Request-Timeout"  # how long this client waits: the service's wait for a seat ends sooner
MARGIN = 30.0  # seconds past a request's own deadline that the client waits for its answer
CONNECT_TIMEOUT = 10.0  # seconds to open a connection to the service
ATTEMPTS = 5  # tries of one logical request
RETRY_WINDOW = 60.0  # seconds of retrying a request gets beyond its own wait
MAX_RETRY_AFTER = 10.0  # the longest ``Retry-After`` honoured before the next try
#: Answers saying the service did nothing and when to come back: the body did not arrive (408),
#: a quota (429), no sandbox in time or shutting down (503), or a gateway in front of it.
RETRIED_STATUSES = frozenset({408, 429, 502, 503, 504})
_RETRIED_FAILURES = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)
_TOKEN_IN_PATH = re.compile(r"/t/[^/]+$")
_jitter = wait_random_exponential(multiplier=0.2, max=5.0)


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: Any  # the JSON answer; None when it was empty or not JSON
    text: str
    retry_after: float | None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def error(self) -> tuple[str, str]:
        """The service's error type and message; for an answer not from the service (a
        proxy's), the status and the start of its text."""
        try:
            error = self.body["error"]
            return str(error["type"]), str(error["message"])
        except (TypeError, KeyError):
            return f"http_{self.status}", self.text[:300] or "no message"


class _ComeBack(Exception):
    """An answer in :data:`RETRIED_STATUSES`, raised so tenacity retries it."""

    def __init__(self, answer: _Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


class RemotePool(HeldPool["RemoteSandbox"]):
    """``async with RemotePool(url, token, config) as pool:`` sandboxes of the pool service at
    ``url``, with what :class:`~gem_sandbox.runtime.Runtime` uses of a
    :class:`~gem_sandbox.sandbox.pool.SandboxPool`.

    ``token`` goes in an ``Authorization: Bearer`` header; a URL ending in ``/t/<secret>``
    carries its own. The service's settings size its pool and cap each run; of ``config``,
    ``run_timeout`` (a run's timeout when its caller gives none) and ``acquire_timeout`` (how
    long :meth:`acquire` keeps asking) apply here. Opened once.
    """

    backend_name = "remote"  # each RemoteSandbox names the service's own backend

    def __init__(self, url: str, token: str | None = None, config: PoolConfig | None = None) -> None:
        super().__init__()
        self.config = config or PoolConfig()
        self._base = url.rstrip("/")
        self.url = _TOKEN_IN_PATH.sub("", self._base)  # without a token: public routes are not under /t/
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<RemotePool {self.url} {len(self._leased)} leased>"

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> RemotePool:
        if self._session is not None or self._closed:
            raise RuntimeError("a pool is opened once")
        # No cap on connections: each run in flight holds one, and the caller bounds the runs.
        self._session = aiohttp.ClientSession(headers=self._headers, connector=aiohttp.TCPConnector(limit=0))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End the leases this client holds (within :data:`~gem_sandbox.sandbox.held.CLOSE_TIMEOUT`;
        the service's lease TTL ends any it could not), then close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._session is None:
            return
        await self._end_all("the pool was closed")
        with anyio.CancelScope(shield=True):
            await self._session.close()

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the service says it can serve (``GET /healthz`` answers ok)."""
        self._check_open()
        with anyio.fail_after(timeout):
            while True:
                try:
                    if (await self._request("GET", "/healthz", wait=CONTROL_TIMEOUT, public=True)).ok:
                        return
                except ServiceUnreachable:
                    pass
                await anyio.sleep(0.1)

    # -- leases and runs ---------------------------------------------------------------
    async def acquire(self, timeout: float | None = None) -> RemoteSandbox:
        """A sandbox of the service's, leased until :meth:`release`. The service's 429s and
        503s are retried for ``timeout`` seconds (default ``acquire_timeout``); then, or when
        the service cannot be reached, this raises :class:`SandboxUnavailable`
        (:class:`ServiceAuthError` for a token it refuses)."""
        self._check_open()
        limit = self.config.acquire_timeout if timeout is None else timeout
        answer = await self._request("POST", "/v1/sandboxes", {}, wait=limit + MARGIN, budget=limit)
        if answer.status != 201:
            raise _error(answer, "leasing a sandbox")
        return self._hold(RemoteSandbox(self, answer.body))

    async def restore(self, snapshot: Snapshot | str, timeout: float | None = None) -> RemoteSandbox:
        """A new lease starting from one of this token's snapshots on the service."""
        self._check_open()
        limit = self.config.acquire_timeout if timeout is None else timeout
        key = snapshot if isinstance(snapshot, str) else snapshot.id
        answer = await self._request("POST", "/v1/sandboxes", {"snapshot": key}, wait=limit + MARGIN, budget=limit)
        if answer.status != 201:
            raise _error(answer, f"restoring snapshot {key}")
        return self._hold(RemoteSandbox(self, answer.body))

    async def drop_snapshot(self, snapshot: Snapshot | str) -> None:
        """Drop one of this token's snapshots on the service; one already gone is no error."""
        self._check_open()
        key = snapshot if isinstance(snapshot, str) else snapshot.id
        answer = await self._request("DELETE", f"/v1/snapshots/{key}", wait=CONTROL_TIMEOUT)
        if not answer.ok and answer.status != 404:
            raise _error(answer, f"dropping snapshot {key}")

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes | str] | None = None,
        limits: RunLimits | None = None,
    ) -> ExecResult:
        """One stateless run on any warm sandbox of the service (``POST /v1/run``), ``files``
        written first. The infrastructure's failures come back as ``infra_error``."""
        self._check_open()
        timeout = self.config.run_timeout if timeout is None else timeout
        body = _run_body(code, language, stdin, timeout, env, limits)
        body["files"] = _encode(files or {})
        return await self._exec("/v1/run", body, timeout, None)

    # -- internals ---------------------------------------------------------------------
    async def _end(self, sandbox: RemoteSandbox) -> None:
        """Tell the service a lease is over; if it cannot be told, the lease's TTL ends it."""
        try:
            answer = await self._request("DELETE", f"/v1/sandboxes/{sandbox.id}", wait=CONTROL_TIMEOUT)
        except ServiceUnreachable as exc:
            log.warning("could not end lease %s, its TTL will: %s", sandbox.id, exc)
            return
        if not answer.ok and answer.status != 404:  # 404: expired or deleted already
            log.warning("could not end lease %s, its TTL will: %s", sandbox.id, _error(answer, "ending a lease"))

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosed(f"{self!r} was closed")
        if self._session is None:
            raise RuntimeError("use the pool inside 'async with RemotePool(...) as pool:'")

    async def _exec(self, path: str, body: dict[str, Any], timeout: float, sandbox: RemoteSandbox | None) -> ExecResult:
        """A request answered by an :class:`ExecResult`. As a local pool's runs do, failures of
        the infrastructure (no answer, 5xx, quotas past retrying, a lease gone) come back as
        ``infra_error`` and only the caller's mistakes (and a refused token) raise."""
        started = time.perf_counter()
        try:
            answer = await self._request("POST", path, body, wait=timeout + MARGIN)
        except ServiceUnreachable as exc:
            return ExecResult.infra_error(str(exc), _ms_since(started))
        if answer.status == 200:
            return ExecResult.from_json(answer.body)
        error = _error(answer, path, sandbox)
        if isinstance(error, (SandboxCrashed, SandboxUnavailable)) and not isinstance(error, BackendNotAvailable):
            return ExecResult.infra_error(str(error), _ms_since(started))
        raise error

    async def _request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        wait: float,
        params: Sequence[tuple[str, str]] = (),
        budget: float | None = None,
        public: bool = False,
    ) -> _Answer:
        """One logical request, retried as the module says: ``wait`` bounds each attempt and
        ``budget`` (default ``wait`` plus :data:`RETRY_WINDOW`) the retrying. A 429 or 503
        still there after the retries is returned; no answer at all raises
        :class:`ServiceUnreachable`. ``public`` routes are reached without the URL's token."""
        if self._session is None:
            raise RuntimeError("use the pool inside 'async with RemotePool(...) as pool:'")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if method != "GET":
            headers[KEY_HEADER] = str(uuid.uuid4())  # one per logical request, the same on every retry
        patience = wait if budget is None else budget
        if not public and patience > 0:
            headers[DEADLINE_HEADER] = f"{patience:g}"
        url = (self.url if public else self._base) + path
        retrying = AsyncRetrying(
            stop=stop_after_attempt(ATTEMPTS) | stop_after_delay(wait + RETRY_WINDOW if budget is None else budget),
            wait=_backoff,
            retry=retry_if_exception_type((*_RETRIED_FAILURES, _ComeBack)),
            sleep=anyio.sleep,
            reraise=True,
        )
        timeout = aiohttp.ClientTimeout(total=wait, sock_connect=CONNECT_TIMEOUT)
        try:
            return await retrying(self._attempt, self._session, method, url, data, headers, params, timeout)
        except _ComeBack as exc:
            return exc.answer
        except aiohttp.ClientError as exc:  # connect timeouts among them
            failure = f"{type(exc).__name__}: {exc}"
            raise ServiceUnreachable(f"{method} {path}: {self.url} could not be reached: {failure}") from None
        except TimeoutError:
            raise ServiceUnreachable(f"{method} {path}: no answer from {self.url} within {wait:g} s") from None

    @staticmethod
    async def _attempt(
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        data: bytes | None,
        headers: dict[str, str],
        params: Sequence[tuple[str, str]],
        timeout: aiohttp.ClientTimeout,
    ) -> _Answer:
        async with session.request(method, url, data=data, headers=headers, params=params, timeout=timeout) as response:
            raw = await response.read()
            retry_after = response.headers.get("Retry-After")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        answer = _Answer(response.status, parsed, raw.decode("utf-8", "replace"), _seconds(retry_after))
        if answer.status in RETRIED_STATUSES:
            raise _ComeBack(answer)
        return answer


class RemoteSandbox(HeldSandbox):
    """A sandbox leased on the service, with :class:`~gem_sandbox.sandbox.client.Sandbox`'s
    API for tools and envs. Its files, shell sessions and kernels live on the service until the
    lease ends: :meth:`close` (the pool's ``release``), or ``ttl`` seconds after its last
    request. A lease the service no longer has (404) makes it dead, as a crashed local
    sandbox is: runs then give ``infra_error`` and other calls raise :class:`SandboxCrashed`."""

    def __init__(self, pool: RemotePool, lease: Mapping[str, Any]) -> None:
        self.pool = pool
        self.id: str = lease["id"]
        self.backend: str = lease["backend"]
        self.ttl: float = lease["ttl"]
        self.hello: dict[str, Any] = {"languages": list(lease["languages"]), "isolation": lease["isolation"]}
        self.default_timeout = pool.config.run_timeout

    def __repr__(self) -> str:
        state = f"dead: {self.death}" if self.death else "alive"
        return f"<RemoteSandbox {self.id} {self.backend} {state}>"

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        limits: RunLimits | None = None,
    ) -> ExecResult:
        """Run ``code`` in a fresh process in this sandbox. A ``cwd`` raises
        :class:`RemoteUnsupported`: the service runs code in the work dir."""
        if cwd is not None:
            raise RemoteUnsupported(
                f"the pool service takes no cwd for a run (asked: {cwd!r}); change directory in the code, "
                "or use shell(), whose session keeps its cwd"
            )
        timeout = self.default_timeout if timeout is None else timeout
        return await self._exec("run", _run_body(code, language, stdin, timeout, env, limits), timeout)

    async def shell(self, command: str, *, session: str = "default", timeout: float | None = None) -> ExecResult:
        """Run ``command`` in a persistent bash session (cwd and exports persist)."""
        timeout = self.default_timeout if timeout is None else timeout
        return await self._exec("shell", {"command": command, "session": session, "timeout": timeout}, timeout)

    async def kernel_exec(
        self, code: str, *, kernel: str = "default", timeout: float | None = None, display: bool = False
    ) -> ExecResult:
        """Run ``code`` in a persistent Python namespace."""
        timeout = self.default_timeout if timeout is None else timeout
        body = {"code": code, "kernel": kernel, "timeout": timeout, "display": display}
        return await self._exec("kernel", body, timeout)

    async def kernel_restart(self, kernel: str = "default") -> None:
        """Drop the kernel's namespace; the next :meth:`kernel_exec` starts a fresh one."""
        await self._control("POST", "/kernel/restart", {"kernel": kernel})

    async def write_files(
        self,
        files: Mapping[str, bytes | str],
        *,
        dest: str = ".",
        executable: Collection[str] = (),
        directories: Collection[str] = (),
    ) -> None:
        """Write files under ``dest`` in the work dir (see :meth:`Sandbox.write_files`)."""
        body = {"files": _encode(files), "dest": dest, "executable": list(executable), "directories": list(directories)}
        await self._control("PUT", "/files", body)

    async def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of files in the work dir, by path; a missing one raises
        :class:`FileTransferError`."""
        if not paths:
            return {}
        answer = await self._control("GET", "/files", params=[("path", path) for path in paths])
        files = answer.body["files"]
        return {path: base64.b64decode(files[path]) for path in paths}

    async def snapshot(self, ttl: float | None = None) -> Snapshot:
        """Its state now, kept by the service for ``ttl`` seconds (see ``RemotePool.restore``)."""
        answer = await self._control("POST", "/snapshot", {"ttl": ttl} if ttl else {}, wait=SNAPSHOT_TIMEOUT + MARGIN)
        return Snapshot.from_json(answer.body)

    async def fork(self, n: int) -> list[RemoteSandbox]:
        """``n`` new leases on the service, each starting from this one's state now."""
        answer = await self._control("POST", "/fork", {"n": n}, wait=SNAPSHOT_TIMEOUT * 2 + MARGIN)
        return [self.pool._hold(RemoteSandbox(self.pool, lease)) for lease in answer.body["sandboxes"]]

    async def reset(self, timeout: float = 10.0) -> None:
        """Back to a clean sandbox (no file, process, session or kernel left); the lease stays."""
        await self._control("POST", "/reset", wait=timeout + MARGIN)

    async def ping(self, timeout: float = 5.0) -> float:
        """Round trip to the service in milliseconds; raises :class:`SandboxCrashed` when the
        lease is gone."""
        started = time.perf_counter()
        await self._control("GET", "", wait=timeout)
        return _ms_since(started)

    async def close(self) -> None:
        """End the lease (the pool's ``release``); idempotent."""
        await self.pool.release(self)

    async def _exec(self, route: str, body: dict[str, Any], timeout: float) -> ExecResult:
        if not self.alive:
            return ExecResult.infra_error(f"sandbox {self.id} is not usable: {self.death}")
        return await self.pool._exec(f"/v1/sandboxes/{self.id}/{route}", body, timeout, self)

    async def _control(
        self,
        method: str,
        route: str,
        body: dict[str, Any] | None = None,
        *,
        params: Sequence[tuple[str, str]] = (),
        wait: float = CONTROL_TIMEOUT,
    ) -> _Answer:
        """A request that runs no code; any failure raises."""
        if not self.alive:
            raise SandboxCrashed(f"sandbox {self.id} is not usable: {self.death}")
        answer = await self.pool._request(method, f"/v1/sandboxes/{self.id}{route}", body, params=params, wait=wait)
        if not answer.ok:
            raise _error(answer, f"sandbox {self.id}", self)
        return answer


def _error(answer: _Answer, what: str, sandbox: RemoteSandbox | None = None) -> SandboxError:
    """The sandbox layer's error for an error answer of the service (docs/service.md,
    "Errors"). On a lease's route, a 404 (the lease expired or was deleted) or a 503 still
    there after the retries (its sandbox failed) ends ``sandbox``: it is dead to this client."""
    kind, message = answer.error()
    if answer.status == 401:
        return ServiceAuthError(
            f"the pool service refused the token ({message}); check GEM_SANDBOX_SERVICE_TOKEN, the "
            "token= given to the runtime, or the /t/<token> in its URL"
        )
    if sandbox is not None and (answer.status == 503 or (answer.status, kind) == (404, "not_found")):
        reason = "lease expired or was deleted" if answer.status == 404 else "sandbox failed on the service"
        sandbox.end(f"{reason}: {message}")
        return SandboxCrashed(f"sandbox {sandbox.id}: {reason} ({message}); lease a new one")
    if kind == "unsupported_language":
        return UnsupportedLanguage(message)
    if kind == "snapshot_unsupported":
        return SnapshotUnsupported(message)
    if kind == "fork_failed":
        return ForkError(message)
    if sandbox is None and answer.status == 404 and "snapshot" in what:
        return SnapshotNotFound(message)
    if answer.status in (400, 409) and "unsafe path" in message:
        return UnsafePath(message)
    if kind in ("file_not_found", "file_conflict"):
        return FileTransferError(message)
    if answer.status in RETRIED_STATUSES or answer.status >= 500:
        return SandboxUnavailable(f"{what}: the pool service answered {answer.status} {kind}: {message}")
    return ServiceRequestError(answer.status, kind, f"{what}: {message}")


def _run_body(
    code: str,
    language: str,
    stdin: str | bytes | None,
    timeout: float,
    env: Mapping[str, str] | None,
    limits: RunLimits | None,
) -> dict[str, Any]:
    """The body of a run: ``limits`` by RunLimits' own field names, as the service takes them
    (not :meth:`RunLimits.to_wire`'s, which are the agent protocol's)."""
    if isinstance(stdin, bytes):
        try:
            stdin = stdin.decode()
        except UnicodeDecodeError:
            raise RemoteUnsupported("the pool service takes stdin as UTF-8 text; these bytes are not") from None
    return {
        "code": code,
        "language": language,
        "stdin": stdin,
        "timeout": timeout,
        "env": dict(env or {}),
        "limits": None if limits is None else dataclasses.asdict(limits),
    }


def _encode(files: Mapping[str, bytes | str]) -> dict[str, str]:
    """File contents as the service takes them: base64 (text as UTF-8)."""
    return {
        path: base64.b64encode(text_bytes(data) if isinstance(data, str) else data).decode("ascii")
        for path, data in files.items()
    }


def _backoff(state: RetryCallState) -> float:
    """Exponential backoff with jitter, or the service's ``Retry-After`` (up to
    :data:`MAX_RETRY_AFTER`) when it said when to come back."""
    delay = _jitter(state)
    failure = state.outcome.exception() if state.outcome is not None else None
    if isinstance(failure, _ComeBack) and failure.answer.retry_after is not None:
        return max(delay, min(failure.answer.retry_after, MAX_RETRY_AFTER))
    return delay


def _seconds(retry_after: str | None) -> float | None:
    """A ``Retry-After`` in seconds (the service sends seconds; an HTTP date counts as none)."""
    try:
        return max(0.0, float(retry_after)) if retry_after is not None else None
    except ValueError:
        return None


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
