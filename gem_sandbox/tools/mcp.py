"""GEM's MCP tool: the tools of a Model Context Protocol server, called from model text.

One :class:`MCPTool` connects to one server, over stdio (a command it spawns) or streamable
HTTP (a URL), and exposes every tool the server lists: :meth:`MCPTool.schemas` gives one
OpenAI-style function schema per MCP tool, :meth:`MCPTool.instruction_string` lists them for
the model. The model calls one in GEM's format::

    <tool_call><tool_name>add</tool_name><arguments>{"a": 2, "b": 3}</arguments></tool_call>

or as a JSON tool call, ``<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>``,
and reads back GEM's observation, the result inside ``<tool_response>`` tags. A call that goes wrong
(an unknown tool, arguments that break the tool's schema, an error the tool reports, a server
that does not answer in ``timeout`` seconds, or one that is gone) is answered with an error
observation: ``[Tool execution error: ...]`` for what the tool itself reported, ``[Tool
execution failed: ...]`` for the rest, never a raise or a hang. ``ToolOutput.details`` says
which (``error``: an :class:`MCPErrorKind`) and carries ``status`` as sandboxed tools do, so a
server that died (``infra_error``) is masked, not scored.

The session's lifetime belongs to the tool: it opens on first use, on the event loop of that
use, and stays open for later calls until :meth:`MCPTool.aclose`. The SDK's transports are
context managers over anyio task groups, which must be entered and exited by one task, while
a tool's calls and its close come from whatever tasks the caller runs; so each session is held
open by a task of its own, which every call talks to and ``aclose`` tells to finish. A session
that dies (the server exited or stopped answering) is replaced by a fresh one on the next call.
Sync callers go through the sync faces (``execute_action``, the wrappers' ``step``), whose
coroutines all run on gem-sandbox's one background loop, so their session lives there.

Needs the ``mcp`` SDK (``pip install 'gem-sandbox[mcp]'``), 1.x or 2.x, imported on first
use; :mod:`gem_sandbox.tools.mcp_demo_server` is a server to try it on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import enum
import functools
import json
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar, TextIO, TypeVar

import anyio

from gem_sandbox.bridge import run_sync
from gem_sandbox.sandbox.result import Status
from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.sandboxed import DEFAULT_MAX_OUTPUT_CHARS, cap

T = TypeVar("T")

#: Seconds a closing session may take to stop its server (the SDK bounds a stdio shutdown at
#: about six: stdin closed, then SIGTERM, then SIGKILL).
CLOSE_TIMEOUT = 10.0
#: Seconds the ping after a timed-out call may take (see ``MCPTool._call_on``).
PROBE_TIMEOUT = 2.0
_MAX_PAGES = 100  # of a paginated tool listing
_CONNECTION_CLOSED = -32000  # JSON-RPC code the SDK gives requests whose connection ended

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


_STATUS = {
    MCPErrorKind.TIMEOUT: Status.TIMEOUT,
    MCPErrorKind.CONNECTION: Status.INFRA_ERROR,  # the server's failure, not the model's
    MCPErrorKind.PROTOCOL: Status.INFRA_ERROR,
}


class _CallFailed(Exception):
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


def tool_response(body: str) -> str:
    """GEM's observation around a result or an error."""
    return f"\n<tool_response>\n{body}\n</tool_response>\n"


# -- the SDK, imported on first use (it is optional and slow to import) ------------------------


