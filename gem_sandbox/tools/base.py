"""The tool contract: find a call in model text, execute it, format the observation.

A tool is stateless across episodes (one instance may serve many envs at once, as GEM's
wrapper factory shares them); per-episode state is the :class:`~gem_sandbox.tools.episode.Episode`
that the wrapper driving it passes to every call.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gem_sandbox.bridge import run_sync
from gem_sandbox.tools.episode import Episode


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call found in model text. ``end`` is where it ends in that text, so the wrapper
    can pick the earliest complete call; ``parsed_action`` is the text up to ``end``."""

    tool: str
    arguments: dict[str, Any]
    parsed_action: str
    end: int


@dataclass(frozen=True, slots=True)
class ToolOutput:
    observation: str
    error: bool = False
    details: dict[str, Any] = field(default_factory=dict)


def one_string_argument(name: str, description: str) -> dict[str, Any]:
    """The JSON schema of arguments that are one required string, as most tools take."""
    return {"type": "object", "properties": {name: {"type": "string", "description": description}}, "required": [name]}


class Tool(abc.ABC):
    name: ClassVar[str]
    tool_type: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]  # JSON schema of the arguments

    @abc.abstractmethod
    def instruction_string(self) -> str:
        """How the model should call this tool; appended to the first observation."""

    @abc.abstractmethod
    def parse(self, action: str) -> ToolCall | None:
        """The first complete call to this tool in ``action``, or None."""

    @abc.abstractmethod
    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        """Run a parsed call, as part of ``episode`` when a wrapper drives the tool (without
        one, any state lasts this one call). Failures of the call are outputs with
        ``error=True``, not raises."""

    def schema(self) -> dict[str, Any]:
        """An OpenAI-style function schema for this tool."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    async def aclose(self) -> None:
        """Release what the tool opened itself (files, indexes); runtimes close on their own.
        Safe to call twice: the wrapper that owns a tool may close it again."""

    # GEM's tuple API: (is_valid, has_error, observation, parsed_action)
    async def aexecute_action(self, action: str) -> tuple[bool, bool, str, str]:
        call = self.parse(action)
        if call is None:
            return False, True, "", action
        output = await self.aexecute(call)
        return True, output.error, output.observation, call.parsed_action

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        return run_sync(self.aexecute_action, action)
