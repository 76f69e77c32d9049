"""GEM's ``gem.tools.mcp_tool``: the tools of a Model Context Protocol server, called from model
text.

One :class:`MCPTool` connects to one server, over stdio (a command it spawns) or streamable
HTTP (a URL), and exposes every tool the server lists: :meth:`MCPTool.schemas` gives one
OpenAI-style function schema per MCP tool, :meth:`MCPTool.instruction_string` lists them for
the model. The model calls one in GEM's format or as a JSON tool call
(:mod:`~gem_sandbox.tools.mcp_calls`) and reads back GEM's observation, the result inside
``<tool_response>`` tags. A call that goes wrong (an unknown tool, arguments that break the
tool's schema, an error the tool reports, a server that does not answer in ``timeout``
seconds, or one that is gone) is answered with an error observation: ``[Tool execution error:
...]`` for what the tool itself reported, ``[Tool execution failed: ...]`` for the rest, never
a raise or a hang. ``ToolOutput.details`` says which (``error``: an :class:`MCPErrorKind`) and
carries ``status`` as sandboxed tools do, so a server that died (``infra_error``) is masked,
not scored. The session, opened on first use and kept until :meth:`MCPTool.aclose`, is
:mod:`~gem_sandbox.tools.mcp_session`'s.

Needs the ``mcp`` SDK (``pip install 'gem-sandbox[mcp]'``), 1.x or 2.x, imported on first
use; :mod:`gem_sandbox.tools.mcp_demo_server` is a server to try it on.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TextIO

from gem_sandbox.bridge import run_sync
from gem_sandbox.sandbox.result import Status
from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.mcp_calls import (
    CallFailed,
    MCPConnectionError,
    MCPErrorKind,
    MCPToolSpec,
    decode_arguments,
    find_call,
    schema_problem,
)
from gem_sandbox.tools.mcp_sdk import attr, result_text, sdk
from gem_sandbox.tools.mcp_transport import MCPServer
from gem_sandbox.tools.mcp_session import MCPConnection
from gem_sandbox.tools.sandboxed import DEFAULT_MAX_OUTPUT_CHARS, cap

__all__ = ["MCPConnectionError", "MCPErrorKind", "MCPTool", "MCPToolSpec", "is_timeout_error", "tool_response"]


def tool_response(body: str) -> str:
    """GEM's observation around a result or an error."""
    return f"\n<tool_response>\n{body}\n</tool_response>\n"


def is_timeout_error(error: Exception) -> bool:
    """Whether ``error`` is a timeout (GEM's helper): a TimeoutError, or a message that says so."""
    words = ("etimedout", "econnreset", "timeout", "timed out")
    return isinstance(error, TimeoutError) or any(word in str(error).lower() for word in words)


