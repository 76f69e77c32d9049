"""The client side of the pools on a Ray cluster: :class:`RayPool` and the :class:`RaySandbox`
leases it hands out, which a :class:`~gem_sandbox.runtime.Runtime` given ``ray=`` (or
``GEM_SANDBOX_RAY``) uses in place of a local pool, so tools, envs and the GEM drop-in run on
the cluster unchanged (docs/scale-out.md).

Where a sandbox comes from: the caller's own node while it has room (no network hop), else the
node with the most; each node's room comes back with every answer that leases or runs, less
what this client has asked of it since. A lease stays on its node; a stateless run goes wherever
there is room. A heartbeat renews this client's leases, so the pool actors end the leases of a
client that died.

Faults: a pool actor that dies, a node whose raylet dies, or an answer that does not come by its
deadline (the call's own timeout plus :data:`MARGIN`) turns that call into what a local pool's
failure would give: a run's ``infra_error`` result, :class:`SandboxCrashed` from a lease's other
calls, and the node is left out until a look at the cluster finds its pool actor answering
again (a new one, once ``gem-sandbox ray up`` placed it). Errors the caller made, and the
sandbox layer's own errors, come back as raised on the node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import ray
from ray.exceptions import RayError, RayTaskError, TaskCancelledError

from gem_sandbox.sandbox.limits import CONTROL_TIMEOUT
from gem_sandbox.sandbox.cluster import placement
from gem_sandbox.sandbox.errors import (
    BackendNotAvailable,
    ConfigError,
    PoolClosed,
    SandboxCrashed,
    SandboxError,
    SandboxUnavailable,
    SnapshotNotFound,
)
from gem_sandbox.sandbox.held import HeldPool, HeldSandbox
from gem_sandbox.sandbox.limits import SNAPSHOT_TIMEOUT, RunLimits
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot

log = logging.getLogger(__name__)

MARGIN = 10.0  # seconds past a call's own timeout that its answer may take before it is a fault
LOOK_INTERVAL = 10.0  # seconds between looks at the cluster for pool actors that came or went
RELOOK_PAUSE = 1.0  # the least time between two looks asked for because no node was usable


class NodeFault(SandboxError):
    """A node's pool actor died, its node died, or it did not answer in time."""


@dataclass(eq=False)
class Node:
    """One pool actor as this client knows it."""

    actor: Any  # ray.actor.ActorHandle
    node_id: str
    address: str
    backend: str
    lease_ttl: float
    local: bool
    free: int  # room it reported last
    pending: int = 0  # leases and runs asked of it since, not yet answered
    fault: str | None = None  # why it is left out, while it is

    @property
    def room(self) -> int:
        return self.free - self.pending

    def __repr__(self) -> str:
        state = f"left out: {self.fault}" if self.fault else f"room {self.room}"
        return f"<Node {self.address} {self.node_id[:8]} {self.backend} {state}>"


