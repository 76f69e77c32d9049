"""GEM's ``gem.tools.base_tool``: the base class of tools written in GEM's style.

A GEM tool implements ``instruction_string()`` and ``execute_action(action) -> (is_valid,
has_error, observation, parsed_action)``, and cannot say whether an action is meant for it
without executing it. :class:`BaseTool` makes such a tool a :class:`~gem_sandbox.tools.base.Tool`:
every action is offered to it (``parse`` claims them all), ``aexecute`` runs
``execute_action`` in a worker thread, and an action it finds invalid is passed on to the next
tool or the env, as GEM's wrapper does (``ToolOutput.details["valid"]``). Tools written for
this project subclass :class:`~gem_sandbox.tools.base.Tool` instead.
"""

from __future__ import annotations

from typing import Any, ClassVar

import anyio.to_thread

from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput, one_string_argument
from gem_sandbox.tools.episode import Episode


class BaseTool(Tool):
    """GEM's ``BaseTool(num_workers=1)``; subclasses set ``tool_type`` and implement
    ``instruction_string`` and ``execute_action``."""

    name: ClassVar[str] = "tool"
    tool_type: ClassVar[str] = "base"
    description: ClassVar[str] = "A tool in GEM's style: it reads the whole action."
    parameters: ClassVar[dict[str, Any]] = one_string_argument("action", "the model's whole action")

    def __init__(self, num_workers: int = 1) -> None:
        self.num_workers = num_workers

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        raise NotImplementedError("Subclass must implement this method")

    def parse(self, action: str) -> ToolCall | None:
        return ToolCall(self.name, {"action": action}, action, len(action))

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        action = str(call.arguments["action"])
        is_valid, has_error, observation, parsed_action = await anyio.to_thread.run_sync(self.execute_action, action)
        details = {"valid": bool(is_valid), "parsed_action": parsed_action}
        return ToolOutput(observation, error=bool(has_error), details=details)


__all__ = ["BaseTool"]
