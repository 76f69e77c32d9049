"""Tools an env exposes to the model: Python, shell, search, calculator, and an MCP server's.

Each is a :class:`Tool`: it finds its call in the model's text (GEM's tags; JSON tool calls
when the wrapper opts in), runs it (on a runtime's sandboxes, for the sandboxed ones) and
answers with what the model sees next. :class:`MCPTool` needs the ``mcp`` extra only when one
is built.
"""

from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.calculator import CalculatorTool
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.mcp_tool import MCPConnectionError, MCPErrorKind, MCPTool, MCPToolSpec
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.tools.sandboxed import SandboxTool
from gem_sandbox.tools.search_tool import SearchTool
from gem_sandbox.tools.shell import ShellTool

__all__ = [
    "CalculatorTool",
    "Episode",
    "MCPConnectionError",
    "MCPErrorKind",
    "MCPTool",
    "MCPToolSpec",
    "PythonCodeTool",
    "SandboxTool",
    "SearchTool",
    "ShellTool",
    "Tool",
    "ToolCall",
    "ToolOutput",
]
