"""GEM's ``gem.tools.mcp_tool``: the MCP tool (:mod:`gem_sandbox.tools.mcp`)."""

from gem_sandbox.tools.mcp import MCPTool


def is_timeout_error(error: Exception) -> bool:
    """Whether ``error`` is a timeout (GEM's helper): a TimeoutError, or a message that says so."""
    words = ("etimedout", "econnreset", "timeout", "timed out")
    return isinstance(error, TimeoutError) or any(word in str(error).lower() for word in words)


__all__ = ["MCPTool", "is_timeout_error"]
