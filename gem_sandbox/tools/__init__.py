"""Tools an env exposes to the model: Python, shell, search, calculator.

Each is a :class:`Tool`: it finds its call in the model's text (GEM's tags or JSON), runs it
(on a runtime's sandboxes, for the sandboxed ones) and answers with what the model sees next.
"""

from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.calculator import CalculatorTool
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.python import PythonCodeTool
from gem_sandbox.tools.sandboxed import SandboxTool
from gem_sandbox.tools.search import SearchTool
from gem_sandbox.tools.shell import ShellTool

__all__ = [
    "CalculatorTool",
    "Episode",
    "PythonCodeTool",
    "SandboxTool",
    "SearchTool",
    "ShellTool",
    "Tool",
    "ToolCall",
    "ToolOutput",
]
