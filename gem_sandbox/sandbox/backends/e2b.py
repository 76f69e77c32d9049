"""Sandboxes in e2b (the ``e2b`` SDK's ``AsyncSandbox``), or on any e2b-compatible service,
``gem-sandbox serve --e2b-compatible`` among them.

The agent runs inside the e2b sandbox like in any other: its source is written there, it is
started as a background command with its stdin open, and the byte stream between host and
agent is that command's stdin and stdout. The SDK carries command output as text, so both
directions go as lines of base64 (the agent's ``--base64``). Verdicts are the agent's, as on
every backend; what e2b's own process API says of a command is only used for the agent's.

Every e2b sandbox is created with a timeout (``sandbox_timeout``), so one whose owner crashed
is ended by e2b itself, and with metadata naming its pool and owner, so :meth:`reap_orphans`
can find and kill those whose owner is gone sooner. Creation is admitted at a bounded rate and
concurrency (e2b limits both per team) and retried on e2b's transient errors.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from gem_sandbox import agent
from gem_sandbox.agent.protocol import Base64Lines
from gem_sandbox.sandbox.backends.base import POOL_LABEL, Backend, Box, SandboxSpec
from gem_sandbox.sandbox.backends.owners import owner_id, owner_is_dead
from gem_sandbox.sandbox.errors import BackendNotAvailable, SandboxUnavailable

OWNER_KEY = "gem-sandbox.owner"
HOME = "/home/user"  # e2b's home dir: files and commands are relative to it
AGENT_DIR = ".gem-sandbox"  # in HOME: the agent's source as gem_agent/, its work dir as work/
SEND_CHUNK = 1024 * 1024  # bytes of the stream per send_stdin request (a service caps bodies)
UID_BASE = 200_000  # where a root agent's run uids start (e2b's images use low uids)


@dataclass(frozen=True)
class E2BOptions:
    """How sandboxes are made. ``api_key``, ``api_url`` and ``sandbox_url`` default to the
    SDK's own (``E2B_API_KEY``, ``E2B_API_URL``, ``E2B_SANDBOX_URL``)."""

    template: str = "base"
    api_key: str | None = None
    api_url: str | None = None
    sandbox_url: str | None = None
    sandbox_timeout: int = 3600  # seconds e2b keeps a sandbox; past it e2b kills it
    user: str = "root"  # the agent's user: root gives each run its own uid
    python: str = "python3"
    creates_per_second: float = 5.0  # admission: e2b rate-limits creation per team
    concurrent_creates: int = 8
    create_attempts: int = 4  # tries of one create on e2b's transient errors
    metadata: dict[str, str] = field(default_factory=dict)

    def connection(self) -> dict[str, Any]:
        """The SDK's connection keywords that are set."""
        given = {"api_key": self.api_key, "api_url": self.api_url, "sandbox_url": self.sandbox_url}
        return {key: value for key, value in given.items() if value is not None}


class E2BBox(Box):
    def __init__(self, sandbox: Any, stream: _CommandStream) -> None:
        self.sandbox = sandbox
        self.id = sandbox.sandbox_id
        self.stream = stream

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.stream.aclose()
            try:
                await self.sandbox.kill()
            except Exception:  # noqa: BLE001 - gone already, or e2b unreachable: its timeout ends it
                pass


class E2BBackend(Backend):
    name = "e2b"

    def __init__(self, options: E2BOptions | None = None) -> None:
        self.options = options or E2BOptions()
        self._admission = anyio.CapacityLimiter(self.options.concurrent_creates)
        self._next_create = 0.0

    @classmethod
    def check(cls) -> str | None:
        try:
            import e2b  # noqa: F401
        except ImportError:
            return "the e2b SDK is not installed: pip install 'gem-sandbox[e2b]'"
        if not os.environ.get("E2B_API_KEY"):
            return "no E2B_API_KEY is set (or pass E2BOptions(api_key=...))"
        return None

    async def launch(self, spec: SandboxSpec) -> Box:
        from e2b import AsyncSandbox

        options = self.options
        metadata = {**options.metadata, **spec.labels, OWNER_KEY: owner_id()}
        metadata.setdefault(POOL_LABEL, "default")
        async with self._admission:
            await self._pace()


            async def create() -> Any:
                return await AsyncSandbox.create(
                    spec.image or options.template,
                    timeout=options.sandbox_timeout,
                    metadata=metadata,
                    envs={"LANG": "C.UTF-8"},
                    **options.connection(),
                )

            sandbox = await _retrying(options.create_attempts, create)
        try:
            await sandbox.files.write_files([_entry(name, data) for name, data in _agent_sources()])
            stream = _CommandStream()
            stream.handle = await sandbox.commands.run(
                _start_command(options, spec),
                background=True,
                stdin=True,
                user=options.user,
                cwd=HOME,
                timeout=0,
                on_stdout=stream.arrived,
                retain_output=False,
            )
            stream.sandbox = sandbox
        except BaseException:
            with anyio.CancelScope(shield=True):
                await sandbox.kill()
            raise
        return E2BBox(sandbox, stream)

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        """Kill the e2b sandboxes (of ``pool_label``, or any) whose owner on this host died."""
        from e2b import AsyncSandbox, SandboxQuery

        query = SandboxQuery(metadata={POOL_LABEL: pool_label} if pool_label else None)
        paginator = AsyncSandbox.list(query=query, **self.options.connection())
        killed = 0
        while paginator.has_next:
            for info in await paginator.next_items():
                owner = (info.metadata or {}).get(OWNER_KEY)
                if owner and owner_is_dead(owner):
                    killed += await AsyncSandbox.kill(info.sandbox_id, **self.options.connection())
        return killed

    async def _pace(self) -> None:
        """Space creates ``1 / creates_per_second`` apart."""
        now = time.monotonic()
        start = max(now, self._next_create)
        self._next_create = start + 1 / self.options.creates_per_second
        await anyio.sleep(start - now)


