"""A small MCP server with deterministic tools, for tests and examples of :class:`MCPTool`.

Over stdio (what ``MCPTool(command=sys.executable, args=["-m", ...])`` spawns)::

    python -m gem_sandbox.tools.mcp_demo_server

Over streamable HTTP, on a loopback address only (``--port 0`` picks a free port)::

    python -m gem_sandbox.tools.mcp_demo_server --transport streamable-http --port 0

In HTTP mode the server binds its socket before it prints ``MCP_DEMO_URL <url>`` on stdout, so
whoever started it can read the port from that line instead of guessing a free one.

Besides ordinary tools it has ones that exercise the client's failure paths: ``fail`` raises
(a ``ToolError``, whose message reaches the client; the SDK hides other exceptions' messages),
``sleep`` outlasts a timeout, ``crash`` kills the server mid-call, ``pid`` names the process to
check that closing the client stops it. It needs the ``mcp`` SDK (1.x's ``FastMCP`` or 2.x's
``MCPServer``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Literal, cast

import anyio

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore  # the other major version's types
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore

NAME = "gem-sandbox-demo"
URL_LINE = "MCP_DEMO_URL"  # the first word of the line that announces the HTTP endpoint
PATH = "/mcp"
ENV_PREFIX = "MCP_DEMO_"  # getenv reads only these, so the server cannot leak other variables
LOOPBACK = ("127.0.0.1", "::1", "localhost")
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

CAPITALS = {
    "france": "Paris",
    "germany": "Berlin",
    "italy": "Rome",
    "japan": "Tokyo",
    "kenya": "Nairobi",
    "peru": "Lima",
}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def reverse(text: str) -> str:
    """Reverse a string."""
    return text[::-1]


def lookup(country: str) -> str:
    """The capital of a country, from a fixed table of six (France, Germany, Italy, Japan, Kenya, Peru)."""
    try:
        return CAPITALS[country.strip().lower()]
    except KeyError:
        raise ToolError(f"no capital known for {country!r}; known: {', '.join(sorted(CAPITALS))}") from None


def divide(a: int, b: int) -> dict[str, int]:
    """Integer division: the quotient and the remainder of a divided by b."""
    if b == 0:
        raise ToolError("division by zero")
    quotient, remainder = divmod(a, b)
    return {"quotient": quotient, "remainder": remainder}


def fail(message: str = "failure on request") -> str:
    """Always raises, with the given message."""
    raise ToolError(message)


async def sleep(seconds: float) -> str:
    """Wait the given number of seconds, then say so."""
    await anyio.sleep(seconds)
    return f"slept {seconds:g}s"


def crash() -> str:
    """Kill the server at once, mid-call."""
    sys.stdout.flush()
    os._exit(3)


def pid() -> int:
    """The server's process id."""
    return os.getpid()


def getenv(name: str) -> str:
    """The value of an environment variable whose name starts with MCP_DEMO_ ('' when unset)."""
    if not name.startswith(ENV_PREFIX):
        raise ToolError(f"only variables starting with {ENV_PREFIX} can be read")
    return os.environ.get(name, "")


TOOLS = (add, reverse, lookup, divide, fail, sleep, crash, pid, getenv)


def build_server(log_level: LogLevel = "WARNING") -> Any:
    """The server with every demo tool, on whichever major version of the SDK is installed."""
    server = _Server(NAME, log_level=log_level)
    for fn in TOOLS:
        server.tool()(fn)
    return server


async def serve_http(server: Any, host: str, port: int) -> None:
    """Serve streamable HTTP on a socket bound here, announcing its URL once it listens."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"{URL_LINE} http://{shown}:{bound}{PATH}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", access_log=False, lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP only; loopback addresses only")
    parser.add_argument("--port", type=int, default=0, help="HTTP only; 0 picks a free port")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    server = build_server(cast(LogLevel, args.log_level))
    if args.transport == "stdio":
        server.run("stdio")
        return
    if args.host not in LOOPBACK:
        parser.error(f"--host must be a loopback address ({', '.join(LOOPBACK)}): the demo can crash on request")
    anyio.run(serve_http, server, args.host, args.port)


if __name__ == "__main__":
    main()
