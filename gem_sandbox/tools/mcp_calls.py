"""A call of an MCP tool: finding it in model text, checking its arguments, and how it fails.

The model writes a call in GEM's format::

    <tool_call><tool_name>add</tool_name><arguments>{"a": 2, "b": 3}</arguments></tool_call>

or as a JSON tool call, ``<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>``.
A call that goes wrong is a :class:`CallFailed` of an :class:`MCPErrorKind`, which the tool
answers with an error observation rather than raising.
"""

from __future__ import annotations

import contextlib
import enum
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gem_sandbox.sandbox.result import Status
from gem_sandbox.tools.base import ToolCall

# GEM's format; the arguments are optional here, for tools that take none.
_GEM_CALL = re.compile(
    r"<tool_call>\s*<tool_name>([^<]*)</tool_name>\s*(?:<arguments>(.*?)</arguments>\s*)?</tool_call>", re.DOTALL
)
_JSON_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


class MCPConnectionError(ValueError):
    """The server could not be reached, or listed no tools, when the tools were asked for
    (a ValueError, as GEM's MCPTool raises at construction)."""


class MCPErrorKind(str, enum.Enum):
    """Why a call failed, in ``ToolOutput.details["error"]``."""

    UNKNOWN_TOOL = "unknown_tool"  # the server has no tool of that name
    INVALID_ARGUMENTS = "invalid_arguments"  # not a JSON object, or against the tool's input schema
    TOOL_ERROR = "tool_error"  # the tool ran and reported an error (isError)
    SERVER_ERROR = "server_error"  # the server refused the request (a JSON-RPC error)
    TIMEOUT = "timeout"  # no answer within the tool's timeout; the session stays usable
    CONNECTION = "connection"  # the server cannot be reached, or went away during the call
    PROTOCOL = "protocol"  # the server's answer could not be read

    @property
    def status(self) -> Status:
        """The run status a failure of this kind reports (``infra_error``: the server's
        failure, not the model's, so trainers mask it)."""
        return _STATUS.get(self, Status.ERROR)


_STATUS = {
    MCPErrorKind.TIMEOUT: Status.TIMEOUT,
    MCPErrorKind.CONNECTION: Status.INFRA_ERROR,
    MCPErrorKind.PROTOCOL: Status.INFRA_ERROR,
}


class CallFailed(Exception):
    """A call that cannot be answered with the tool's result."""

    def __init__(self, kind: MCPErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True, slots=True)
class MCPToolSpec:
    """One tool the server lists: what the model sees of it."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def schema(self) -> dict[str, Any]:
        """Its OpenAI-style function schema."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }


def find_call(action: str, tool: str, server_tools: Callable[[], set[str]]) -> ToolCall | None:
    """The first MCP call in ``action`` for the tool named ``tool``: any call in GEM's format (an
    unknown name is answered as such), or a JSON call naming one of ``server_tools()`` (asked
    only when there is one) or ``tool`` itself, dispatching. Its arguments are ``{"name": the
    MCP tool, "arguments": its arguments}``."""
    found: list[ToolCall] = []
    gem = _GEM_CALL.search(action)
    if gem is not None:
        arguments: Any = gem.group(2).strip() if gem.group(2) is not None else {}
        found.append(_call(tool, gem.group(1).strip(), arguments or {}, action, gem.end()))
    for block in _JSON_CALL.finditer(action):
        if gem is not None and block.end() >= gem.end():
            break
        call = _json_call(tool, server_tools, block.group(1), action, block.end())
        if call is not None:
            found.append(call)
            break
    return min(found, key=lambda call: call.end, default=None)


def _json_call(tool: str, server_tools: Callable[[], set[str]], text: str, action: str, end: int) -> ToolCall | None:
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    name, arguments = payload["name"], payload.get("arguments", {})
    try:
        names = server_tools()
    except MCPConnectionError:  # no server to ask: only GEM's format and the dispatch form are ours
        names = set()
    if name == tool and name not in names:  # the dispatch form
        if isinstance(arguments, str):
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments)
        if not isinstance(arguments, dict):
            return _call(tool, "", arguments, action, end)
        return _call(tool, arguments.get("name", ""), arguments.get("arguments", {}), action, end)
    if name not in names:
        return None  # another tool's call, or one the wrapper answers as unknown
    return _call(tool, name, arguments, action, end)


def _call(tool: str, name: Any, arguments: Any, action: str, end: int) -> ToolCall:
    return ToolCall(tool, {"name": name, "arguments": arguments}, action[:end], end)


def decode_arguments(spec: MCPToolSpec, arguments: Any) -> dict[str, Any]:
    """A call's arguments as a JSON object: GEM's ``<arguments>`` text and OpenAI's
    JSON-encoded arguments are decoded; anything else that is not an object fails the call."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise CallFailed(
                MCPErrorKind.INVALID_ARGUMENTS,
                f"the arguments of {spec.name!r} are not valid JSON ({exc.msg} at character {exc.pos})",
            ) from None
    if not isinstance(arguments, dict):
        raise CallFailed(MCPErrorKind.INVALID_ARGUMENTS, f"the arguments of {spec.name!r} must be a JSON object")
    return arguments


def schema_problem(spec: MCPToolSpec, arguments: dict[str, Any], validators: dict[str, Any]) -> str | None:
    """What is wrong with ``arguments`` by the tool's input schema (None: nothing, or the schema
    cannot be checked, which leaves the judgement to the server). ``validators`` caches the
    compiled schemas by tool name."""
    try:
        import jsonschema
    except ImportError:
        return None
    try:
        validator = validators.get(spec.name)
        if validator is None:
            cls = jsonschema.validators.validator_for(spec.input_schema)
            cls.check_schema(spec.input_schema)
            validator = validators[spec.name] = cls(spec.input_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except Exception:  # a schema jsonschema cannot use (invalid, a $ref it cannot resolve)
        return None
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
