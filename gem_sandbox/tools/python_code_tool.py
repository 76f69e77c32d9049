"""GEM's ``gem.tools.python_code_tool``: the Python tool, whose code runs in a sandbox here."""

from gem_sandbox.tools.python import PythonCodeTool

__all__ = ["PythonCodeTool"]
