"""The MCP SDK, imported on first use (it is optional and slow to import), on either major
version (mcp 1.x names fields in camel case, 2.x in snake case), and reading what it returns.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from types import SimpleNamespace
from typing import Any

import anyio

from gem_sandbox.tools.mcp_calls import MCPToolSpec

#: The JSON-RPC code the SDK gives requests whose connection ended.
CONNECTION_CLOSED = -32000
_MAX_PAGES = 100  # of a paginated tool listing


@functools.cache
def sdk() -> SimpleNamespace:
    """The parts of the SDK gem-sandbox uses; ImportError with the fix when it is missing."""
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


def attr(obj: Any, *names: str) -> Any:
    """The first of ``names`` that ``obj`` has (a field's 2.x name, then its 1.x name)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the transport is gone (a stream closed, a socket or HTTP failure)."""
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)):
        return True
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")


def describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups (the transports' task groups
    raise them) for the first real cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
        structured = attr(result, "structured_content", "structuredContent")
        if structured is not None:
            parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts) if parts else "Tool execution completed with no output"


def _binary_size(data: Any) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, TypeError, ValueError):
        return len(data or "")


async def list_all(client: Any) -> list[MCPToolSpec]:
    """Every tool of the server ``client`` (a ClientSession) is connected to, following pagination."""
    specs: list[MCPToolSpec] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        if cursor is None:
            listing = await client.list_tools()
        else:
            listing = await client.list_tools(params=sdk().PaginatedRequestParams(cursor=cursor))
        for tool in listing.tools:
            schema = attr(tool, "input_schema", "inputSchema") or {"type": "object", "properties": {}}
            specs.append(MCPToolSpec(tool.name, tool.description or "", dict(schema)))
        cursor = attr(listing, "next_cursor", "nextCursor")
        if not cursor:
            break
    return specs