class _CommandStream(anyio.abc.ByteStream):
    """The agent's stream over an e2b background command: ``send`` is ``send_stdin``,
    ``receive`` what its stdout brought, both as base64 lines."""

    def __init__(self) -> None:
        self.sandbox: Any = None
        self.handle: Any = None
        self._lines = Base64Lines()
        self._chunks: deque[bytes] = deque()
        self._arrived = asyncio.Event()
        self._send_lock = anyio.Lock()
        self._ended: asyncio.Future[Any] | None = None

    def arrived(self, text: str) -> None:
        """The SDK's ``on_stdout``: text as the command wrote it."""
        data = self._lines.decode(text.encode("ascii", "replace"))
        if data:
            self._chunks.append(data)
            self._arrived.set()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._ended is None:  # its end, watched without ever cancelling the SDK's task
            self._ended = asyncio.ensure_future(self.handle.wait())
        while not self._chunks:
            if self._ended.done():
                raise anyio.EndOfStream
            self._arrived.clear()
            arrival = asyncio.ensure_future(self._arrived.wait())
            try:
                await asyncio.wait([arrival, self._ended], return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrival.cancel()
        data = self._chunks.popleft()
        if len(data) > max_bytes:
            self._chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        return data

    async def send(self, item: bytes) -> None:
        async with self._send_lock:  # one request at a time keeps the lines in order
            for start in range(0, len(item), SEND_CHUNK):  # each a line: requests stay small
                line = Base64Lines.encode(item[start : start + SEND_CHUNK]).decode("ascii")
                try:
                    await self.sandbox.commands.send_stdin(self.handle.pid, line)
                except Exception as exc:  # noqa: BLE001 - the SDK's errors: the stream is broken
                    raise anyio.BrokenResourceError(f"e2b send_stdin failed: {exc}") from exc

    async def send_eof(self) -> None:
        try:
            await self.sandbox.commands.close_stdin(self.handle.pid)
        except Exception:  # noqa: BLE001 - ended already
            pass

    async def aclose(self) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.cancel()
        if self.handle is not None:
            try:
                await self.handle.kill()
            except Exception:  # noqa: BLE001 - ended already, or the sandbox is gone
                pass


def _agent_sources() -> list[tuple[str, bytes]]:
    names = sorted(n for n in os.listdir(agent.AGENT_DIR) if n.endswith(".py"))
    sources = []
    for name in names:
        with open(os.path.join(agent.AGENT_DIR, name), "rb") as f:
            sources.append((f"{HOME}/{AGENT_DIR}/gem_agent/{name}", f.read()))
    return sources


def _entry(path: str, data: bytes) -> Any:
    from e2b.sandbox.filesystem.filesystem import WriteEntry

    return WriteEntry(path=path, data=data)


def _start_command(options: E2BOptions, spec: SandboxSpec) -> str:
    """The shell command, run in :data:`HOME`, that starts the agent. Its paths are relative
    to the command's own dir (an e2b-compatible service may keep HOME elsewhere)."""
    argv = agent.command(
        options.python,
        base64=True,
        tmpdir="/tmp",
        scratch=["/dev/shm"],
        uid_base=UID_BASE,
        nproc=spec.pids,  # counted per uid: the runs' own uids, or the agent's own one
        threads=spec.threads,
        memory_mb=spec.memory_mb,
    )
    quoted = " ".join(shlex.quote(arg) for arg in argv)
    return f'mkdir -p {AGENT_DIR}/work && cd {AGENT_DIR} && exec {quoted} --workdir "$PWD/work"'



def _transient(exc: BaseException) -> bool:
    """e2b's errors worth another try: rate limits, a busy service, a lost connection."""
    from e2b.exceptions import RateLimitException, TimeoutException

    busy = type(exc).__name__ in ("ServiceBusyException", "SandboxUnreachableException")
    return isinstance(exc, (RateLimitException, TimeoutException, ConnectionError)) or busy


async def _retrying(attempts: int, create: Any) -> Any:
    from e2b.exceptions import AuthenticationException

    retrying = AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.5, max=10),
        retry=retry_if_exception(_transient),
        sleep=anyio.sleep,
        reraise=True,
    )
    try:
        return await retrying(create)
    except AuthenticationException as exc:
        raise BackendNotAvailable(f"e2b refused the API key: {exc}") from exc
    except Exception as exc:
        raise SandboxUnavailable(f"creating an e2b sandbox failed: {type(exc).__name__}: {exc}") from exc
