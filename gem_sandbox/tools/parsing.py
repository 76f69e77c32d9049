"""Finding the tool call in model text: each tool's own format, or a JSON tool call.

JSON calls are an extension that GEM does not have (so a wrapper finds them only when asked:
``ToolEnvWrapper(..., json_tool_calls=True)``); they are the chat-template form (Hermes,
Qwen): ``<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>``,
naming any tool by its ``name`` with the arguments its
:meth:`~gem_sandbox.tools.base.Tool.schema` describes. A JSON call that cannot be
honoured (not JSON, unknown tool, missing arguments) is still a call: it comes back as a
:class:`ToolCallError`, which the wrapper answers with an error observation, so that a botched
call is never mistaken for a final answer.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gem_sandbox.tools.base import Tool, ToolCall

_JSON_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolCallError:
    """A JSON tool call that names no usable tool or carries bad arguments."""

    message: str
    parsed_action: str
    end: int


def parse_json_call(action: str, tools: Mapping[str, Tool]) -> ToolCall | ToolCallError | None:
    """The first ``<tool_call>`` in ``action`` against ``tools`` (by name), or None."""
    match = _JSON_CALL.search(action)
    if match is None:
        return None

    def error(message: str) -> ToolCallError:
        return ToolCallError(message, action[: match.end()], match.end())

    try:
        payload = json.loads(match.group(1))
    except json.JSONDecodeError as exc:
        return error(f"the tool call is not valid JSON ({exc.msg} at character {exc.pos})")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return error('a tool call is a JSON object {"name": ..., "arguments": {...}}')
    tool = tools.get(payload["name"])
    if tool is None:
        return error(f"unknown tool {payload['name']!r}; available tools: {', '.join(tools)}")
    arguments: Any = payload.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI's wire format encodes the arguments as a string
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments)
    if not isinstance(arguments, dict):
        return error(f"the arguments of {tool.name!r} must be a JSON object")
    missing = [name for name in tool.parameters.get("required", []) if name not in arguments]
    if missing:
        return error(f"tool {tool.name!r} needs the argument(s) {', '.join(missing)}")
    properties = tool.parameters.get("properties", {})
    not_text = [
        name
        for name, value in arguments.items()
        if properties.get(name, {}).get("type") == "string" and not isinstance(value, str)
    ]
    if not_text:
        return error(f"the argument(s) {', '.join(not_text)} of {tool.name!r} must be strings")
    return ToolCall(tool.name, arguments, action[: match.end()], match.end())


def find_call(
    action: str, tools: Sequence[Tool], *, json_calls: bool = True
) -> ToolCall | ToolCallError | None:
    """The call that ends first in ``action`` among every tool's format and, with
    ``json_calls``, JSON calls."""
    calls: list[ToolCall | ToolCallError] = [call for tool in tools if (call := tool.parse(action)) is not None]
    json_call = parse_json_call(action, {tool.name: tool for tool in tools}) if json_calls else None
    if json_call is not None:
        calls.append(json_call)
    return min(calls, key=lambda call: call.end, default=None)