class RayPool(HeldPool["RaySandbox"]):
    """``async with RayPool("default", config) as pool:`` the sandboxes of the pool actors
    named ``pools`` on the Ray cluster this process is connected to (``ray.init``, which this
    calls with ``address`` when no one has: ``"auto"`` finds a running cluster, never starts
    one). Has what :class:`~gem_sandbox.runtime.Runtime` uses of a
    :class:`~gem_sandbox.sandbox.pool.SandboxPool`; of ``config``, ``run_timeout`` and
    ``acquire_timeout`` apply here, and the pool actors' own settings size their pools.
    Needs an asyncio event loop (Ray's). Opened once."""

    backend_name = "ray"  # each RaySandbox names its node's own backend

    def __init__(self, pools: str = "default", config: PoolConfig | None = None, *, address: str | None = None) -> None:
        super().__init__()
        self.config = config or PoolConfig()
        self.pools = pools
        self._address = address
        self._nodes: dict[str, Node] = {}  # node id -> its pool actor
        self._snapshots: dict[str, tuple[Node, Snapshot]] = {}  # by id: the node keeping it, and it
        self._local_node: str | None = None
        self._looked = 0.0
        self._look_lock: anyio.Lock | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<RayPool {self.pools} nodes={len(self.nodes())} leased={len(self._leased)}>"

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> RayPool:
        if self._tg is not None or self._closed:
            raise RuntimeError("a pool is opened once")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigError("the Ray runtime needs an asyncio event loop (Ray's own); this one is not") from None
        self._look_lock = anyio.Lock()
        self._local_node = await anyio.to_thread.run_sync(self._connect)
        await self._look()
        if not self.nodes():
            raise BackendNotAvailable(
                f"no pool actor named {self.pools!r} answers on the Ray cluster; start them with "
                f"`gem-sandbox ray up --name {self.pools}`"
            )
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._heartbeat)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        if self._tg is not None:  # exited by the task that entered it
            await self._tg.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """End this client's leases (within :data:`~gem_sandbox.sandbox.held.CLOSE_TIMEOUT`; the
        nodes' lease TTL ends any it could not) and stop the heartbeat. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        await self._end_all("the pool was closed")

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until every node's pool has its ``min_idle`` sandboxes warm; a node that cannot
        get there in ``timeout`` is left out, and none getting there raises
        :class:`SandboxUnavailable`."""
        self._check_open()

        async def ready(node: Node) -> None:
            try:
                await self._ask(node, node.actor.ready.remote(timeout), timeout + MARGIN)
            except (NodeFault, SandboxError) as exc:
                self._leave_out(node, f"not ready: {exc}")

        async with anyio.create_task_group() as tg:
            for node in self.nodes():
                tg.start_soon(ready, node)
        if not self.nodes():
            raise SandboxUnavailable(f"no pool of {self.pools!r} got ready: {self._faults()}")

    def nodes(self) -> list[Node]:
        """The nodes whose pools this client uses now (not those left out after a fault)."""
        return [node for node in self._nodes.values() if node.fault is None]

    # -- leases and runs ---------------------------------------------------------------
    async def acquire(self, timeout: float | None = None) -> RaySandbox:
        """A sandbox on the node with room (the caller's own first), leased until
        :meth:`release`. A node that faults is left out and the next one asked, until
        ``timeout`` (default ``acquire_timeout``); then :class:`SandboxUnavailable`."""
        self._check_open()
        limit = self.config.acquire_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            node = await self._choose()
            left = max(0.0, deadline - time.monotonic())
            node.pending += 1
            try:
                lease, node.free = await self._ask(node, node.actor.acquire.remote(left), left + MARGIN)
            except NodeFault as exc:
                self._leave_out(node, str(exc))
                if time.monotonic() >= deadline:
                    raise SandboxUnavailable(f"no node leased a sandbox within {limit:.0f}s: {self._faults()}") from None
                continue
            finally:
                node.pending -= 1
            return self._hold(RaySandbox(self, node, lease))

    async def restore(self, snapshot: Snapshot | str, timeout: float | None = None) -> RaySandbox:
        """A new lease holding a snapshot taken through this pool, on the node that keeps it."""
        self._check_open()
        key = snapshot if isinstance(snapshot, str) else snapshot.id
        if key not in self._snapshots:
            raise SnapshotNotFound(f"no snapshot {key} was taken through this pool (or it was dropped)")
        node, kept = self._snapshots[key]
        limit = self.config.acquire_timeout if timeout is None else timeout
        try:
            lease, node.free = await self._ask(node, node.actor.restore.remote(kept, limit), limit + MARGIN)
        except NodeFault as exc:
            raise SandboxUnavailable(f"the node keeping snapshot {key} failed: {exc}") from None
        return self._hold(RaySandbox(self, node, lease))

    async def drop_snapshot(self, snapshot: Snapshot | str) -> None:
        """Forget a snapshot on its node; one already gone is not an error."""
        node, kept = self._snapshots.pop(snapshot if isinstance(snapshot, str) else snapshot.id, (None, None))
        if node is not None:
            await self._ask(node, node.actor.drop_snapshot.remote(kept), CONTROL_TIMEOUT + MARGIN)

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
        """One stateless run on the node with room (the caller's own first), ``files`` written
        first. A fault of its node comes back as ``infra_error``."""
        self._check_open()
        timeout = self.config.run_timeout if timeout is None else timeout
        options = {"stdin": stdin, "timeout": timeout, "env": env, "files": files, "limits": limits}
        node = await self._choose()
        node.pending += 1
        try:
            result, node.free = await self._ask(node, node.actor.run.remote(code, language, options), timeout + MARGIN)
        except NodeFault as exc:
            self._leave_out(node, str(exc))
            return ExecResult.infra_error(str(exc))
        finally:
            node.pending -= 1
        return result

    # -- calls to the nodes ------------------------------------------------------------
    async def _ask(self, node: Node, ref: Any, wait: float) -> Any:
        """The answer to ``ref``, a call to ``node``'s actor; what the call raised on the node,
        as raised there; :class:`NodeFault` when the actor or its node failed, or no answer
        came within ``wait`` seconds."""
        try:
            with anyio.fail_after(wait):
                return await ref
        except RayTaskError as exc:  # first: it is also an instance of what it wraps (a TimeoutError, ...)
            if isinstance(exc.cause, Exception) and not isinstance(exc.cause, RayError):
                raise exc.cause from None
            raise NodeFault(f"the pool on node {node.address} failed: {exc.cause or exc}") from None
        except TaskCancelledError:
            raise NodeFault(f"the call to the pool on node {node.address} was cancelled") from None
        except RayError as exc:  # the actor died or is unreachable, its node died, ...
            raise NodeFault(f"the pool on node {node.address} is gone: {_first_line(exc)}") from None
        except TimeoutError:
            ray.cancel(ref)
            raise NodeFault(f"the pool on node {node.address} did not answer within {wait:.0f}s") from None
        except anyio.get_cancelled_exc_class():
            ray.cancel(ref)
            raise

    async def _end(self, sandbox: RaySandbox) -> None:
        node = sandbox.node
        try:
            node.free = await self._ask(node, node.actor.release.remote(sandbox.id), CONTROL_TIMEOUT)
        except (NodeFault, SandboxError) as exc:
            log.warning("could not end lease %s on node %s, its TTL will: %s", sandbox.id, node.address, exc)

    # -- which node --------------------------------------------------------------------
    async def _choose(self) -> Node:
        """The caller's own node while it has room, else the node with the most room; with no
        node usable, one more look at the cluster, then :class:`SandboxUnavailable`."""
        nodes = self.nodes()
        if not nodes:
            await self._look(urgent=True)
            nodes = self.nodes()
            if not nodes:
                raise SandboxUnavailable(
                    f"no pool of {self.pools!r} on the Ray cluster is usable: {self._faults()}; "
                    f"`gem-sandbox ray status --name {self.pools}` shows them"
                )
        return max(nodes, key=lambda node: (node.local and node.room > 0, node.room))

    def _leave_out(self, node: Node, reason: str) -> None:
        """Stop using ``node`` (until a look finds its actor answering) and end its leases."""
        if node.fault is None:
            log.warning("leaving out the pool on node %s: %s", node.address, reason)
            node.fault = reason
        for sandbox in self._leased.values():
            if sandbox.node is node:
                sandbox.end(f"its node's pool failed: {reason}")

    def _faults(self) -> str:
        faults = [f"{node.address}: {node.fault}" for node in self._nodes.values() if node.fault]
        return "; ".join(faults) or "no pool actor found"

    async def _look(self, urgent: bool = False) -> None:
        """Find the set's pool actors (one listing of names from Ray's GCS): a node new to this
        client, or left out, is asked what it serves and used once it answers; a node whose
        actor is no longer listed is left out."""
        assert self._look_lock is not None
        async with self._look_lock:
            if urgent and time.monotonic() - self._looked < RELOOK_PAUSE:
                return
            self._looked = time.monotonic()
            listed = await anyio.to_thread.run_sync(placement.pool_actor_names, self.pools)
            for node in self.nodes():
                if node.node_id not in listed:
                    self._leave_out(node, "its pool actor is no longer on the cluster")
            async with anyio.create_task_group() as tg:
                for node_id, name in listed.items():
                    if node_id not in self._nodes or self._nodes[node_id].fault is not None:
                        tg.start_soon(self._meet, name)

    async def _meet(self, name: str) -> None:
        try:
            actor = await anyio.to_thread.run_sync(placement.pool_actor, name)
            with anyio.fail_after(CONTROL_TIMEOUT):
                described = await actor.describe.remote()
        except (ValueError, TimeoutError, RayError) as exc:  # ValueError: it died since the listing
            log.info("pool actor %s does not answer: %s", name, _first_line(exc))
            return
        self._nodes[described["node_id"]] = Node(
            actor=actor,
            node_id=described["node_id"],
            address=described["address"],
            backend=described["backend"] or "?",
            lease_ttl=described["lease_ttl"],
            local=described["node_id"] == self._local_node,
            free=described["free"] if described["backend"] else 1,  # a pool its first call opens
        )

    async def _heartbeat(self) -> None:
        """Renew this client's leases on each node, and look at the cluster now and then."""
        while True:
            ttls = [node.lease_ttl for node in self._nodes.values()] or [LOOK_INTERVAL * 4]
            await anyio.sleep(min(LOOK_INTERVAL, min(ttls) / 4))
            by_node: dict[Node, list[RaySandbox]] = {}
            for sandbox in self._leased.values():
                if sandbox.alive:
                    by_node.setdefault(sandbox.node, []).append(sandbox)
            async with anyio.create_task_group() as tg:
                for node, sandboxes in by_node.items():
                    tg.start_soon(self._renew, node, sandboxes)
            if time.monotonic() - self._looked >= LOOK_INTERVAL:
                await self._look()

    async def _renew(self, node: Node, sandboxes: list[RaySandbox]) -> None:
        try:
            gone = await self._ask(node, node.actor.renew.remote([s.id for s in sandboxes]), CONTROL_TIMEOUT)
        except (NodeFault, SandboxError) as exc:
            self._leave_out(node, str(exc))
            return
        for sandbox in sandboxes:
            if sandbox.id in gone:
                sandbox.end("its node no longer holds the lease (it expired)")

    def _connect(self) -> str:
        """Join the cluster unless this process already has (a Ray task or actor, or a driver
        that called ``ray.init``); the id of the node this process runs on."""
        if not ray.is_initialized():
            try:
                ray.init(address=self._address or "auto", logging_level=logging.WARNING)
            except ConnectionError as exc:
                raise BackendNotAvailable(
                    f"no Ray cluster to join ({exc}); start one (`ray start --head`) or set RAY_ADDRESS"
                ) from None
        return ray.get_runtime_context().get_node_id()

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosed(f"{self!r} was closed")
        if self._tg is None:
            raise RuntimeError("use the pool inside 'async with RayPool(...) as pool:'")


