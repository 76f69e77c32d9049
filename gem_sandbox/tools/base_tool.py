"""GEM's ``gem.tools.base_tool``: the base class of tools.

``BaseTool`` is :class:`gem_sandbox.tools.base.Tool`, which keeps GEM's
``execute_action(action) -> (is_valid, has_error, observation, parsed_action)`` and
``instruction_string()`` and adds what the wrapper here needs of a tool: ``parse`` (find a call
without running it) and ``aexecute`` (run it, as part of an episode).
"""

from gem_sandbox.tools.base import Tool as BaseTool

__all__ = ["BaseTool"]
