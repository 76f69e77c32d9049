"""The transport to the MCP server a tool talks to: where the server is (GEM's config forms)
and how to connect to it.

A server is a command to spawn, spoken to over stdio, or a URL, spoken to over streamable
HTTP. :meth:`MCPServer.connect` spawns or reaches it, shakes hands and lists its tools.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio

from gem_sandbox.tools.mcp_calls import MCPToolSpec
from gem_sandbox.tools.mcp_sdk import list_all, sdk


@dataclass
class MCPServer:
    """A stdio server (``command``, ``args``, ``env`` added to the SDK's minimal environment,
    ``cwd``) or a streamable HTTP one (``url``, ``headers``)."""

    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(
        cls,
        config: str | Mapping[str, Any] | None,
        auth: str | None,
        headers: Mapping[str, str] | None,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
    ) -> MCPServer:
        """The server of :class:`~gem_sandbox.tools.mcp_tool.MCPTool`'s arguments: a config in
        GEM's forms, or a command, or a url; ``auth`` is a bearer token for HTTP."""
        if config is not None:
            if command is not None or url is not None:
                raise ValueError("give MCPTool a config, a command or a url, not several")
            server = _server_from_config(config)
            command, url = server.get("command"), server.get("url")
            args, env, cwd = server.get("args", args), server.get("env", env), server.get("cwd", cwd)
            headers = {**server.get("headers", {}), **(headers or {})}
        if (command is None) == (url is None):
            raise ValueError("MCPTool needs a server: a command (stdio) or a url (streamable HTTP)")
        all_headers = dict(headers or {})
        if auth is not None:
            all_headers["Authorization"] = f"Bearer {auth}"
        return cls(command, [str(arg) for arg in args], dict(env or {}), cwd, url, all_headers)

    @property
    def description(self) -> str:
        if self.url is not None:
            return f"HTTP server at {self.url}"
        return f"stdio server `{' '.join([os.path.basename(self.command or ''), *self.args])}`"

    @contextlib.asynccontextmanager
    async def connect(
        self, connect_timeout: float, errlog: TextIO | None = None
    ) -> AsyncIterator[tuple[Any, list[MCPToolSpec]]]:
        """Connect, shake hands and list the tools, within ``connect_timeout`` seconds; yields
        the SDK's ClientSession and the tools, open until the exit. A stdio server's stderr
        goes to ``errlog`` (default: this process's)."""
        mcp = sdk()
        async with contextlib.AsyncExitStack() as stack:
            if self.url is None:
                assert self.command is not None
                params = mcp.StdioServerParameters(
                    command=self.command,
                    args=self.args,
                    env=mcp.default_environment() | self.env,  # what mcp 2 does itself; 1.x replaces
                    cwd=self.cwd,
                )
                streams = await stack.enter_async_context(mcp.stdio_client(params, errlog=errlog or sys.stderr))
            elif mcp.http_client is not None:
                http = None
                if self.headers:
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    http = await stack.enter_async_context(create_mcp_http_client(headers=self.headers))
                streams = await stack.enter_async_context(mcp.http_client(self.url, http_client=http))
            else:  # mcp 1.x before streamable_http_client
                streams = await stack.enter_async_context(
                    mcp.legacy_http_client(self.url, headers=self.headers or None)
                )
            client = await stack.enter_async_context(mcp.ClientSession(streams[0], streams[1]))
            try:
                with anyio.fail_after(connect_timeout):
                    await client.initialize()
                    tools = await list_all(client)
            except TimeoutError:
                raise TimeoutError(f"no handshake and tool listing within {connect_timeout:g}s") from None
            yield client, tools


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