def _attr(obj: Any, *names: str) -> Any:
    """The first of ``names`` that ``obj`` has: mcp 2 names fields in snake case, 1.x in camel."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


@functools.cache
def _sdk() -> SimpleNamespace:
    """The parts of the SDK this module uses, on either major version."""
    try:
        import mcp.types
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
    except ImportError as exc:
        raise ImportError("MCPTool needs the MCP SDK: pip install 'gem-sandbox[mcp]' (or mcp)") from exc
    try:
        from mcp.shared.exceptions import MCPError  # mcp >= 2
    except ImportError:
        from mcp.shared.exceptions import McpError as MCPError  # type: ignore[attr-defined,no-redef]
    from mcp.client import streamable_http

    return SimpleNamespace(
        ClientSession=ClientSession,
        StdioServerParameters=StdioServerParameters,
        stdio_client=stdio_client,
        default_environment=get_default_environment,
        MCPError=MCPError,
        PaginatedRequestParams=mcp.types.PaginatedRequestParams,
        http_client=getattr(streamable_http, "streamable_http_client", None),
        legacy_http_client=getattr(streamable_http, "streamablehttp_client", None),
    )


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)):
        return True
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups (the transports' task groups
    raise them) for the first real cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _binary_size(data: Any) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, TypeError, ValueError):
        return len(data or "")


def result_text(result: Any) -> str:
    """What a tool result says, as text: its content blocks in order (binary ones by size, as
    GEM shows them), else its structured content as JSON."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"Binary data: {_binary_size(block.data)} bytes")
        elif kind == "resource_link":
            parts.append(f"Resource: {block.uri}")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(
                text if text is not None else f"Binary data: {_binary_size(getattr(resource, 'blob', ''))} bytes"
            )
        else:
            parts.append(str(block))
    if not parts:
        structured = _attr(result, "structured_content", "structuredContent")
        if structured is not None:
            parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts) if parts else "Tool execution completed with no output"


# -- one open session, held by a task of its own ------------------------------------------------


def _running_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("MCPTool runs on asyncio event loops (anyio's default backend)") from None


