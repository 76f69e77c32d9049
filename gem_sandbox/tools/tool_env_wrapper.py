"""GEM's ``gem.tools.tool_env_wrapper``: the wrapper that answers tool calls in actions."""

from gem_sandbox.wrappers.tool_env import ToolEnvWrapper

__all__ = ["ToolEnvWrapper"]