class RaySandbox(HeldSandbox):
    """A sandbox leased on a node's pool actor, with :class:`~gem_sandbox.sandbox.client.Sandbox`'s
    API for tools and envs. Its files, shell sessions and kernels live on that node until the
    lease ends (:meth:`close`, the pool's ``release``, or the lease TTL after its client went
    silent). A fault of its node makes it dead, as a crashed local sandbox is: runs then give
    ``infra_error`` and other calls raise :class:`SandboxCrashed`."""

    def __init__(self, pool: RayPool, node: Node, lease: Mapping[str, Any]) -> None:
        self.pool = pool
        self.node = node
        self.id: str = lease["id"]
        self.backend: str = lease["backend"]
        self.hello: dict[str, Any] = dict(lease["hello"])
        self.default_timeout = pool.config.run_timeout

    def __repr__(self) -> str:
        state = f"dead: {self.death}" if self.death else "alive"
        return f"<RaySandbox {self.id} {self.backend} on {self.node.address} {state}>"

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
        """Run ``code`` in a fresh process in this sandbox."""
        timeout = self.default_timeout if timeout is None else timeout
        options = {"stdin": stdin, "timeout": timeout, "env": env, "cwd": cwd, "limits": limits}
        return await self._exec("run", (code, language), options, timeout)

    async def shell(self, command: str, *, session: str = "default", timeout: float | None = None) -> ExecResult:
        """Run ``command`` in a persistent bash session (cwd and exports persist)."""
        timeout = self.default_timeout if timeout is None else timeout
        return await self._exec("shell", (command,), {"session": session, "timeout": timeout}, timeout)

    async def kernel_exec(
        self, code: str, *, kernel: str = "default", timeout: float | None = None, display: bool = False
    ) -> ExecResult:
        """Run ``code`` in a persistent Python namespace."""
        timeout = self.default_timeout if timeout is None else timeout
        options = {"kernel": kernel, "timeout": timeout, "display": display}
        return await self._exec("kernel_exec", (code,), options, timeout)

    async def kernel_restart(self, kernel: str = "default") -> None:
        """Drop the kernel's namespace; the next :meth:`kernel_exec` starts a fresh one."""
        await self._control("kernel_restart", (kernel,))

    async def write_files(
        self,
        files: Mapping[str, bytes | str],
        *,
        dest: str = ".",
        executable: Collection[str] = (),
        directories: Collection[str] = (),
    ) -> None:
        """Write files under ``dest`` in the work dir (see :meth:`Sandbox.write_files`)."""
        options = {"dest": dest, "executable": list(executable), "directories": list(directories)}
        await self._control("write_files", (dict(files),), options)

    async def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of files in the work dir, by path; a missing one raises
        :class:`FileTransferError`."""
        result: dict[str, bytes] = await self._control("read_files", (list(paths),))
        return result

    async def snapshot(self, ttl: float | None = None) -> Snapshot:
        """Its state now, kept by its node's pool for ``ttl`` seconds."""
        snapshot: Snapshot = await self._control("snapshot", (ttl,), wait=SNAPSHOT_TIMEOUT + MARGIN)
        self.pool._snapshots[snapshot.id] = (self.node, snapshot)
        return snapshot

    async def fork(self, n: int) -> list[RaySandbox]:
        """``n`` new leases on its node, each starting from its state now."""
        if not self.alive:
            raise SandboxCrashed(f"sandbox {self.id} is not usable: {self.death}")
        node = self.node
        try:
            leases, node.free = await self.pool._ask(node, node.actor.fork.remote(self.id, n), SNAPSHOT_TIMEOUT * 2 + MARGIN)
        except NodeFault as exc:
            raise SandboxCrashed(f"sandbox {self.id}: {exc}") from None
        return [self.pool._hold(RaySandbox(self.pool, node, lease)) for lease in leases]

    async def reset(self, timeout: float = 10.0) -> None:
        """Back to a clean sandbox (no file, process, session or kernel left); the lease stays."""
        await self._control("reset", (), {"timeout": timeout}, wait=timeout + MARGIN)

    async def ping(self, timeout: float = 5.0) -> float:
        """Round trip to the sandbox's agent through its node, in milliseconds."""
        started = time.perf_counter()
        await self._control("ping", (), {"timeout": timeout}, wait=timeout + MARGIN)
        return (time.perf_counter() - started) * 1000

    async def close(self) -> None:
        """End the lease (the pool's ``release``); idempotent."""
        await self.pool.release(self)

    async def _exec(self, operation: str, args: tuple[Any, ...], options: dict[str, Any], timeout: float) -> ExecResult:
        if not self.alive:
            return ExecResult.infra_error(f"sandbox {self.id} is not usable: {self.death}")
        try:
            result: ExecResult = await self._call(operation, args, options, timeout + MARGIN)
        except (NodeFault, SandboxCrashed) as exc:  # its node, or the lease on it, is gone
            return ExecResult.infra_error(str(exc))
        return result

    async def _control(
        self, operation: str, args: tuple[Any, ...], options: Mapping[str, Any] = {}, *, wait: float = CONTROL_TIMEOUT + MARGIN
    ) -> Any:
        """A call that runs no code; any failure raises."""
        if not self.alive:
            raise SandboxCrashed(f"sandbox {self.id} is not usable: {self.death}")
        try:
            return await self._call(operation, args, options, wait)
        except NodeFault as exc:
            raise SandboxCrashed(f"sandbox {self.id}: {exc}") from None

    async def _call(self, operation: str, args: tuple[Any, ...], options: Mapping[str, Any], wait: float) -> Any:
        node = self.node
        try:
            return await self.pool._ask(node, node.actor.call.remote(self.id, operation, args, dict(options)), wait)
        except NodeFault as exc:
            self.pool._leave_out(node, str(exc))
            raise
        except SandboxCrashed as exc:  # the node no longer holds the lease, or its sandbox died
            self.end(str(exc))
            raise


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