class _Session:
    """An MCP session held open by a dedicated task on the loop that opened it, until
    :meth:`close` or until its transport fails."""

    def __init__(self, connect: Callable[[], contextlib.AbstractAsyncContextManager[tuple[Any, list[MCPToolSpec]]]]):
        self.loop = _running_loop()
        self.opened = anyio.Event()  # set once open, or once it failed to open
        self.stop = anyio.Event()
        self.done = anyio.Event()
        self.client: Any = None  # the ClientSession while open
        self.tools: list[MCPToolSpec] = []
        self.error: BaseException | None = None
        self.was_open = False
        self.task = self.loop.create_task(self._hold(connect), name="mcp-session")

    async def _hold(
        self, connect: Callable[[], contextlib.AbstractAsyncContextManager[tuple[Any, list[MCPToolSpec]]]]
    ) -> None:
        try:
            async with connect() as (client, tools):
                self.client, self.tools, self.was_open = client, tools, True
                self.opened.set()
                await self.stop.wait()
        except Exception as exc:  # a failed connect or a dead transport: callers read it here
            self.error = exc
        finally:
            self.client = None
            self.opened.set()
            self.done.set()

    @property
    def ended(self) -> bool:
        return self.done.is_set() or self.stop.is_set()

    def usable_from(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether calls from ``loop`` can reach it: on its own loop, or on one still running
        in another thread (calls are then handed to it)."""
        return not self.loop.is_closed() and (self.loop is loop or self.loop.is_running())

    async def close(self) -> None:
        self.stop.set()
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await self.done.wait()


async def _guarded(session: _Session, fn: Callable[[], Awaitable[T]], limit: float) -> tuple[str, Any]:
    """``await fn()`` bounded by ``limit`` seconds and by the session's end: ("ok", its value),
    ("error", what it raised), ("timeout", None) or ("ended", None). Nothing is raised inside
    the task group, which would wrap it in an exception group."""
    outcome: tuple[str, Any] = ("ended", None)
    with anyio.move_on_after(limit) as deadline:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await session.done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                outcome = ("ok", await fn())
            except Exception as exc:
                outcome = ("error", exc)
            tg.cancel_scope.cancel()
    if deadline.cancelled_caught and outcome[0] == "ended":  # the deadline, not the session's end
        outcome = ("timeout", None)
    return outcome


async def _on_loop_of(session: _Session, limit: float, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """``await fn(*args)`` on the session's loop, here or handed to it in its thread, given up
    after ``limit`` seconds: what runs there bounds itself, so only a loop that stopped (the
    thread of the sync faces' loop exiting, say) gets that far."""
    with anyio.move_on_after(limit):
        if session.loop is _running_loop():
            return await fn(*args)
        try:
            future = asyncio.run_coroutine_threadsafe(fn(*args), session.loop)
        except RuntimeError:  # that loop closed meanwhile
            raise _CallFailed(MCPErrorKind.CONNECTION, "the event loop that held the MCP session is closed") from None
        try:
            return await asyncio.wrap_future(future)
        finally:
            future.cancel()  # nothing once it is done
    raise _CallFailed(MCPErrorKind.CONNECTION, f"the MCP session's event loop did not answer within {limit:g}s")


def _stop_soon(session: _Session) -> None:
    """Tell a session's task to close it, from any thread, without waiting."""
    if session.loop.is_closed():
        return
    if session.loop is _running_loop():
        session.stop.set()
    else:
        with contextlib.suppress(RuntimeError):  # closed meanwhile
            session.loop.call_soon_threadsafe(session.stop.set)


# -- the tool ------------------------------------------------------------------------------------


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
        self._set_server(config, auth, headers, command=command, args=args, env=env, cwd=cwd, url=url)
        self.timeout = timeout if execution_timeout is None else execution_timeout  # GEM's name for it
        self.connect_timeout = connect_timeout
        self.validate_arguments = validate_arguments
        self.reconnect = reconnect
        self.max_output_chars = max_output_chars
        self.errlog = errlog
        self._tools: list[MCPToolSpec] | None = None
        self._validators: dict[str, Any] = {}
        self._session: _Session | None = None
        self._retired: list[_Session] = []  # sessions left behind, still shutting down
        self._lost = False  # a session died (what reconnect=False stops at)
        self._lock = threading.Lock()  # guards the session slot against loops in other threads
        _sdk()  # fail here, not at the first call, without the SDK
        if validate_on_init and not self.list_tools():
            raise MCPConnectionError(f"the MCP server ({self.server_description}) lists no tools")

    def _set_server(
        self,
        config: str | Mapping[str, Any] | None,
        auth: str | None,
        headers: Mapping[str, str] | None,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
    ) -> None:
        if config is not None:
            if command is not None or url is not None:
                raise ValueError("give MCPTool a config, a command or a url, not several")
            server = _server_from_config(config)
            command, url = server.get("command"), server.get("url")
            args, env, cwd = server.get("args", args), server.get("env", env), server.get("cwd", cwd)
            headers = {**server.get("headers", {}), **(headers or {})}
        if (command is None) == (url is None):
            raise ValueError("MCPTool needs a server: a command (stdio) or a url (streamable HTTP)")
        self.command, self.args, self.env, self.cwd = command, [str(arg) for arg in args], dict(env or {}), cwd
        self.url, self.headers = url, dict(headers or {})
        if auth is not None:
            self.headers["Authorization"] = f"Bearer {auth}"

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
        self._set_server(new_config, auth, headers)
        self._tools, self._validators = None, {}

    @property
    def server_description(self) -> str:
        if self.url is not None:
            return f"HTTP server at {self.url}"
        return f"stdio server `{' '.join([os.path.basename(self.command or ''), *self.args])}`"

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
                self._tools = self._list_in_thread()
        return list(self._tools or [])

    async def alist_tools(self) -> list[MCPToolSpec]:
        """The server's tools, opening the session on this loop if it is not open."""
        try:
            session = await self._open_session()
        except _CallFailed as exc:
            raise MCPConnectionError(exc.message) from None
        return list(session.tools)

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

    # -- parsing -----------------------------------------------------------------------------

    def parse(self, action: str) -> ToolCall | None:
        """The first MCP call in ``action``: any call in GEM's format (an unknown name is answered
        as such), or a JSON call naming one of the server's tools (or this tool, dispatching).
        Its arguments are ``{"name": tool, "arguments": arguments}``."""
        found: list[ToolCall] = []
        gem = _GEM_CALL.search(action)
        if gem is not None:
            arguments: Any = gem.group(2).strip() if gem.group(2) is not None else {}
            found.append(self._call(gem.group(1).strip(), arguments or {}, action, gem.end()))
        for block in _JSON_CALL.finditer(action):
            if gem is not None and block.end() >= gem.end():
                break
            call = self._json_call(block.group(1), action, block.end())
            if call is not None:
                found.append(call)
                break
        return min(found, key=lambda call: call.end, default=None)

    def _json_call(self, text: str, action: str, end: int) -> ToolCall | None:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return None
        name, arguments = payload["name"], payload.get("arguments", {})
        try:
            names = {spec.name for spec in self.list_tools()}
        except MCPConnectionError:  # no server to ask: only GEM's format and the dispatch form are ours
            names = set()
        if name == self.name and name not in names:  # the dispatch form
            if isinstance(arguments, str):
                with contextlib.suppress(json.JSONDecodeError):
                    arguments = json.loads(arguments)
            if not isinstance(arguments, dict):
                return self._call("", arguments, action, end)
            return self._call(arguments.get("name", ""), arguments.get("arguments", {}), action, end)
        if name not in names:
            return None  # another tool's call, or one the wrapper answers as unknown
        return self._call(name, arguments, action, end)

    def _call(self, name: Any, arguments: Any, action: str, end: int) -> ToolCall:
        return ToolCall(self.name, {"name": name, "arguments": arguments}, action[:end], end)

    # -- calling -----------------------------------------------------------------------------

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        name = call.arguments.get("name")
        details: dict[str, Any] = {"tool": name}
        try:
            tools = self._tools if self._tools is not None else (await self._open_session()).tools
            spec = next((spec for spec in tools if spec.name == name), None)
            if spec is None:
                listing = ", ".join(spec.name for spec in tools)
                raise _CallFailed(MCPErrorKind.UNKNOWN_TOOL, f"Tool {name!r} not found. Available tools: {listing}")
            arguments = self._arguments(spec, call.arguments.get("arguments"))
            result = await self._invoke(spec.name, arguments)
        except _CallFailed as failure:
            status = _STATUS.get(failure.kind, Status.ERROR)
            details.update(error=failure.kind.value, status=status.value)
            return ToolOutput(
                self._observation(f"[Tool execution failed: {failure.message}]"), error=True, details=details
            )
        text = result_text(result)
        structured = _attr(result, "structured_content", "structuredContent")
        if structured is not None:
            details["structured_content"] = structured
        if _attr(result, "is_error", "isError"):
            details.update(error=MCPErrorKind.TOOL_ERROR.value, status=Status.ERROR.value)
            return ToolOutput(self._observation(f"[Tool execution error: {text}]"), error=True, details=details)
        details["status"] = Status.OK.value
        return ToolOutput(self._observation(text), details=details)

    def _observation(self, body: str) -> str:
        return tool_response(body if self.max_output_chars is None else cap(body, self.max_output_chars))

    def _arguments(self, spec: MCPToolSpec, arguments: Any) -> dict[str, Any]:
        """The call's arguments as a JSON object that fits the tool's input schema."""
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):  # GEM's <arguments> text, or OpenAI's JSON-encoded arguments
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise _CallFailed(
                    MCPErrorKind.INVALID_ARGUMENTS,
                    f"the arguments of {spec.name!r} are not valid JSON ({exc.msg} at character {exc.pos})",
                ) from None
        if not isinstance(arguments, dict):
            raise _CallFailed(MCPErrorKind.INVALID_ARGUMENTS, f"the arguments of {spec.name!r} must be a JSON object")
        if self.validate_arguments:
            problem = self._schema_problem(spec, arguments)
            if problem is not None:
                raise _CallFailed(MCPErrorKind.INVALID_ARGUMENTS, f"invalid arguments for {spec.name!r}: {problem}")
        return arguments

    def _schema_problem(self, spec: MCPToolSpec, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` by the tool's schema (None: nothing, or the schema
        cannot be checked, which leaves the judgement to the server)."""
        try:
            import jsonschema
        except ImportError:
            return None
        try:
            validator = self._validators.get(spec.name)
            if validator is None:
                cls = jsonschema.validators.validator_for(spec.input_schema)
                cls.check_schema(spec.input_schema)
                validator = self._validators[spec.name] = cls(spec.input_schema)
            error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        except Exception:  # a schema jsonschema cannot use (invalid, a $ref it cannot resolve)
            return None
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    async def _invoke(self, name: str, arguments: dict[str, Any]) -> Any:
        session = await self._open_session()
        limit = self.timeout + PROBE_TIMEOUT + CLOSE_TIMEOUT
        try:
            return await _on_loop_of(session, limit, self._call_on, session, name, arguments)
        except _CallFailed as failure:
            if failure.kind is MCPErrorKind.CONNECTION:
                self._retire(session)
            raise

    async def _call_on(self, session: _Session, name: str, arguments: dict[str, Any]) -> Any:
        """The call on the session's own loop, bounded by the timeout and by the session's end.
        A call that times out is followed by a ping, which tells a slow tool from a server that
        is gone without the transport saying so (mcp 1.x's HTTP client leaves such a request
        waiting)."""
        client = session.client
        if client is None:
            raise _CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))
        state, value = await _guarded(session, lambda: client.call_tool(name, arguments), self.timeout)
        if state == "ok":
            return value
        if state == "error":
            raise self._failure(session, name, value)
        if state == "timeout":
            probe, answer = await _guarded(session, client.send_ping, PROBE_TIMEOUT)
            lost = probe == "ended" or (
                probe == "error" and self._failure(session, name, answer).kind is MCPErrorKind.CONNECTION
            )
            if not lost:
                raise _CallFailed(MCPErrorKind.TIMEOUT, f"{name!r} did not finish within {self.timeout:g}s")
        raise _CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))

    def _failure(self, session: _Session, name: str, exc: Exception) -> _CallFailed:
        """The failure a call that raised ``exc`` is."""
        if isinstance(exc, _sdk().MCPError):
            if getattr(getattr(exc, "error", None), "code", None) == _CONNECTION_CLOSED:
                return _CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))
            return _CallFailed(MCPErrorKind.SERVER_ERROR, f"the MCP server refused {name!r}: {exc}")
        if _is_connection_error(exc):
            return _CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))
        return _CallFailed(MCPErrorKind.PROTOCOL, f"unreadable answer to {name!r}: {_describe(exc)}")

    def _lost_message(self, session: _Session, name: str) -> str:
        cause = f" ({_describe(session.error)})" if session.error is not None else ""
        return f"the MCP server ({self.server_description}) went away during {name!r}{cause}"

    # -- the session ------------------------------------------------------------------------

    async def _open_session(self) -> _Session:
        """The open session, opened on this loop when there is none or the last one ended."""
        loop = _running_loop()
        with self._lock:
            session = self._session
            if session is None or session.ended or not session.usable_from(loop):
                if session is not None:  # it died, or its loop is gone
                    self._lost = self._lost or (session.ended and session.was_open)
                    self._keep_closing(session)
                if self._lost and not self.reconnect:
                    raise _CallFailed(
                        MCPErrorKind.CONNECTION,
                        f"the connection to the MCP server ({self.server_description}) was lost",
                    )
                session = self._session = _Session(self._connect)
        await _on_loop_of(session, self.connect_timeout + CLOSE_TIMEOUT, session.opened.wait)
        if session.client is None:
            cause = _describe(session.error) if session.error is not None else "it closed"
            raise _CallFailed(
                MCPErrorKind.CONNECTION, f"cannot reach the MCP server ({self.server_description}): {cause}"
            )
        if session.tools != self._tools:
            self._tools, self._validators = session.tools, {}
        return session

    def _retire(self, session: _Session) -> None:
        """Stop using a session whose connection failed; the next call opens a fresh one."""
        with self._lock:
            if self._session is session:
                self._session = None
                self._lost = True
                self._keep_closing(session)
        _stop_soon(session)

    def _keep_closing(self, session: _Session) -> None:
        """Remember a session left behind until it is closed, for :meth:`aclose` to wait on."""
        self._retired = [s for s in self._retired if not s.done.is_set() and s is not session]
        if not session.done.is_set():
            self._retired.append(session)

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[tuple[Any, list[MCPToolSpec]]]:
        """Connect, shake hands and list the tools; the session is open until the exit."""
        sdk = _sdk()
        async with contextlib.AsyncExitStack() as stack:
            if self.url is None:
                assert self.command is not None
                params = sdk.StdioServerParameters(
                    command=self.command,
                    args=self.args,
                    env=sdk.default_environment() | self.env,  # what mcp 2 does itself; 1.x replaces
                    cwd=self.cwd,
                )
                streams = await stack.enter_async_context(sdk.stdio_client(params, errlog=self.errlog or sys.stderr))
            elif sdk.http_client is not None:
                http = None
                if self.headers:
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    http = await stack.enter_async_context(create_mcp_http_client(headers=self.headers))
                streams = await stack.enter_async_context(sdk.http_client(self.url, http_client=http))
            else:  # mcp 1.x before streamable_http_client
                streams = await stack.enter_async_context(
                    sdk.legacy_http_client(self.url, headers=self.headers or None)
                )
            client = await stack.enter_async_context(sdk.ClientSession(streams[0], streams[1]))
            try:
                with anyio.fail_after(self.connect_timeout):
                    await client.initialize()
                    tools = await _list_all(client)
            except TimeoutError:
                raise TimeoutError(f"no handshake and tool listing within {self.connect_timeout:g}s") from None
            yield client, tools

    async def _list_once(self) -> list[MCPToolSpec]:
        try:
            async with self._connect() as (_, tools):
                return tools
        except Exception as exc:
            raise MCPConnectionError(
                f"cannot reach the MCP server ({self.server_description}): {_describe(exc)}"
            ) from None

    def _list_in_thread(self) -> list[MCPToolSpec]:
        """The tools over a short-lived connection on a loop of a thread of its own, for sync
        code running inside an event loop that it must not wait on."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["tools"] = anyio.run(self._list_once)
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc

        thread = threading.Thread(target=run, name="mcp-list-tools", daemon=True)
        thread.start()
        thread.join(self.connect_timeout + CLOSE_TIMEOUT)
        if thread.is_alive():
            raise MCPConnectionError(f"listing the tools of the MCP server ({self.server_description}) did not finish")
        if "error" in box:
            raise box["error"]
        tools: list[MCPToolSpec] = box["tools"]
        return tools

    async def aclose(self) -> None:
        """Close the session and stop its server (a stdio server's process ends here); a later
        call opens a new one. Safe to call twice, and from any loop."""
        with self._lock:
            sessions = [s for s in (self._session, *self._retired) if s is not None]
            self._session, self._retired, self._lost = None, [], False
        loop = _running_loop()
        for session in sessions:
            if session.usable_from(loop):
                with contextlib.suppress(_CallFailed):  # its loop stopped meanwhile
                    await _on_loop_of(session, 2 * CLOSE_TIMEOUT, session.close)

    def close(self) -> None:
        """Blocking :meth:`aclose`, for sync code (not inside the loop that holds the session)."""
        session = self._session
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and session is not None and session.loop is loop:
            raise RuntimeError("the MCP session lives on this event loop: await tool.aclose() instead")
        run_sync(self.aclose)


async def _list_all(client: Any) -> list[MCPToolSpec]:
    """Every tool of the server, following pagination."""
    specs: list[MCPToolSpec] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        if cursor is None:
            listing = await client.list_tools()
        else:
            listing = await client.list_tools(params=_sdk().PaginatedRequestParams(cursor=cursor))
        for tool in listing.tools:
            schema = _attr(tool, "input_schema", "inputSchema") or {"type": "object", "properties": {}}
            specs.append(MCPToolSpec(tool.name, tool.description or "", dict(schema)))
        cursor = _attr(listing, "next_cursor", "nextCursor")
        if not cursor:
            break
    return specs


def _server_from_config(config: str | Mapping[str, Any]) -> dict[str, Any]:
    """One server's parameters from GEM's config forms."""
    if isinstance(config, str):
        return {"url": config}
    if "mcpServers" in config:
        servers = config["mcpServers"]
        if len(servers) != 1:
            raise ValueError(
                f"MCPTool connects to one server; this config has {len(servers)} (make one tool per server)"
            )
        server = dict(next(iter(servers.values())))
    else:
        server = dict(config)
    transport = server.pop("transport", None)
    if transport in ("http", "streamable-http", "streamable_http") or (transport is None and "url" in server):
        if "url" not in server:
            raise ValueError("an HTTP server's config needs a url")
        return {"url": server["url"], "headers": server.get("headers") or {}}
    if transport not in (None, "stdio"):
        raise ValueError(f"unsupported MCP transport {transport!r}: stdio or http")
    if "command" not in server:
        raise ValueError("a stdio server's config needs a command")
    return {key: server[key] for key in ("command", "args", "env", "cwd") if key in server}
