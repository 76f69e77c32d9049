"""What tools that run code in a sandbox (Python, shell) share: reaching a sandbox, turning
an :class:`ExecResult` into an outcome, and bounding what goes back into the model's context.

A call's outcome never raises: a sandbox that cannot be had or that dies mid-call becomes an
``infra_error`` result, which the observation states plainly and ``ToolOutput.details["status"]``
carries so trainers can mask the sample instead of scoring the model for it.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import Any

from gem_sandbox.runtime import LeasedSandbox, Runtime
from gem_sandbox.sandbox.errors import BackendNotAvailable, SandboxCrashed, SandboxUnavailable
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sync import SyncRuntime, resolve_runtime
from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.episode import Episode

DEFAULT_MAX_OUTPUT_CHARS = 4000


def succeeded(result: ExecResult) -> bool:
    """The code ran to a zero exit (output cut at the cap still counts)."""
    return result.status is Status.OK or (result.status is Status.OUTPUT_LIMIT and result.exit_code == 0)


def status_note(result: ExecResult, timeout: float) -> str | None:
    """A line saying how a run that did not simply exit ended, or None when it did."""
    if result.status is Status.TIMEOUT:
        return f"Execution timed out after {timeout} seconds."
    if result.status is Status.OOM:
        return "Execution ran out of memory."
    if result.status is Status.KILLED:
        return f"Execution was killed (signal {result.signal})."
    if result.status is Status.INFRA_ERROR:
        return f"Sandbox failure, not an error in the code: {result.stderr.strip() or 'the sandbox died'}"
    return None


def cap(text: str, max_chars: int | None) -> str:
    """``text`` with its middle cut out beyond ``max_chars`` (None: never), saying how much was cut."""
    if max_chars is None or len(text) <= max_chars:
        return text
    head = max_chars // 2
    tail = max_chars - head
    return f"{text[:head]}\n[... {len(text) - max_chars} characters truncated ...]\n{text[len(text) - tail :]}"


class SandboxTool(Tool):
    """A tool whose calls run in a sandbox of ``runtime`` (``None``: the process default,
    which serves sync callers; async callers pass their own). ``max_output_chars`` bounds the
    observation (None: only the runtime's ``max_output_bytes`` bounds it)."""

    def __init__(
        self,
        timeout: float,
        *,
        runtime: Runtime | SyncRuntime | None = None,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        self.timeout = timeout
        self.runtime = runtime
        self.max_output_chars = max_output_chars

    @abc.abstractmethod
    async def run(self, runtime: Runtime, episode: Episode | None, call: ToolCall) -> ExecResult:
        """Run the call on ``runtime``, in ``episode``'s sandbox when the tool keeps state."""

    @abc.abstractmethod
    def observation(self, result: ExecResult) -> str:
        """What the model reads back."""

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        try:
            result = await self.run(await resolve_runtime(self.runtime), episode, call)
        except BackendNotAvailable:
            raise  # a machine that cannot run the backend is a setup to fix, not a sample to mask
        except (SandboxUnavailable, SandboxCrashed) as exc:  # the infrastructure failed, not the call
            result = ExecResult.infra_error(str(exc))
        details: dict[str, Any] = {
            "status": result.status.value,
            "exit_code": result.exit_code,
            "duration_ms": result.duration_ms,
            "truncated": result.truncated,
        }
        return ToolOutput(self.observation(result), error=not succeeded(result), details=details)


async def in_episode(
    runtime: Runtime, episode: Episode | None, fn: Callable[[LeasedSandbox], Awaitable[ExecResult]]
) -> ExecResult:
    """``fn(sandbox)`` on ``episode``'s sandbox, leased on first use; without an episode (a tool
    called directly) on a sandbox leased for this one call."""
    if episode is None:
        async with runtime.lease() as sandbox:
            return await fn(sandbox)
    return await fn(await episode.sandbox(runtime))
