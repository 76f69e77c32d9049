"""Wrappers that each change one thing about an env, and GEM's factory names for them, each
module at GEM's path (``observation_wrapper``, ``episode_tracking_wrapper``,
``wrapper_factory``).

``ToolEnvWrapper`` resolves on first access: it runs tools in sandboxes, and the wrappers
that need none must not load that code.
"""

from typing import Any

from gem_sandbox.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem_sandbox.wrappers.observation_wrapper import ObservationWrapper, ObservationWrapperError
from gem_sandbox.wrappers.wrapper_factory import WRAPPER_FACTORY, get_wrapper_fns

__all__ = [
    "WRAPPER_FACTORY",
    "EpisodeTrackingWrapper",
    "ObservationWrapper",
    "ObservationWrapperError",
    "ToolEnvWrapper",
    "get_wrapper_fns",
]


def __getattr__(name: str) -> Any:
    if name == "ToolEnvWrapper":
        from gem_sandbox.tools.tool_env_wrapper import ToolEnvWrapper

        return ToolEnvWrapper
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