class MCPTool(Tool):
    """The tools of one MCP server, as one gem-sandbox tool.

    The server is ``config``, in GEM's forms (a URL; a dict with ``command``, ``args``, ``env``
    for stdio or ``url``, ``headers`` for HTTP; or ``{"mcpServers": {name: that dict}}`` with
    one server), or ``command`` with ``args``, ``env`` and ``cwd`` (a stdio server this tool
    spawns; ``env`` adds to the SDK's minimal environment, it does not replace it), or ``url``.
    ``headers`` and ``auth`` (a bearer token) go with HTTP requests.

    ``timeout`` bounds each call in seconds (``execution_timeout``, GEM's name, sets it too),
    ``connect_timeout`` each connect (spawn, handshake and tool listing). ``validate_on_init``
    lists the tools right away, as GEM does, so that a server that cannot be reached fails here
    and the instructions can list them; async code that must not block its loop passes False and
    awaits :meth:`alist_tools` before the first reset. ``validate_arguments`` checks arguments
    against the tool's input schema before sending them, so a botched call costs no round trip.
    ``reconnect`` replaces a session that died by a fresh one on the next call (off: every later
    call fails). ``max_output_chars`` bounds an observation (None: no bound). ``errlog``
    receives a stdio server's stderr (default: this process's).

    Close the tool (:meth:`aclose`, or :meth:`close` from blocking code; a wrapper that owns it
    does) to stop its server: an open session otherwise lasts as long as its event loop.
    """

    name: ClassVar[str] = "mcp"
    tool_type: ClassVar[str] = "mcp"
    description: ClassVar[str] = "Call a tool of the MCP server by name with its arguments."
    # A JSON call naming this tool itself is a dispatch: {"name": "mcp", "arguments": {"name":
    # "add", "arguments": {...}}}; parse gives every call that shape.
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the MCP tool to call"},
            "arguments": {"type": "object", "description": "its arguments, as its input schema says"},
        },
        "required": ["name"],
    }

    def __init__(
        self,
        config: str | Mapping[str, Any] | None = None,
        auth: str | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        validate_on_init: bool = True,
        validate_arguments: bool = True,
        reconnect: bool = True,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        errlog: TextIO | None = None,
        execution_timeout: float | None = None,
    ) -> None:
        server = MCPServer.from_options(config, auth, headers, command=command, args=args, env=env, cwd=cwd, url=url)
        self.timeout = timeout if execution_timeout is None else execution_timeout  # GEM's name for it
        self.validate_arguments = validate_arguments
        self.max_output_chars = max_output_chars
        self.connection = MCPConnection(server, connect_timeout, reconnect, errlog)
        self._tools: list[MCPToolSpec] | None = None
        self._validators: dict[str, Any] = {}  # compiled input schemas, by tool name
        sdk()  # fail here, not at the first call, without the SDK
        if validate_on_init and not self.list_tools():
            raise MCPConnectionError(f"the MCP server ({self.server_description}) lists no tools")

    @classmethod
    def from_url(
        cls, url: str, auth: str | None = None, headers: Mapping[str, str] | None = None, **kwargs: Any
    ) -> MCPTool:
        """A streamable HTTP server (GEM's constructor of the same name)."""
        return cls(url=url, auth=auth, headers=headers, **kwargs)

    @classmethod
    def from_local_command(cls, server_params: Mapping[str, Any], **kwargs: Any) -> MCPTool:
        """A stdio server spawned from ``{"command": ..., "args": [...], "env": {...}}`` (GEM's
        constructor of the same name)."""
        return cls(dict(server_params), **kwargs)

    @classmethod
    def from_config_file(cls, config_path: str | os.PathLike[str], **kwargs: Any) -> MCPTool:
        """The server a JSON config file describes, in any of the config forms (GEM's
        constructor of the same name)."""
        with open(config_path, encoding="utf-8") as file:
            return cls(json.load(file), **kwargs)

    def reconfigure(
        self, new_config: str | Mapping[str, Any], auth: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        """Point the tool at another server (GEM's method): the session closes, and the tools
        are listed anew on next need."""
        self.close()
        old = self.connection
        self.connection = MCPConnection(
            MCPServer.from_options(new_config, auth, headers), old.connect_timeout, old.reconnect, old.errlog
        )
        self._tools, self._validators = None, {}

    # The server, as GEM's MCPTool names it.
    command = property(lambda self: self.connection.server.command)
    args = property(lambda self: self.connection.server.args)
    env = property(lambda self: self.connection.server.env)
    cwd = property(lambda self: self.connection.server.cwd)
    url = property(lambda self: self.connection.server.url)
    headers = property(lambda self: self.connection.server.headers)

    @property
    def server_description(self) -> str:
        return self.connection.server.description

    # -- the tools ---------------------------------------------------------------------------

    def list_tools(self) -> list[MCPToolSpec]:
        """The server's tools, listed on first need. From blocking code this opens the session
        on the loop the sync faces use; inside an event loop, which cannot be blocked on, it
        lists them over a short-lived connection of its own (await :meth:`alist_tools` there
        instead to skip that)."""
        if self._tools is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                run_sync(self.alist_tools)
            else:
                self._tools = self.connection.list_in_thread()
        return list(self._tools or [])

    async def alist_tools(self) -> list[MCPToolSpec]:
        """The server's tools, opening the session on this loop if it is not open."""
        try:
            return list(await self._open())
        except CallFailed as exc:
            raise MCPConnectionError(exc.message) from None

    async def _open(self) -> list[MCPToolSpec]:
        """The tools of the open session (opened if need be), which the tool keeps listing."""
        tools = (await self.connection.open()).tools
        if tools != self._tools:
            self._tools, self._validators = tools, {}
        return tools

    def get_available_tools(self) -> list[dict[str, Any]]:
        """The tools as GEM lists them: dicts of ``name``, ``description`` and ``parameters``."""
        return [
            {"name": spec.name, "description": spec.description, "parameters": spec.input_schema}
            for spec in self.list_tools()
        ]

    def schemas(self) -> list[dict[str, Any]]:
        """One OpenAI-style function schema per MCP tool, for a chat template's ``tools=``."""
        return [spec.schema() for spec in self.list_tools()]

    def schema(self) -> dict[str, Any]:
        """The schema of this tool as one function that dispatches to the MCP tools (what a
        one-schema-per-tool caller sees); :meth:`schemas` lists the MCP tools themselves."""
        names = [spec.name for spec in self.list_tools()]
        parameters = json.loads(json.dumps(self.parameters))
        parameters["properties"]["name"]["enum"] = names
        description = f"{self.description} Tools: {', '.join(names)}."
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }

    def instruction_string(self) -> str:
        listing = "\n".join(
            json.dumps(spec.schema(), ensure_ascii=False) for spec in sorted(self.list_tools(), key=lambda s: s.name)
        )
        return (
            "You can use the tools of an MCP server listed below. Call one tool per message, and "
            "read its result in the next message, inside <tool_response></tool_response>.\n"
            "Write a call as:\n"
            "<tool_call>\n"
            "<tool_name>the tool's name</tool_name>\n"
            "<arguments>\n"
            '{"parameter": "value"}\n'
            "</arguments>\n"
            "</tool_call>\n"
            "The arguments are one JSON object that follows the tool's parameters; escape quotes "
            'inside strings. <tool_call>{"name": ..., "arguments": {...}}</tool_call> works too.\n'
            f"Available tools:\n<tools>\n{listing}\n</tools>"
        )

    # -- calling -----------------------------------------------------------------------------

    def parse(self, action: str) -> ToolCall | None:
        """The first MCP call in ``action`` (see :func:`~gem_sandbox.tools.mcp_calls.find_call`)."""
        return find_call(action, self.name, lambda: {spec.name for spec in self.list_tools()})

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        name = call.arguments.get("name")
        details: dict[str, Any] = {"tool": name}
        try:
            tools = self._tools if self._tools is not None else await self._open()
            spec = next((spec for spec in tools if spec.name == name), None)
            if spec is None:
                listing = ", ".join(spec.name for spec in tools)
                raise CallFailed(MCPErrorKind.UNKNOWN_TOOL, f"Tool {name!r} not found. Available tools: {listing}")
            arguments = self._arguments(spec, call.arguments.get("arguments"))
            result = await self.connection.call(spec.name, arguments, self.timeout)
        except CallFailed as failure:
            details.update(error=failure.kind.value, status=failure.kind.status.value)
            return ToolOutput(
                self._observation(f"[Tool execution failed: {failure.message}]"), error=True, details=details
            )
        text = result_text(result)
        structured = attr(result, "structured_content", "structuredContent")
        if structured is not None:
            details["structured_content"] = structured
        if attr(result, "is_error", "isError"):
            details.update(error=MCPErrorKind.TOOL_ERROR.value, status=Status.ERROR.value)
            return ToolOutput(self._observation(f"[Tool execution error: {text}]"), error=True, details=details)
        details["status"] = Status.OK.value
        return ToolOutput(self._observation(text), details=details)

    def _arguments(self, spec: MCPToolSpec, arguments: Any) -> dict[str, Any]:
        """The call's arguments as a JSON object that fits the tool's input schema."""
        arguments = decode_arguments(spec, arguments)
        if self.validate_arguments:
            problem = schema_problem(spec, arguments, self._validators)
            if problem is not None:
                raise CallFailed(MCPErrorKind.INVALID_ARGUMENTS, f"invalid arguments for {spec.name!r}: {problem}")
        return arguments

    def _observation(self, body: str) -> str:
        return tool_response(body if self.max_output_chars is None else cap(body, self.max_output_chars))

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the session and stop its server (a stdio server's process ends here); a later
        call opens a new one. Safe to call twice, and from any loop."""
        await self.connection.aclose()

    def close(self) -> None:
        """Blocking :meth:`aclose`, for sync code (not inside the loop that holds the session)."""
        session = self.connection.session
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and session is not None and session.loop is loop:
            raise RuntimeError("the MCP session lives on this event loop: await tool.aclose() instead")
        run_sync(self.aclose)
