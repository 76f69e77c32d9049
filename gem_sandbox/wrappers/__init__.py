"""Wrappers that each change one thing about an env, and GEM's factory names for them."""

from gem_sandbox.wrappers.episode_tracking import EpisodeTrackingWrapper
from gem_sandbox.wrappers.factory import WRAPPER_FACTORY, get_wrapper_fns
from gem_sandbox.wrappers.observation import ObservationWrapper
from gem_sandbox.wrappers.tool_env import ToolEnvWrapper

__all__ = ["WRAPPER_FACTORY", "EpisodeTrackingWrapper", "ObservationWrapper", "ToolEnvWrapper", "get_wrapper_fns"]
