"""Wrappers that each change one thing about an env, and GEM's factory names for them.

GEM's module paths (``observation_wrapper``, ``episode_tracking_wrapper``,
``wrapper_factory``) re-export these.
"""

from gem_sandbox.wrappers.episode_tracking import EpisodeTrackingWrapper
from gem_sandbox.wrappers.factory import WRAPPER_FACTORY, get_wrapper_fns
from gem_sandbox.wrappers.observation import ObservationWrapper, ObservationWrapperError
from gem_sandbox.wrappers.tool_env import ToolEnvWrapper

__all__ = [
    "WRAPPER_FACTORY",
    "EpisodeTrackingWrapper",
    "ObservationWrapper",
    "ObservationWrapperError",
    "ToolEnvWrapper",
    "get_wrapper_fns",
]
