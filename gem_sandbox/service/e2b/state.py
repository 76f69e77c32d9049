"""What an e2b sandbox keeps beside its lease: :class:`E2bSandbox`, held by the lease
(``Lease.e2b``), so it lives as long as the lease does and goes with it: the template name it
was created from, its metadata and env, the access token its envd-style routes check, its code
contexts (kernels), its running commands and watchers and its metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from gem_sandbox.sandbox.spawned import Process
from gem_sandbox.service.e2b.javascript import NodeContext
from gem_sandbox.service.errors import Problem

DEFAULT_CONTEXT = "default"
LISTENER_BACKLOG = 1024  # events a command's stream may fall behind before it is dropped


@dataclass
class Context:
    """One kernel of a sandbox, as the code interpreter SDK sees it."""

    id: str
    cwd: str = "."  # work-dir relative
    executions: int = 0
    ready: bool = False  # its kernel has the sandbox's env and its cwd
    language: str = "python"  # or "javascript"
    node: NodeContext | None = None  # a JavaScript context's process, once started


Event = tuple[dict[str, Any] | None, Problem | None]  # an envd event, or the error ending a stream


@dataclass(eq=False)
class Command:
    """A started command as ``commands.list`` shows it, and the streams that follow it: the
    one that started it and any that ``commands.connect`` opened since. Its output goes to
    those listening when it is written, and to no one when none is."""

    process: Process
    config: dict[str, Any]
    tag: str | None
    pty: bool = False  # it runs on a pty: its output is the pty's
    listeners: set[MemoryObjectSendStream[Event]] = field(default_factory=set)

    def listen(self) -> MemoryObjectReceiveStream[Event]:
        send, receive = anyio.create_memory_object_stream[Event](LISTENER_BACKLOG)
        self.listeners.add(send)
        return receive

    def tell(self, event: Event) -> None:
        """Pass ``event`` to every listener; one that fell :data:`LISTENER_BACKLOG` events
        behind (its client stopped reading) is dropped, not waited for."""
        for listener in list(self.listeners):
            try:
                listener.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.listeners.discard(listener)
                listener.close()

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()
        self.listeners.clear()


@dataclass(eq=False)
class Watcher:
    """A polled directory watcher (the sync SDK's ``watch_dir``): its program, and the
    events since the last poll."""

    process: Process
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Sample:
    """One reading of a sandbox's metrics (:mod:`.metrics`)."""

    at: float  # wall clock
    cpu_s: float  # CPU time of its processes, to tell the next reading's share
    figures: dict[str, Any]  # e2b's SandboxMetric fields


@dataclass(eq=False)
class E2bSandbox:
    template: str
    access_token: str
    metadata: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the default environment of its code
    contexts: dict[str, Context] = field(default_factory=lambda: {DEFAULT_CONTEXT: Context(DEFAULT_CONTEXT)})
    commands: dict[int, Command] = field(default_factory=dict)  # running ones, by pid
    watchers: dict[str, Watcher] = field(default_factory=dict)  # polled ones, by id
    samples: list[Sample] = field(default_factory=list)  # its metrics so far

    def context(self, context_id: str) -> Context:
        if context_id not in self.contexts:
            raise Problem(404, "not_found", f"no context {context_id} in this sandbox")
        return self.contexts[context_id]
